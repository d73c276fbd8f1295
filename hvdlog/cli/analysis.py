"""What the analysis commands (first-failure, stalls) share: the ``--size`` option and the sentence when nothing is found."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from hvdlog.cli.text import sentence
from hvdlog.documents import Document, job_of
from hvdlog.query.spec import MAX_JOB_SIZE

if TYPE_CHECKING:
    from hvdlog.cli.options import Run

__all__ = ["JobScope", "nothing_found", "read_with", "size_option"]


def size_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--size N``: the job's number of ranks when the logs do not say it (never guessed from the ranks seen)."""
    return click.option(
        "--size", type=click.IntRange(1, MAX_JOB_SIZE), default=None, metavar="N",
        help="Number of ranks of the job, when its own events and the launcher's -np do not say it.",
    )(command)


class JobScope:
    """What was looked at, counted while documents stream by: ranks, steps, jobs (for the 'nothing found' sentence)."""

    def __init__(self) -> None:
        self.ranks: set[int] = set()
        self.steps: set[int] = set()
        self.jobs: dict[str, None] = {}

    def watch(self, docs: Iterable[Document]) -> Iterable[Document]:
        """``docs``, unchanged, counted on the way."""
        for doc in docs:
            if isinstance(rank := doc.get("rank"), int):
                self.ranks.add(rank)
            if isinstance(step := doc.get("step"), int):
                self.steps.add(step)
            if (job := job_of(doc)) is not None:
                self.jobs.setdefault(str(job), None)
            yield doc

    def describe(self) -> str:
        """``2 ranks, 20 steps of job demo-crash``."""
        parts = [f"{len(self.ranks)} rank{'s' if len(self.ranks) != 1 else ''}" if self.ranks else "lines without ranks"]
        if self.steps:
            parts.append(f"{len(self.steps)} step{'s' if len(self.steps) != 1 else ''}")
        text = ", ".join(parts)
        if self.jobs:
            jobs = list(self.jobs)
            text += f" of job {jobs[0]}" if len(jobs) == 1 else f" of {len(jobs)} jobs"
        return text


def nothing_found(what: str, run: Run) -> None:
    """One sentence on stderr when an analysis has nothing to report (the exit code stays 1):
    what was read is counted only then, by reading the run's documents once more."""
    scope = JobScope()
    for _doc in scope.watch(run.documents()):
        pass
    click.echo(f"hvdlog: {sentence(f'{what} in {scope.describe()}')}", err=True)


def read_with(run: Run, workers: int) -> None:
    """The run's files are read by ``workers`` processes (``-j``), each a consecutive share of them;
    the matches come back in file order, so the answer is the one of ``-j 1``. Elasticsearch is not affected."""
    from hvdlog.query.files import FileSource

    for source in run.sources:
        if isinstance(source, FileSource):
            source.workers = workers

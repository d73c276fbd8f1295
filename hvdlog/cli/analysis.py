"""What the analysis commands (first-failure, stalls) share: the ``--size`` option and the sentence when nothing is found."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hvdlog.cli.text import sentence
from hvdlog.query.spec import MAX_JOB_SIZE

if TYPE_CHECKING:
    from hvdlog.cli.options import Run

__all__ = ["nothing_found", "read_with", "size_option"]


def size_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--size N``: the job's number of ranks when the logs do not say it (never guessed from the ranks seen)."""
    return click.option(
        "--size", type=click.IntRange(1, MAX_JOB_SIZE), default=None, metavar="N",
        help="Number of ranks of the job, when its own events and the launcher's -np do not say it.",
    )(command)


def nothing_found(what: str, run: Run) -> None:
    """One sentence on stderr when an analysis has nothing to report (the exit code stays 1), saying
    what was read: counted by the file sources while the analysis read them, and by the
    Elasticsearch server (one aggregation); never a second read of the documents."""
    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.files import FileSource
    from hvdlog.query.scope import ReadScope, describe
    from hvdlog.query.source import SourceError

    scope = ReadScope()
    for source in run.sources:
        if isinstance(source, FileSource):
            scope.merge(source.scope)
        elif isinstance(source, ElasticsearchSource):
            try:
                scope.merge(source.scope(run.spec))
            except SourceError as exc:  # only the sentence's counts are lost: said, not hidden
                click.echo(f"hvdlog: warning: {source.label}: cannot count what was read ({exc})", err=True)
    click.echo(f"hvdlog: {sentence(f'{what} in {describe(scope)}')}", err=True)


def read_with(run: Run, workers: int) -> None:
    """The run's files are read by ``workers`` processes (``-j``), each a consecutive share of them;
    the matches come back in file order, so the answer is the one of ``-j 1``. Elasticsearch is not affected."""
    from hvdlog.query.files import FileSource

    for source in run.sources:
        if isinstance(source, FileSource):
            source.workers = workers

"""What a read went through, counted while it streams: the files and their bytes, the ranks and jobs.

An analysis that finds nothing says what it looked at ("no stall in 1024 ranks of job x (1024
files, 85 MB read)"). That sentence must come from the read the analysis already did: reading
every document again to count them costs more than the analysis (a prefiltered read parses only
the few lines that can matter) and holds every event in memory. So a file source counts here,
per file, its path and size and, per document it parses anyway, its rank and job (what a path
says, rank and job, is read from the paths only when the sentence is written);
an Elasticsearch source asks the server to count (an aggregation, never a second read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hvdlog.documents import Document

__all__ = ["ReadScope", "describe"]


@dataclass
class ReadScope:
    """Ranks, jobs and files a read went through (sets: a second search of the same files adds nothing)."""

    ranks: set[int] = field(default_factory=set)
    jobs: dict[str, None] = field(default_factory=dict)
    #: File path -> bytes (files: what was read; Elasticsearch: empty).
    files: dict[str, int] = field(default_factory=dict)
    #: Distinct steps, where a server counted them (a file read skips most step lines unparsed).
    steps: int | None = None
    #: Ranks counted by a server (cardinality), added to :attr:`ranks`'s count.
    counted_ranks: int = 0

    def add_file(self, path: str, size: int) -> None:
        """A file read, and its size (what its path says is read only for the sentence: :func:`describe`)."""
        self.files[path] = size

    def saw(self, doc: Document) -> None:
        """A document parsed on the way (its rank and job, when it has them)."""
        rank = doc.get("rank")
        if type(rank) is int:
            self.ranks.add(rank)
        job = doc.get("job")  # its own field only: a path's job is read at the end (job_of would parse each path now)
        if isinstance(job, (str, int)) and not isinstance(job, bool):
            self.jobs.setdefault(str(job), None)

    def merge(self, other: ReadScope) -> None:
        """Another reader's counts (a worker process, another source)."""
        self.ranks |= other.ranks
        self.jobs.update(other.jobs)
        self.files.update(other.files)
        self.counted_ranks += other.counted_ranks
        if other.steps is not None:
            self.steps = max(self.steps or 0, other.steps)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return _plural(count, "byte")


def _from_paths(scope: ReadScope) -> ReadScope:
    """``scope`` with the ranks and jobs its files' paths name (our layout, ``--output-filename`` trees)."""
    from hvdlog.parse.launcher import path_fields

    named = ReadScope(set(scope.ranks), dict(scope.jobs), scope.files, scope.steps, scope.counted_ranks)
    for path in scope.files:
        fields = path_fields(path)
        if type(rank := fields.get("rank")) is int:
            named.ranks.add(rank)
        if isinstance(job := fields.get("job"), str):
            named.jobs.setdefault(job, None)
    return named


def describe(scope: ReadScope) -> str:
    """``1024 ranks of job x (1024 files, 85.0 MB read)``; ``2 ranks, 20 steps of job demo`` from a server."""
    scope = _from_paths(scope)
    ranks = max(len(scope.ranks), scope.counted_ranks)
    parts = [_plural(ranks, "rank") if ranks else _plural(len(scope.files), "file") if scope.files else "no documents"]
    if scope.steps:
        parts.append(_plural(scope.steps, "step"))
    text = ", ".join(parts)
    if scope.jobs:
        jobs = list(scope.jobs)
        text += f" of job {jobs[0]}" if len(jobs) == 1 else f" of {len(jobs)} jobs"
    if scope.files and ranks:
        text += f" ({_plural(len(scope.files), 'file')}, {_bytes(sum(scope.files.values()))} read)"
    elif scope.files:
        text += f" ({_bytes(sum(scope.files.values()))} read)"
    return text

"""What a read went through, counted while it streams: the files and their bytes, the ranks and jobs.

An analysis that finds nothing says what it looked at ("no stall in 1024 ranks of job x (1024
files, 85 MB read)"). That sentence must come from the read the analysis already did: reading
every document again to count them costs more than the analysis (a prefiltered read parses only
the few lines that can matter) and holds every event in memory. So a file source counts here,
per file, what its path says (rank, job) and, per document it parses anyway, its rank and job;
an Elasticsearch source asks the server to count (an aggregation, never a second read).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hvdlog.documents import Document, job_of

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

    def add_file(self, path: str, size: int, rank: object, job: object) -> None:
        """A file read: its size and what its path says."""
        self.files[path] = size
        if type(rank) is int:
            self.ranks.add(rank)
        if isinstance(job, str):
            self.jobs.setdefault(job, None)

    def saw(self, doc: Document) -> None:
        """A document parsed on the way (its rank and job, when it has them)."""
        rank = doc.get("rank")
        if type(rank) is int:
            self.ranks.add(rank)
        job = job_of(doc)
        if job is not None:
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


def describe(scope: ReadScope) -> str:
    """``1024 ranks of job x (1024 files, 85.0 MB read)``; ``2 ranks, 20 steps of job demo`` from a server."""
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

"""Who made the collective wait: negotiations, rank readiness and phase times from a timeline.

Horovod's coordinator (rank 0) writes the timeline. Each tensor is a Chrome-trace ``pid``
named by a ``process_name`` metadata record. For each collective it writes a negotiation
``B``/``E`` pair (``NEGOTIATE_ALLREDUCE``...) and, inside it, one ``X`` event named by a
rank number at the moment the coordinator learned that rank was ready; then the operation
(``B`` ``ALLREDUCE``) with its activities (``QUEUE``, ``MEMCPY_IN_FUSION_BUFFER``,
``GLOO_ALLREDUCE``...) as nested ``B``/``E`` pairs. Negotiations answered from Horovod's
response cache (``HOROVOD_CACHE_CAPACITY`` > 0, the default) have the ``B``/``E`` pair but
no per-rank ``X`` events: their wait is known, the rank that caused it is not — they are
counted as *unattributed* instead of guessed.

Definitions (per negotiation with per-rank readiness):

* the *last* rank is the one that became ready last;
* the *wait it caused* is the time between the second-to-last rank's readiness and its own:
  every other rank was ready and waited for it alone (with 2 ranks, the whole spread);
* a rank's *waited* time is from its own readiness to the end of the negotiation.

Per rank, wait caused is counted in wall-clock time: the gradients of one step are
negotiated together, so their overlapping waits count once (the union of the intervals),
while per tensor each negotiation counts on its own.
"""

from __future__ import annotations

import statistics
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvdlog.timeline_format.reader import ReadStats
from hvdlog.timeline_format.records import Negotiation, OperationRun, negotiations_and_runs, phase_class

__all__ = [
    "RankWait",
    "TensorWait",
    "TimelineAnalysis",
    "analyse_files",
    "summarise",
]

@dataclass
class RankWait:
    """One rank's share of the waiting, over every negotiation with per-rank readiness."""

    rank: int
    negotiations: int = 0
    times_last: int = 0
    #: Wall-clock seconds the others were all ready and waited for this rank alone.
    wait_caused_seconds: float = 0.0
    #: Median wait caused per negotiation in which this rank was last.
    wait_caused_median: float | None = None
    #: Wall-clock seconds this rank sat ready in negotiations, waiting for others.
    waited_seconds: float = 0.0
    #: Share of all attributed wait this rank caused (0..1).
    wait_share: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain fields, rounded for reading."""
        return {
            "rank": self.rank,
            "negotiations": self.negotiations,
            "times_last": self.times_last,
            "wait_caused_seconds": round(self.wait_caused_seconds, 6),
            "wait_caused_median": None if self.wait_caused_median is None else round(self.wait_caused_median, 6),
            "waited_seconds": round(self.waited_seconds, 6),
            "wait_share": round(self.wait_share, 4),
        }


@dataclass
class TensorWait:
    """One tensor's negotiations: the wait each rank caused on it, and its phase times."""

    tensor: str
    negotiations: int = 0
    attributed: int = 0
    negotiation_seconds: float = 0.0
    wait_caused: dict[int, float] = field(default_factory=dict)
    times_last: dict[int, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def total_wait_caused(self) -> float:
        """Attributed wait on this tensor, all ranks."""
        return sum(self.wait_caused.values())

    def to_json(self) -> dict[str, Any]:
        """Plain fields, rounded for reading."""
        return {
            "tensor": self.tensor,
            "negotiations": self.negotiations,
            "attributed": self.attributed,
            "negotiation_seconds": round(self.negotiation_seconds, 6),
            "wait_caused_seconds": round(self.total_wait_caused, 6),
            "wait_caused_by_rank": {str(r): round(s, 6) for r, s in sorted(self.wait_caused.items())},
            "times_last_by_rank": {str(r): n for r, n in sorted(self.times_last.items())},
            "phases": {name: round(s, 6) for name, s in sorted(self.phases.items())},
        }


@dataclass
class TimelineAnalysis:
    """Everything derived from one job's timeline (one or more files, e.g. rotated segments)."""

    sources: list[str] = field(default_factory=list)
    events: int = 0
    skipped_bytes: int = 0
    truncated: bool = False
    unterminated: bool = False
    negotiations: int = 0
    attributed: int = 0
    unattributed_seconds: float = 0.0
    #: Negotiations still open when the timeline ends (a hang, or a killed job), and per rank
    #: how many of them it had not joined: the rank a hung job waits for.
    open_negotiations: int = 0
    open_missing: dict[int, int] = field(default_factory=dict)
    ranks: list[RankWait] = field(default_factory=list)
    tensors: list[TensorWait] = field(default_factory=list)
    #: Seconds per phase class (negotiation, queue, memcpy, communication), as the coordinator ran them.
    phases: dict[str, float] = field(default_factory=dict)
    start_epoch_us: int | None = None

    def rank(self, rank: int) -> RankWait | None:
        """The row of one rank, if it took part in an attributed negotiation."""
        return next((row for row in self.ranks if row.rank == rank), None)

    def top_tensors(self, count: int = 10) -> list[TensorWait]:
        """Tensors by attributed wait caused, then by negotiation time."""
        return sorted(self.tensors, key=lambda t: (-t.total_wait_caused, -t.negotiation_seconds, t.tensor))[:count]

    def top_ranks(self, count: int = 10) -> list[RankWait]:
        """Ranks by wait caused."""
        return sorted(self.ranks, key=lambda r: (-r.wait_caused_seconds, r.rank))[:count]

    def to_json(self, top: int = 10) -> dict[str, Any]:
        """Summary for ``--json``: counts, per rank, top tensors, phases."""
        return {
            "sources": self.sources,
            "events": self.events,
            "skipped_bytes": self.skipped_bytes,
            "truncated": self.truncated,
            "unterminated": self.unterminated,
            "negotiations": self.negotiations,
            "attributed": self.attributed,
            "unattributed_seconds": round(self.unattributed_seconds, 6),
            "open_negotiations": self.open_negotiations,
            "open_missing": {str(rank): count for rank, count in sorted(self.open_missing.items())},
            "ranks": [row.to_json() for row in self.ranks],
            "top_tensors": [t.to_json() for t in self.top_tensors(top)],
            "phases": {name: round(s, 6) for name, s in sorted(self.phases.items())},
        }


class _Union:
    """Length of a union of intervals, whatever order they arrive in (files: by end; Elasticsearch: by start).

    Intervals are kept in two compact arrays (16 bytes each) and merged once, sorted, at the end.
    """

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: array[int] = array("q")
        self.ends: array[int] = array("q")

    def add(self, start: int, end: int) -> None:
        self.starts.append(start)
        self.ends.append(end)

    def seconds(self) -> float:
        total, current_start, current_end = 0, None, 0
        for start, end in sorted(zip(self.starts, self.ends, strict=True)):  # appended in pairs
            if current_start is not None and start <= current_end:
                current_end = max(current_end, end)
                continue
            if current_start is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        if current_start is not None:
            total += current_end - current_start
        return total / 1e6


def _rank_waits(took_part: Counter[int], caused: dict[int, array[float]], caused_wall: dict[int, _Union], waited: dict[int, _Union]) -> list[RankWait]:
    """Per rank: how often it was last, the wall time it made others wait (overlaps counted
    once) and its share of all such waiting."""
    wall = {rank: union.seconds() for rank, union in caused_wall.items()}
    total = sum(wall.values())
    return [
        RankWait(
            rank,
            negotiations=took_part[rank],
            times_last=len(caused.get(rank, [])),
            wait_caused_seconds=wall.get(rank, 0.0),
            wait_caused_median=statistics.median(caused[rank]) if caused.get(rank) else None,
            waited_seconds=waited[rank].seconds(),
            wait_share=(wall.get(rank, 0.0) / total) if total > 0 else 0.0,
        )
        for rank in sorted(took_part)
    ]


def summarise(records: Iterable[Negotiation | OperationRun], analysis: TimelineAnalysis | None = None) -> TimelineAnalysis:
    """Per rank and per tensor figures from negotiations and runs (from files or from Elasticsearch)."""
    result = analysis or TimelineAnalysis()
    caused: dict[int, array[float]] = defaultdict(lambda: array("d"))
    caused_wall: dict[int, _Union] = defaultdict(_Union)
    waited: dict[int, _Union] = defaultdict(_Union)
    took_part: Counter[int] = Counter()
    tensors: dict[str, TensorWait] = {}
    phases: dict[str, float] = defaultdict(float)
    still_open: list[Negotiation] = []
    for record in records:
        tensor = tensors.setdefault(record.tensor, TensorWait(record.tensor))
        if result.start_epoch_us is None and record.epoch_us is not None:
            result.start_epoch_us = record.epoch_us
        if isinstance(record, OperationRun):
            for activity, seconds in record.activities.items():
                tensor.phases[activity] = tensor.phases.get(activity, 0.0) + seconds
                phases[phase_class(activity)] += seconds
            continue
        if record.end_us is None:
            still_open.append(record)
            continue
        result.negotiations += 1
        tensor.negotiations += 1
        negotiated = record.seconds
        if negotiated is not None:
            tensor.negotiation_seconds += negotiated
            phases["negotiation"] += negotiated
        last = record.last_rank
        if last is None:
            result.unattributed_seconds += negotiated or 0.0
            continue
        result.attributed += 1
        tensor.attributed += 1
        wait = record.wait_caused or 0.0
        caused[last].append(wait)
        caused_wall[last].add(*record.wait_interval)  # type: ignore[misc]
        tensor.wait_caused[last] = tensor.wait_caused.get(last, 0.0) + wait
        tensor.times_last[last] = tensor.times_last.get(last, 0) + 1
        for rank, ready_us in record.ready.items():
            took_part[rank] += 1
            waited[rank].add(ready_us, max(record.end_us, ready_us))
    result.open_negotiations = len(still_open)
    for record in still_open:
        for rank in sorted(set(took_part) - set(record.ready)):
            result.open_missing[rank] = result.open_missing.get(rank, 0) + 1
    result.ranks = _rank_waits(took_part, caused, caused_wall, waited)
    result.tensors = sorted(tensors.values(), key=lambda t: t.tensor)
    result.phases = dict(phases)
    return result


def analyse_files(paths: Iterable[str | Path]) -> TimelineAnalysis:
    """Read and analyse one job's timeline files (rotated segments in order)."""
    paths = [Path(p) for p in paths]
    stats: list[ReadStats] = []
    analysis = TimelineAnalysis(sources=[str(p) for p in paths])
    summarise(negotiations_and_runs(paths, stats), analysis)
    analysis.events = sum(s.events for s in stats)
    analysis.skipped_bytes = sum(s.skipped for s in stats)
    analysis.truncated = any(s.truncated for s in stats)
    analysis.unterminated = any(s.unterminated for s in stats)
    return analysis

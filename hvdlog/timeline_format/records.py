"""Horovod's timeline as records: one negotiation or operation run per tensor and collective.

Shared by both sides: the rank's live export (:mod:`hvdlog.runtime.timeline_export`) turns
records into documents, and the read side (:mod:`hvdlog.timeline`) analyses them. Stdlib only.
The format itself is described in :mod:`hvdlog.timeline.analysis`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hvdlog.timeline_format.reader import ReadStats, read_events

__all__ = ["NEGOTIATE_PREFIX", "PHASES", "PHASE_CLASSES", "Negotiation", "OperationRun", "RecordBuilder", "negotiations_and_runs", "phase_class"]

NEGOTIATE_PREFIX: Final = "NEGOTIATE_"
#: Activity name -> the phase it belongs to; anything else inside an operation is communication.
PHASE_CLASSES: Final = {
    "QUEUE": "queue",
    "WAIT_FOR_DATA": "queue",
    "WAIT_FOR_OTHER_TENSOR_DATA": "queue",
    "INIT_FUSION_BUFFER": "memcpy",
    "MEMCPY_IN_FUSION_BUFFER": "memcpy",
    "MEMCPY_OUT_FUSION_BUFFER": "memcpy",
    "MEMCPY_IN_HOST_BUFFER": "memcpy",
    "MEMCPY_OUT_HOST_BUFFER": "memcpy",
}


#: The phase classes; a stored document names them (``horovod.timeline.memcpy_seconds``), and each is its own class.
PHASES: Final = ("queue", "memcpy", "communication")


def phase_class(name: str) -> str:
    """negotiation, queue, memcpy or communication, for an event name of the timeline (or a class name)."""
    if name.startswith(NEGOTIATE_PREFIX) or name == "negotiation":
        return "negotiation"
    if name in PHASES:
        return name
    return PHASE_CLASSES.get(name, "communication")


@dataclass
class Negotiation:
    """One negotiation of one tensor: when each rank became ready, as the coordinator saw it."""

    tensor: str
    operation: str
    start_us: int
    end_us: int | None = None
    ready: dict[int, int] = field(default_factory=dict)
    #: Microseconds since the epoch of the timeline's ts 0, when the file says (Horovod >= 0.21).
    epoch_us: int | None = None

    @property
    def seconds(self) -> float | None:
        """Length of the negotiation (first request seen to all ready)."""
        return None if self.end_us is None else (self.end_us - self.start_us) / 1e6

    @property
    def last_rank(self) -> int | None:
        """The rank that became ready last (None without per-rank readiness)."""
        if not self.ready:
            return None
        return max(self.ready, key=lambda rank: (self.ready[rank], rank))

    @property
    def wait_interval(self) -> tuple[int, int] | None:
        """(µs) from the second-to-last rank's readiness to the last one's."""
        if not self.ready:
            return None
        times = sorted(self.ready.values())
        previous = times[-2] if len(times) > 1 else self.start_us
        return previous, max(times[-1], previous)

    @property
    def wait_caused(self) -> float | None:
        """Seconds every other rank was ready and waited for the last rank alone."""
        interval = self.wait_interval
        return None if interval is None else (interval[1] - interval[0]) / 1e6

    def waited(self, rank: int) -> float | None:
        """Seconds ``rank`` sat ready in this negotiation."""
        if rank not in self.ready or self.end_us is None:
            return None
        return max(self.end_us - self.ready[rank], 0) / 1e6


@dataclass
class OperationRun:
    """One execution of a collective on one tensor (after its negotiation): seconds per activity."""

    tensor: str
    operation: str
    start_us: int
    end_us: int | None = None
    activities: dict[str, float] = field(default_factory=dict)
    epoch_us: int | None = None


class RecordBuilder:
    """Turns the events of one file into negotiations and operation runs (pids are per file)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.stacks: dict[int, list[tuple[str, int]]] = defaultdict(list)
        self.open_negotiations: dict[int, Negotiation] = {}
        self.open_runs: dict[int, OperationRun] = {}
        self.epoch_us: int | None = None

    def feed(self, event: dict[str, Any]) -> Iterator[Negotiation | OperationRun]:
        phase, pid, ts = event.get("ph"), event.get("pid"), event.get("ts")
        if phase == "M":
            args = event.get("args") or {}
            if event.get("name") == "process_name" and isinstance(pid, int) and isinstance(args, dict):
                if isinstance(args.get("start_time_since_epoch_in_micros"), int):
                    self.epoch_us = args["start_time_since_epoch_in_micros"]
                elif isinstance(args.get("name"), str):
                    self.names[pid] = args["name"]
            return
        if not isinstance(pid, int) or not isinstance(ts, (int, float)):
            return
        ts = int(ts)
        tensor = self.names.get(pid, f"pid-{pid}")
        stack = self.stacks[pid]
        name = str(event.get("name", ""))
        if phase == "B":
            stack.append((name, ts))
            if name.startswith(NEGOTIATE_PREFIX):
                self.open_negotiations[pid] = Negotiation(tensor, name[len(NEGOTIATE_PREFIX):], ts, epoch_us=self.epoch_us)
            elif len(stack) == 1:
                self.open_runs[pid] = OperationRun(tensor, name, ts, epoch_us=self.epoch_us)
        elif phase == "X":
            negotiation = self.open_negotiations.get(pid)
            if negotiation is not None and name.isdigit():
                negotiation.ready.setdefault(int(name), ts)
        elif phase == "E" and stack:
            opened, started = stack.pop()
            if opened.startswith(NEGOTIATE_PREFIX) and (negotiation := self.open_negotiations.pop(pid, None)):
                negotiation.end_us = ts
                yield negotiation
            elif not stack and (run := self.open_runs.pop(pid, None)):
                run.end_us = ts
                yield run
            elif stack and (run := self.open_runs.get(pid)):
                run.activities[opened] = run.activities.get(opened, 0.0) + (ts - started) / 1e6

    def unfinished(self) -> Iterator[Negotiation | OperationRun]:
        """Negotiations still open when the file ended (a hang, or a cut file): ready ranks so far."""
        yield from self.open_negotiations.values()


def negotiations_and_runs(
    paths: Iterable[str | Path], stats: list[ReadStats] | None = None
) -> Iterator[Negotiation | OperationRun]:
    """Every negotiation and operation run of the files, in order; per-file read stats appended to ``stats``."""
    for path in paths:
        file_stats = ReadStats()
        builder = RecordBuilder()
        with open(path, "rb") as handle:
            for event in read_events(handle, file_stats):
                yield from builder.feed(event)
        yield from builder.unfinished()
        if stats is not None:
            stats.append(file_stats)

"""What one pass over a job's documents says without any analysis: ranks, hosts, time span,
steps, and the recorded facts about its end (exit records, the launcher's status, the newest
stall report). ``report``, ``jobs`` and ``watch`` fold documents into it the same way."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final

from hvdlog.documents import Document, as_int, get_field, rank_of, timestamp_millis
from hvdlog.fields import APP_DATASET
from hvdlog.query.spec import MAX_JOB_SIZE, Condition

__all__ = ["END_EVENTS", "JobFacts", "iso"]

#: The recorded ends: a rank's own exit record and the launcher's (``hvdlog run``).
END_EVENTS: Final = (Condition("event.action", ("process_exit", "launcher_exit")),)


def iso(millis: int | None) -> str | None:
    """``2026-11-29T15:47:55.123Z`` from epoch milliseconds."""
    if millis is None:
        return None
    seconds, rest = divmod(millis, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest:03d}Z"


def _widened(span: tuple[int, int] | None, millis: int) -> tuple[int, int]:
    return (millis, millis) if span is None else (min(span[0], millis), max(span[1], millis))


def is_stall_report(doc: Document) -> bool:
    """A stall report (watchdog or Horovod's inspector): while a job hangs these are its newest events."""
    return get_field(doc, "event.action") == "stall" or get_field(doc, "horovod.stall.missing_ranks") is not None


@dataclass
class JobFacts:
    """What one pass over a job's documents says without any analysis."""

    job: str | None
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    #: The job's time span: hvdlog's own records (its events, the exit records) when there are any,
    #: else every timed line. ``jobs`` reads the span from the events files' ends and Elasticsearch
    #: from those records; a native line's arrival time (the launcher's first lines) would widen
    #: ``report``'s span past theirs.
    first_ms: int | None = None
    last_ms: int | None = None
    #: The span of hvdlog's own records, and of the other lines.
    own_span: tuple[int, int] | None = None
    other_span: tuple[int, int] | None = None
    last_step: int | None = None
    size: int | None = None
    events: int = 0
    #: rank -> exit code, from the rank's own exit record or the launcher's or the capture's lines.
    exit_codes: dict[int, int] = field(default_factory=dict)
    #: rank -> exit code of the rank's own ``process_exit`` record only (a fact, not a launcher's word).
    own_exits: dict[int, int] = field(default_factory=dict)
    #: The launcher's exit status (``launcher_exit``, recorded by ``hvdlog run``), and when.
    launcher_exit: int | None = None
    launcher_exit_ms: int | None = None
    #: The newest stall report, and the newest event that is neither a stall report nor an exit record.
    last_stall_ms: int | None = None
    last_activity_ms: int | None = None
    #: rank -> its newest event that is neither a stall report nor an exit record (did a stalled rank go on?).
    rank_activity_ms: dict[int, int] = field(default_factory=dict)
    #: (epoch ms, step) of the earliest and the latest timed event that carries a step.
    first_step_at: tuple[int, int] | None = None
    last_step_at: tuple[int, int] | None = None

    def step_seconds(self) -> float | None:
        """Mean seconds per step between the first and the last stepped event; None when they span no step."""
        if self.first_step_at is None or self.last_step_at is None or self.last_step_at[1] <= self.first_step_at[1]:
            return None
        return (self.last_step_at[0] - self.first_step_at[0]) / 1000 / (self.last_step_at[1] - self.first_step_at[1])

    def saw_step(self, millis: int, step: int) -> None:
        """A timed event at ``step``: widens the stepping span."""
        if self.first_step_at is None or millis < self.first_step_at[0]:
            self.first_step_at = (millis, step)
        if self.last_step_at is None or millis > self.last_step_at[0]:
            self.last_step_at = (millis, step)

    def add(self, doc: Document) -> None:
        """Fold one document into the facts."""
        self.events += 1
        rank, step, size = rank_of(doc), as_int(doc.get("step")), doc.get("size")
        action = get_field(doc, "event.action")
        millis = timestamp_millis(doc.get("@timestamp"))
        if rank is not None:
            self.ranks.add(rank)
            code = as_int(get_field(doc, "process.exit_code"))
            if code is not None:
                self.exit_codes[rank] = code
                if action == "process_exit":
                    self.own_exits[rank] = code
        if action == "launcher_exit" and (code := as_int(get_field(doc, "hvdlog.launcher.exit_code"))) is not None:
            self.launcher_exit, self.launcher_exit_ms = code, millis
        if isinstance(host := get_field(doc, "host.name"), str):
            self.hosts.add(host)
        if step is not None:
            self.last_step = step if self.last_step is None else max(self.last_step, step)
        if isinstance(size, int) and 0 < size <= MAX_JOB_SIZE:
            self.size = max(self.size or 0, size)
        if millis is None:
            return
        if action == "launcher_exit" or get_field(doc, "event.dataset") == APP_DATASET:
            self.own_span = _widened(self.own_span, millis)
        else:
            self.other_span = _widened(self.other_span, millis)
        self.first_ms, self.last_ms = self.own_span or self.other_span or (None, None)
        if is_stall_report(doc):
            self.last_stall_ms = max(self.last_stall_ms or 0, millis)
        elif action not in ("process_exit", "launcher_exit", "resources"):
            self.last_activity_ms = max(self.last_activity_ms or 0, millis)
            if rank is not None:
                self.rank_activity_ms[rank] = max(self.rank_activity_ms.get(rank, 0), millis)
        if step is not None:
            self.saw_step(millis, step)

"""Step lines tallied a block at a time: msgspec decodes the few fields, C builtins do the counting.

The line-by-line reader (:mod:`hvdlog.analyses.step_read`) spends ~4 µs of Python on each step
line: orjson builds the whole object, then every figure of :class:`~hvdlog.analyses.stragglers.RankTrack`
is updated one event at a time. Here a block's step lines are decoded in one call into small
structs holding only the fields ``stragglers`` reads, and a run of one rank's events is folded
into one :class:`~hvdlog.analyses.stragglers.RankTrack` with ``min``/``max``/``Counter`` over
columns, then merged exactly as a parallel reader's tally is. About 4× less CPU per event.

Exact, not approximate: a run is folded this way only when every event in it is of the
plain shape our writer produces (one rank, integer steps, canonical timestamps whose order
as text is their order in time, no nested object); anything else in the block takes the
per-event path with the same values, and a line that needs the parser (no ``step``, a
nested object) goes back to the caller's line-by-line reader in its place in the file.
Without msgspec (it comes with ``hvdlog[cli]``) :func:`tally_block` declines and the caller
reads line by line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, Final

from hvdlog.analyses.stragglers import RankTrack, Tally, sample_bin
from hvdlog.documents import timestamp_millis
from hvdlog.query.scan import ESCAPE
from hvdlog.query.spec import MAX_JOB_SIZE

msgspec: Any
try:
    import msgspec
except ImportError:  # pragma: no cover - hvdlog[cli] brings it; the line-by-line reader does without
    msgspec = None

__all__ = ["available", "tally_block"]

#: Our writer's time, ``2026-11-29T15:47:55.123456Z``: of one length, so text order is time order.
#: Hours, minutes and seconds are held to their ranges (the parser reads second 99 as 1:39 later).
_CANONICAL_RUN: Final = re.compile(r"(?:\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}Z\n)*", re.ASCII)
#: Integers orjson keeps as integers (it turns larger ones into floats; msgspec does not).
_INT_RANGE: Final = (-(2**63), 2**64 - 1)
_INF: Final = float("inf")
_STEP, _STAMP, _RATE, _SIZE = attrgetter("step"), attrgetter("stamp"), attrgetter("samples_per_sec"), attrgetter("size")
_RANK, _JOB, _EPOCH = attrgetter("rank"), attrgetter("job"), attrgetter("epoch")


if msgspec is not None:

    class _StepFields(msgspec.Struct):  # type: ignore[misc]
        """The fields of a step event that ``stragglers`` reads, typed as the plain shape has them:
        a line whose values are of other types fails to decode and takes the line-by-line path."""

        rank: int | None = None
        step: int | None = None
        size: int | None = None
        job: str | None = None
        samples_per_sec: int | float | None = None
        stamp: str | None = msgspec.field(name="@timestamp", default=None)
        host: str | None = msgspec.field(name="host.name", default=None)
        epoch: int | None = msgspec.field(name="horovod.elastic.epoch", default=None)

    _DECODE: Any = msgspec.json.Decoder(list[_StepFields]).decode
    # ValidationError is a DecodeError; a line nested a thousand deep exhausts msgspec's recursion: the line-by-line path bounds it
    _FAILED: tuple[type[Exception], ...] = (msgspec.DecodeError, RecursionError)


def available() -> bool:
    """Whether the block reader can run (msgspec installed)."""
    return msgspec is not None


def _candidate(line: bytes | bytearray) -> bool:
    """What the byte scanner would hand the line-by-line reader (see :mod:`hvdlog.analyses.step_read`)."""
    return b'"step"' in line or b'"resources"' in line or ESCAPE in line


def _decoded(lines: list[bytearray]) -> tuple[list[Any], bool]:
    """Each line's fields, None for a line that does not decode as the plain shape (and whether
    there is one): the block in one call, halved around what fails (a torn last line costs a
    few extra calls, not the block)."""
    if not lines:
        return [], False
    try:
        entries = _DECODE(b"[" + b",".join(lines) + b"]")
    except _FAILED:
        entries = None
    if entries is not None and len(entries) == len(lines):  # a blank line or '{..},{..}' on one line shifts the count
        return entries, False
    if len(lines) == 1:
        return [None], True
    half = len(lines) // 2
    (head, _), (tail, _) = _decoded(lines[:half]), _decoded(lines[half:])
    return head + tail, True


def tally_block(data: bytearray, end: int, job: str | None, tally: Tally, slow: Callable[[bytes], None]) -> bool:
    """Tally the step events of ``data[:end]`` (whole lines; ``job``: the file's). Lines that
    need the line-by-line reader are handed to ``slow`` in file order. False, with nothing
    done, when msgspec is missing."""
    if msgspec is None:
        return False
    lines = data[:end].split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    entries, failed = _decoded(lines)
    # every decoded line is an object, so holds a "{": one more means a nested object somewhere
    # (counted over the block only when every line decoded; else each line is looked at)
    nested = failed or data.count(b"{", 0, end) != len(lines)
    escaped = data.find(b"\\", 0, end) >= 0 and data.find(ESCAPE, 0, end) >= 0  # memchr first: most blocks hold no backslash
    if not (nested or escaped):
        stepped = [entry for entry in entries if entry.step is not None]
        if len(stepped) < len(entries):  # the others: resources events and the like, for the parser
            for line, entry in zip(lines, entries, strict=True):
                if entry.step is None and _candidate(line):
                    slow(bytes(line))
        _fold(stepped, job, tally)
        return True
    start = 0
    for index, (line, entry) in enumerate(zip(lines, entries, strict=True)):
        plain = entry is not None and entry.step is not None
        if plain and not (nested and line.count(b"{") > 1) and not (escaped and ESCAPE in line):
            continue
        _fold([entry for entry in entries[start:index] if entry is not None and entry.step is not None], job, tally)
        if _candidate(line):
            slow(bytes(line))
        start = index + 1
    _fold([entry for entry in entries[start:] if entry is not None and entry.step is not None], job, tally)
    return True


def _fold(run: Sequence[Any], job: str | None, tally: Tally) -> None:
    """Decoded step events into the tally: folded as one track when they are of one rank and
    canonical times, else event by event (the values the line-by-line reader would pass)."""
    if not run:
        return
    folded = _plain(run, job)
    if folded is None:
        for entry in run:
            _one(entry, job, tally)
        return
    key, size, track = folded
    if size is not None and size > tally.sizes.get(key[:2], 0):
        tally.sizes[key[:2]] = size
    mine = tally.tracks.get(key)
    if mine is None:
        tally.tracks[key] = track
    else:
        mine.merge(track)


def _one(entry: Any, job: str | None, tally: Tally) -> None:
    own = entry.job or job
    rank, step, size, epoch, rate = map(_as_orjson, (entry.rank, entry.step, entry.size, entry.epoch, entry.samples_per_sec))
    tally.add(str(own) if own else None, epoch if type(epoch) is int else 0, rank, step, entry.stamp, entry.host, rate, size)


def _as_orjson(value: object) -> object:
    """An integer as orjson would give it: past 64 bits, a float."""
    return float(value) if type(value) is int and not _in_range(value) else value


def _plain(run: Sequence[Any], job: str | None) -> tuple[tuple[str | None, int, int], int | None, RankTrack] | None:
    """``((job, epoch, rank), largest valid size, track)`` of events of one rank, else None."""
    ranks, jobs, epochs = set(map(_RANK, run)), set(map(_JOB, run)), set(map(_EPOCH, run))
    if len(ranks) != 1 or len(jobs) != 1 or len(epochs) != 1:
        return None
    rank, own, epoch = ranks.pop(), jobs.pop() or job, epochs.pop() or 0
    steps = list(map(_STEP, run))
    if rank is None or not _in_range(rank, epoch, min(steps), max(steps)):
        return None
    first, last = _span(list(map(_STAMP, run)), steps)
    if first is None or last is None:
        return None
    track = RankTrack(first_ms=first[0], first_step=first[1], last_ms=last[0], last_seen=last[1],
                      last_step=max(steps), host=_last_host(run), events=len(run))
    rates = list(map(_RATE, run))
    if None in rates or min(rates) <= 0:  # JSON has no NaN or infinity: the rest are finite
        rates = [value for value in rates if value is not None and value > 0]
    track.samples = dict(Counter(map(sample_bin, rates)))
    sizes = [size for size in set(map(_SIZE, run)) if size is not None and 0 < size <= MAX_JOB_SIZE]
    return (str(own) if own else None, epoch, rank), max(sizes, default=None), track


def _span(stamps: list[Any], steps: list[int]) -> tuple[tuple[int, int] | None, tuple[int, str] | None]:
    """The run's first (millis, smallest step in that millisecond) and last (millis, newest text):
    what event-by-event adding keeps, when every stamp is canonical. (None, None) otherwise."""
    if None in stamps or not _CANONICAL_RUN.fullmatch("\n".join(stamps) + "\n"):
        return None, None
    earliest, latest = min(stamps), max(stamps)
    # every stamp lies between these two as text: when they share a valid date, so do all
    days = {earliest[:10]} if earliest[:10] == latest[:10] else {stamp[:10] for stamp in stamps}
    if any(timestamp_millis(f"{day}T00:00:00Z") is None for day in days):
        return None, None  # a date no calendar holds: those events have no time
    first_ms, last_ms = timestamp_millis(earliest), timestamp_millis(latest)
    if first_ms is None or last_ms is None:  # pragma: no cover - every date was checked above
        return None, None
    millisecond = earliest[:23]
    first_step = min(step for stamp, step in zip(stamps, steps, strict=True) if stamp[:23] == millisecond)
    return (first_ms, first_step), (last_ms, latest)


def _last_host(run: Sequence[Any]) -> str | None:
    for entry in reversed(run):
        if isinstance(entry.host, str):
            return entry.host
    return None


def _in_range(*values: int) -> bool:
    low, high = _INT_RANGE
    return low <= min(values) and max(values) <= high

"""The filter spec: one description of "which events", checked in Python and sent to Elasticsearch.

Files and Elasticsearch must give the same answer for the same flags, so the semantics are
defined here once, in :meth:`Filter.matches`; :mod:`hvdlog.query.es` translates the same spec
into a query whose result is a superset, and the Elasticsearch source re-checks every hit with
:meth:`Filter.matches`. Times are compared at millisecond resolution because that is what an
Elasticsearch ``date`` field keeps.

Semantics:

* ``ranks``: the document's ``rank`` is one of them (``0,3,8-15``, kept as intervals);
  documents without a rank never match a rank filter.
* ``min_level``: ``log.level`` at least this severe; unknown or missing levels count as info.
* ``jobs``/``hosts``: exact ``job`` / ``host.name``.
* ``datasets``: exact ``event.dataset`` (``horovod.app``, ``horovod.core``, ``horovod.rejected``...).
* ``since``/``until``: ``@timestamp`` within, both ends inclusive; a document without a time of its
  own never matches them, unless ``untimed`` (then it matches both: over files its place in the
  order is its only time; over Elasticsearch, which stores it at its read time, the bounds apply to
  that read time, never before the line was written: ``since`` loses none printed after it).
* ``steps``: ``step`` within ``A:B`` (either end open, both inclusive).
* ``pattern``: a fixed string (or with ``regex`` a Python regular expression) found in
  ``message``, ``error.message`` or ``error.stack_trace``; case-sensitive unless
  ``ignore_case``.
* ``any_of``: at least one of these conditions holds (used by the analyses to fetch only
  the events they need).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from hvdlog.documents import floor_millis, get_field, timestamp_millis
from hvdlog.fields import LEVELS, level_at_least
from hvdlog.query.regex import PatternError, compile_search

__all__ = [
    "MAX_JOB_SIZE",
    "MAX_RANK",
    "PATTERN_FIELDS",
    "Condition",
    "Filter",
    "FilterError",
    "RankSet",
    "format_ranks",
    "parse_ranks",
    "parse_steps",
    "parse_time",
]

#: The fields a PATTERN is searched in.
PATTERN_FIELDS: Final = ("message", "error.message", "error.stack_trace")

_RELATIVE: Final = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class FilterError(ValueError):
    """A flag value that cannot be understood; the message says which and why."""


#: Upper bound of a rank (Horovod ranks are C ints); larger numbers are a typo, not a rank.
MAX_RANK: Final = 2**31 - 1

#: The largest job ``size`` an analysis believes: a field of the data must not make a
#: command enumerate a billion ranks (memory and time would follow the number, not the files).
MAX_JOB_SIZE: Final = 65536


class RankSet:
    """A set of ranks kept as sorted, merged intervals: ``0-99999999`` costs two integers.

    Membership is a binary search; nothing ever enumerates the ranks a user typed, so the
    size of a range never costs memory or time (what a command prints about ranks comes
    from the ranks it saw in the data).
    """

    __slots__ = ("_lows", "intervals")

    def __init__(self, intervals: Iterable[tuple[int, int]]) -> None:
        merged: list[tuple[int, int]] = []
        for low, high in sorted(intervals):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        #: Inclusive (low, high) pairs, sorted and disjoint.
        self.intervals: tuple[tuple[int, int], ...] = tuple(merged)
        self._lows = [low for low, _ in merged]

    def __contains__(self, rank: object) -> bool:
        if not isinstance(rank, int) or isinstance(rank, bool):
            return False
        index = bisect.bisect_right(self._lows, rank) - 1
        return index >= 0 and rank <= self.intervals[index][1]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankSet):
            return self.intervals == other.intervals
        if isinstance(other, (set, frozenset)):
            return len(other) == sum(high - low + 1 for low, high in self.intervals) and all(rank in self for rank in other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.intervals)

    def __repr__(self) -> str:
        return f"RankSet({format_ranks(self)!r})"


def parse_ranks(text: str) -> RankSet:
    """``"0,3,8-15"`` -> the ranks 0, 3 and 8 to 15, as intervals."""
    intervals: list[tuple[int, int]] = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d{1,18})(?:\s*-\s*(\d{1,18}))?", part)
        if not match:
            raise FilterError(f"bad rank list {text!r}: use numbers and ranges like 0,3,8-15")
        low = int(match[1])
        high = int(match[2]) if match[2] else low
        if high < low:
            raise FilterError(f"bad rank range {part!r}: the end is below the start")
        if high > MAX_RANK:
            raise FilterError(f"bad rank {high} in {text!r}: ranks go up to {MAX_RANK}")
        intervals.append((low, high))
    return RankSet(intervals)


def format_ranks(ranks: object) -> str:
    """``[0, 1, 2, 3, 7]`` (or a :class:`RankSet`) -> ``"0-3,7"``; the inverse of :func:`parse_ranks`.

    Anything that is not a collection of integers (data can say ``"missing_ranks": 5``)
    formats what it can: integers are kept, other values are dropped.
    """
    if isinstance(ranks, RankSet):
        return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranks.intervals)
    if isinstance(ranks, int) and not isinstance(ranks, bool):
        ranks = [ranks]
    if not isinstance(ranks, Iterable) or isinstance(ranks, (str, bytes, Mapping)):
        return ""
    values = sorted({value for value in ranks if isinstance(value, int) and not isinstance(value, bool)})
    parts: list[str] = []
    start = prev = None
    for value in [*values, None]:
        if start is not None and prev is not None and (value is None or value != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if value is not None and start is None:
            start = value
        prev = value
    return ",".join(parts)


def parse_steps(text: str) -> tuple[int | None, int | None]:
    """``"A:B"``, ``"A:"``, ``":B"`` or ``"A"`` -> inclusive bounds (None = open)."""
    match = re.fullmatch(r"\s*(\d*)\s*(?::\s*(\d*)\s*)?", text)
    if not match or (not match[1] and not match[2]):
        raise FilterError(f"bad step range {text!r}: use A:B, A: or :B")
    low = int(match[1]) if match[1] else None
    high = int(match[2]) if match[2] else (low if match.lastindex == 1 else None)
    if low is not None and high is not None and high < low:
        raise FilterError(f"bad step range {text!r}: the end is below the start")
    return low, high


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """ISO 8601 (zone-less means UTC) or a relative age like ``30s``, ``10m``, ``2h``, ``1d``."""
    if match := _RELATIVE.match(text.strip()):
        now = now or datetime.now(timezone.utc)
        return now - timedelta(seconds=float(match[1]) * _UNITS[match[2]])
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(f"bad time {text!r}: use ISO 8601 (2026-11-29T15:47:55Z) or an age like 10m") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Condition:
    """One clause of ``any_of``: a field exists, equals one of ``values``, or a level minimum."""

    field: str
    values: tuple[Any, ...] = ()
    min_level: str | None = None

    def matches(self, doc: Mapping[str, Any]) -> bool:
        """True when the document satisfies this clause."""
        if self.min_level is not None:
            return level_at_least(_level(doc), self.min_level)
        value = get_field(doc, self.field)
        if not self.values:
            return value is not None
        return value in self.values


@dataclass(frozen=True, slots=True)
class Filter:
    """Which events a command wants; the same object drives every source."""

    ranks: RankSet | frozenset[int] | None = None
    min_level: str | None = None
    jobs: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    steps: tuple[int | None, int | None] | None = None
    pattern: str | None = None
    regex: bool = False
    ignore_case: bool = False
    any_of: tuple[Condition, ...] = ()
    #: only documents carrying every one of these tags (``grep --unparsed``: the parse-failure tag)
    tags: tuple[str, ...] = ()
    #: with ``since``/``until``, documents without a time of their own match too (a rank's last words
    #: read from a time on must not lose its untimed lines: hvdlog.analyses.last_words)
    untimed: bool = False
    _compiled: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.min_level is not None and self.min_level not in LEVELS:
            raise FilterError(f"bad level {self.min_level!r}: use one of {', '.join(LEVELS)}")
        if self.pattern is not None:
            if self.regex:
                try:
                    compiled: Any = compile_search(self.pattern, self.ignore_case)  # linear time, or refused (hvdlog.query.regex)
                except PatternError as exc:
                    raise FilterError(str(exc)) from None
            else:
                compiled = re.compile(re.escape(self.pattern), re.IGNORECASE if self.ignore_case else 0)
            object.__setattr__(self, "_compiled", compiled)

    @property
    def since_millis(self) -> int | None:
        """Lower time bound in epoch ms."""
        return floor_millis(self.since) if self.since else None

    @property
    def until_millis(self) -> int | None:
        """Upper time bound in epoch ms."""
        return floor_millis(self.until) if self.until else None

    def matches(self, doc: Mapping[str, Any]) -> bool:
        """The definition of a match, shared by every source."""
        if self.ranks is not None and doc.get("rank") not in self.ranks:
            return False
        if self.min_level is not None and not level_at_least(_level(doc), self.min_level):
            return False
        if self.jobs and doc.get("job") not in self.jobs:
            return False
        if self.hosts and get_field(doc, "host.name") not in self.hosts:
            return False
        if self.datasets and get_field(doc, "event.dataset") not in self.datasets:
            return False
        if self.tags and not set(self.tags) <= set(doc.get("tags") or ()):
            return False
        if self.since is not None or self.until is not None:
            millis = timestamp_millis(doc.get("@timestamp"))
            if millis is None:
                if not self.untimed:
                    return False
            elif (self.since is not None and millis < self.since_millis) or (self.until is not None and millis > self.until_millis):  # type: ignore[operator]
                return False
        if self.steps is not None and not _in_range(doc.get("step"), *self.steps):
            return False
        if self._compiled is not None and not any(
            isinstance(text := get_field(doc, name), str) and self._compiled.search(text) for name in PATTERN_FIELDS
        ):
            return False
        return not self.any_of or any(condition.matches(doc) for condition in self.any_of)


def _level(doc: Mapping[str, Any]) -> str:
    """``log.level`` of a nested document (the hot path), else via get_field; missing is info."""
    log = doc.get("log")
    level = log.get("level") if isinstance(log, dict) else get_field(doc, "log.level")
    return level if isinstance(level, str) else "info"


def _in_range(value: object, low: int | None, high: int | None) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return (low is None or value >= low) and (high is None or value <= high)

"""A line's own time when another logger than Horovod's core printed it (TensorFlow, loguru,
glog/absl, MXNet), read by ``HOROVOD_LINE_TIME`` of the pattern file.

A line without a time of its own gets none: it is never given the time of the line before it
(that put wrong times on events, then a wrong order on failures). Some loggers print part of a
date only, so the rest comes from the file's *context*, the last full local time read in the
same file (Horovod's core lines, TensorFlow's and loguru's dated lines, the launcher's time):

- glog/absl (``E1205 12:00:00.123456 ...``) has no year: the year is the context's, or the one
  before or after, whichever puts the line nearest the context (a log that crosses New Year);
- MXNet's dmlc logger (``[12:00:00] src/...``) has no date: likewise the context's day, or the
  day before or after.

With no context (no dated line before it in its file) such a line has no time: a guessed year
(this machine's) would be a confident wrong answer. Local times are in the nodes' zone, as
Horovod's (hvdlog/parse/timestamps.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from hvdlog.parse.patterns import compile_pattern
from hvdlog.parse.timestamps import TimeConverter

__all__ = ["LineTimes"]

_LINE_TIME: Final = compile_pattern("HOROVOD_LINE_TIME")
#: First characters a line with such a time can start with (most lines are skipped at once).
_FIRST: Final = frozenset("0123456789IWEF[")
_DAY: Final = timedelta(days=1)
_LOCAL: Final = "%Y-%m-%d %H:%M:%S"


class LineTimes:
    """Reads the own time of other loggers' lines, with a date context per file."""

    __slots__ = ("_context", "_times")

    def __init__(self, times: TimeConverter) -> None:
        self._times = times
        self._context: dict[object, datetime] = {}  # file -> last full local time read in it

    def note(self, source: object, local: str) -> None:
        """A full local time (``2026-11-29 15:59:12...``) read in ``source``'s file: the context."""
        try:
            self._context[source] = datetime.strptime(local[:19], _LOCAL)
        except ValueError:
            return

    def own(self, source: object, line: str) -> str | None:
        """``line``'s own time in UTC ISO-8601, or None when it has none (or its date is unknown)."""
        if line[:1] not in _FIRST:
            return None
        captured = _LINE_TIME.match(line)
        if captured is None:
            return None
        dated = captured.get("@metadata.hvd.line_dated")
        if dated is not None:
            self.note(source, dated)
            return self._times.core(dated.ljust(26, "0"))
        context = self._context.get(source)
        if context is None:
            return None
        clock = str(captured["@metadata.hvd.line_clock"])
        month_day = captured.get("@metadata.hvd.line_month_day")
        local = _nearest(context, clock, None if month_day is None else str(month_day))
        if local is None:
            return None
        self._context[source] = local
        fraction = clock[9:15] if len(clock) > 8 else "000000"
        return self._times.core(f"{local.strftime(_LOCAL)}.{fraction}")


def _nearest(context: datetime, clock: str, month_day: str | None) -> datetime | None:
    """The full local time nearest ``context`` that has this clock (and month and day):
    the context's year (day) or the one before or after."""
    candidates: list[datetime] = []
    if month_day is None:
        try:
            base = datetime.strptime(f"{context:%Y-%m-%d} {clock[:8]}", _LOCAL)
        except ValueError:  # no such time of day
            return None
        candidates = [base - _DAY, base, base + _DAY]
    else:
        for year in (context.year - 1, context.year, context.year + 1):
            try:
                candidates.append(datetime.strptime(f"{year}{month_day} {clock[:8]}", "%Y%m%d %H:%M:%S"))
            except ValueError:  # 29 February of another year, or no such day
                continue
    return min(candidates, key=lambda candidate: abs(candidate - context), default=None)

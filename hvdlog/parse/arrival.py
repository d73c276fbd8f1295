"""The arrival time hvdlog's tee puts in front of every captured native line.

Format (HVDLOG_ARRIVAL_TIME in the pattern file): ``2026-11-30T14:35:49.123456Z `` -- UTC,
micro-seconds, one space; lines that start with Horovod's core header carry their own time
and are not prefixed. The prefix is split off before anything else (it is outside the
launcher tag, if any) so every other pattern sees the line as the rank printed it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, NamedTuple

from hvdlog.parse.patterns import compile_pattern

__all__ = ["Arrived", "split_arrival"]

_PREFIX: Final = compile_pattern("HVDLOG_ARRIVAL_PREFIX")
_TIME: Final = "@metadata.hvd.arrival_time"
_LENGTH: Final = len("2026-11-30T14:35:49.123456Z ")


class Arrived(NamedTuple):
    """A line without its arrival prefix, and the prefix's time (None: no valid prefix)."""

    payload: str
    time: str | None


def split_arrival(line: str) -> Arrived:
    """Split the tee's arrival time off ``line``; a prefix whose date does not exist is
    removed all the same (the line is the rank's) but gives no time."""
    if len(line) < _LENGTH or line[26:28] != "Z " or line[10] != "T":  # cheap test first
        return Arrived(line, None)
    fields = _PREFIX.match(line)
    if fields is None:
        return Arrived(line, None)
    time = fields[_TIME]
    try:
        datetime.fromisoformat(time)
    except ValueError:
        return Arrived(line[_LENGTH:], None)
    return Arrived(line[_LENGTH:], time)

"""The one clock of an event line: UTC, microseconds, the date part formatted once a second.

Both render paths read it: the spliced hot path takes the second's pre-encoded head
(:meth:`UtcClock.second`) and adds the microseconds itself; the general path takes the
whole timestamp as text (``clock()``). One source (``time.time_ns``) and one cache, so the
two paths never disagree about the current second.
"""

from __future__ import annotations

import time
from time import time_ns as _now_ns

__all__ = ["HEAD", "THOUSANDS", "THOUSANDS_B", "UtcClock"]

#: How every line starts, up to the timestamp's text.
HEAD = b'{"@timestamp":"'
THOUSANDS = [f"{n:03d}" for n in range(1000)]
THOUSANDS_B = [n.encode() for n in THOUSANDS]


class UtcClock:
    """ISO 8601 UTC timestamps with microseconds (``YYYY-MM-DDTHH:MM:SS.ffffffZ``)."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        #: [start, end) of the current second in ns, and the line's head up to the fraction.
        #: One attribute, so another thread never sees half an update.
        self.current: tuple[int, int, bytes] = (0, 0, b"")

    def second(self, now: int) -> tuple[int, int, bytes]:
        """The second holding ``now`` (ns): formats its date part when the second changed."""
        current = self.current
        if current[0] <= now < current[1]:
            return current
        start = now - now % 1_000_000_000
        current = (start, start + 1_000_000_000, HEAD + time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(start // 1_000_000_000)).encode())
        self.current = current
        return current

    def __call__(self) -> str:
        now = _now_ns()
        start, _, head = self.second(now)
        micros = (now - start) // 1000
        return head[len(HEAD):].decode() + THOUSANDS[micros // 1000] + THOUSANDS[micros % 1000] + "Z"

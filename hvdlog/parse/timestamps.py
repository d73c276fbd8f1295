"""Zone-less local times printed by Horovod and the launchers -> UTC ISO-8601 strings.

Horovod's C++ logger prints local time with no zone and pads micro-seconds with SPACES
(``12:00:00. 40025`` is .040025 s: pad with zeros, never strip). The zone is a setting
(the nodes' zone); the default is this machine's local zone. Conversions are cached per
second, since thousands of lines share one.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from datetime import timezone as dt_timezone
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["TimeConverter"]

_CACHE_LIMIT: Final = 4096


class TimeConverter:
    """Converts Horovod core times and launcher (asctime) times in one configured zone."""

    __slots__ = ("_asctime", "_seconds", "_zone")

    def __init__(self, timezone: str | None = None) -> None:
        """``timezone``: an IANA name (``Europe/Paris``, ``UTC``); None means the local zone."""
        try:
            self._zone: tzinfo | None = ZoneInfo(timezone) if timezone else None
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {timezone!r}: use an IANA name such as UTC or Europe/Paris") from error
        self._seconds: dict[str, str] = {}
        self._asctime: dict[str, str] = {}

    def _utc(self, local: datetime) -> str:
        aware = local.replace(tzinfo=self._zone) if self._zone else local.astimezone()
        return aware.astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")

    def core(self, text: str) -> str | None:
        """``2026-11-29 15:59:12. 59311`` -> ``2026-11-29T15:59:12.059311Z``; None if invalid."""
        second = text[:19]
        utc = self._seconds.get(second)
        if utc is None:
            try:
                utc = self._utc(datetime.strptime(second, "%Y-%m-%d %H:%M:%S"))
            except ValueError:
                return None
            if len(self._seconds) >= _CACHE_LIMIT:
                self._seconds.clear()
            self._seconds[second] = utc
        return f"{utc}.{text[20:26].replace(' ', '0')}Z"

    def launcher(self, text: str) -> str | None:
        """``Mon Jun  3 14:02:11 2024`` (time.asctime) -> ``2024-06-03T14:02:11.000000Z``."""
        utc = self._asctime.get(text)
        if utc is None:
            try:
                utc = self._utc(datetime.strptime(text, "%a %b %d %H:%M:%S %Y")) + ".000000Z"
            except ValueError:
                return None
            if len(self._asctime) >= _CACHE_LIMIT:
                self._asctime.clear()
            self._asctime[text] = utc
        return utc

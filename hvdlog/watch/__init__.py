"""``hvdlog watch``: detectors that turn followed events into alerts, and their delivery.

:mod:`~hvdlog.watch.detectors` reuses the analyses (:mod:`hvdlog.analyses`) on events as they
arrive; :mod:`~hvdlog.watch.delivery` sends each alert to webhooks and commands, with retries
and a spool.
"""

from __future__ import annotations

__all__: list[str] = []

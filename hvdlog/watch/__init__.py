"""``hvdlog watch``: detectors that turn followed events into alerts, and their delivery.

:mod:`~hvdlog.watch.detectors` reuses the analyses (:mod:`hvdlog.analyses`) on events as they
arrive; :mod:`~hvdlog.watch.delivery` sends each alert to the targets of
:mod:`~hvdlog.watch.targets` (webhooks, commands), one worker each, with retries and the signed
spool of :mod:`~hvdlog.watch.spool`; :mod:`~hvdlog.watch.messages` escapes what a Slack message
and a Kibana link carry.
"""

from __future__ import annotations

__all__: list[str] = []

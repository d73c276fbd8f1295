"""Delivery of ``hvdlog watch``'s alerts: one worker per target, retries, the spool, and nothing that stops it.

Each target (:mod:`hvdlog.watch.targets`) has its own thread and queue, so a slow or broken
target never delays another. An alert is tried ``tries`` times with a doubling backoff capped
at :data:`MAX_BACKOFF_S`; every failure of a try (a :class:`DeliveryError`, or anything else a
target raises) is caught there, and what still fails is appended to the spool
(:mod:`hvdlog.watch.spool`) and said once on stderr. What cannot be spooled either is said on
stderr and counted in :attr:`Dispatcher.lost` (the watcher's exit status says so). Each worker
retries its target's spooled entries every ``retry_every`` seconds and at start. At
:meth:`Dispatcher.close` the alert in flight and those queued are spooled when the targets did
not finish in time, so stopping the watcher loses nothing.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from hvdlog.types import Warn
from hvdlog.watch.messages import discover_link, slack_message
from hvdlog.watch.spool import Spool, SpoolError
from hvdlog.watch.targets import TOTAL_TIMEOUT_S, Command, DeliveryError, Target, Webhook, safe_url

__all__ = ["MAX_BACKOFF_S", "Command", "DeliveryError", "Dispatcher", "Target", "Webhook", "discover_link", "safe_url", "slack_message"]

#: The longest wait between two tries of one delivery.
MAX_BACKOFF_S: Final = 10.0
_FIRST_BACKOFF_S: Final = 0.5
_TICK: Final[dict[str, Any]] = {}


class Dispatcher:
    """Delivers in the background so a slow receiver never delays detection; spools what fails."""

    def __init__(self, targets: list[Target], spool: Spool, warn: Warn, tries: int = 4, retry_every: float = 5.0,
                 sleep: Callable[[float], None] | None = None, note: Warn | None = None) -> None:
        self.spool, self.warn, self.tries, self.retry_every = spool, warn, tries, retry_every
        #: Good news (spooled alerts delivered after all): said, but not as a warning.
        self.note = note or warn
        self.stopping = threading.Event()
        self._sleep = sleep
        self._lock = threading.Lock()
        unique = {target.key: target for target in targets}  # the same URL twice is one target (its spool entries are one)
        self.workers = [_Worker(self, target) for target in unique.values()]
        self.delivered = 0
        self.spooled = 0
        #: Alerts (per target) neither delivered nor spooled.
        self.lost = 0

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def submit(self, alert: dict[str, Any]) -> None:
        """Queue one alert for every target."""
        for worker in self.workers:
            worker.submit(alert)

    def wait_idle(self, timeout: float) -> bool:
        """True once everything submitted so far was delivered or spooled."""
        deadline = time.monotonic() + timeout
        return all(worker.idle.wait(max(0.0, deadline - time.monotonic())) for worker in self.workers)

    def close(self, timeout: float = TOTAL_TIMEOUT_S + 5) -> None:
        """Deliver what is queued (one try each, and the spool once), then stop; what a target did not
        take within ``timeout`` (the alert in flight too) goes to the spool unsent. The default lets
        a try in flight end (a webhook's total timeout), so its failure is said with its reason."""
        self.stopping.set()
        for worker in self.workers:
            worker.submit(None)
        deadline = time.monotonic() + timeout
        for worker in self.workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        for worker in self.workers:
            if worker.is_alive():
                worker.abandon()

    def count(self, what: str) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + 1)

    def backoff(self, delay: float) -> bool:
        """Wait before the next try; False when the watcher is stopping (then no more tries)."""
        if self._sleep is not None:
            self._sleep(delay)
            return not self.stopping.is_set()
        return not self.stopping.wait(delay)


class _Worker(threading.Thread):
    """One target's queue and thread."""

    def __init__(self, owner: Dispatcher, target: Target) -> None:
        super().__init__(name=f"hvdlog-watch {target.label}", daemon=True)
        self.owner, self.target = owner, target
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.idle = threading.Event()
        self.idle.set()
        self.current: dict[str, Any] | None = None
        self._abandoned = threading.Lock()
        self._given_up = False

    def submit(self, alert: dict[str, Any] | None) -> None:
        if alert is not None:
            self.idle.clear()
        self.queue.put(alert)

    def run(self) -> None:
        self._retry_spooled()  # what an earlier run left, at once
        last_retry = time.monotonic()
        while True:
            try:
                alert = self.queue.get(timeout=self.owner.retry_every)
            except queue.Empty:
                alert = _TICK
            if alert is None:
                self._retry_spooled()
                return
            if alert is not _TICK:
                self.current = alert
                try:
                    self.deliver(alert)
                except Exception as exc:  # noqa: BLE001 - the last guard: this worker goes on with the next alert
                    self.owner.count("lost")
                    self.owner.warn(f"{alert.get('kind')} alert for job {alert.get('job')} lost for {self.target.label} "
                                    f"({type(exc).__name__}: {exc})")
                self.current = None
            if time.monotonic() - last_retry >= self.owner.retry_every:
                last_retry = time.monotonic()
                self._retry_spooled()
            if self.queue.empty():
                self.idle.set()

    def deliver(self, alert: dict[str, Any]) -> None:
        """Try, back off, try again; spool what still fails. Nothing a target raises escapes."""
        delay, reason = _FIRST_BACKOFF_S, "not tried"
        for attempt in range(1, self.owner.tries + 1):
            try:
                self.target.send(alert)
            except DeliveryError as exc:
                reason = str(exc)
            except Exception as exc:  # noqa: BLE001 - a target's bug must not end delivery: it is this alert's failure
                reason = f"{type(exc).__name__}: {exc}"[:200]
            else:
                self.owner.count("delivered")
                return
            if attempt < self.owner.tries and not self.owner.backoff(delay):
                reason += "; the watcher stopped before the next try"
                break
            delay = min(delay * 2, MAX_BACKOFF_S)
        self.spool(alert, reason)

    def spool(self, alert: dict[str, Any], reason: str, *, abandoning: bool = False) -> None:
        with self._abandoned:
            if self._given_up and not abandoning:  # close() spooled it already
                return
        owner, what = self.owner, f"{alert.get('kind')} alert for job {alert.get('job')}"
        try:
            path = owner.spool.append(self.target.key, alert)
        except SpoolError as exc:
            owner.count("lost")
            owner.warn(f"{what} could not be delivered to {self.target.label} ({reason}) nor spooled ({exc}): {alert.get('summary')}")
            return
        owner.count("spooled")
        owner.warn(f"{what} not delivered to {self.target.label} ({reason}); spooled to {path}, retried every {owner.retry_every:g} s")

    def _retry_spooled(self) -> None:
        """One try for each of this target's spooled alerts, in order, until one fails (it and the rest stay)."""
        try:
            entries = self.owner.spool.pending(self.target.key)
        except Exception as exc:  # noqa: BLE001 - a spool that cannot be read must not end delivery
            self.owner.warn(f"spool: cannot read it ({type(exc).__name__}: {exc})")
            return
        sent: dict[Any, set[str]] = {}
        for path, entry_id, alert in entries:
            try:
                self.target.send(alert)
            except Exception:  # noqa: BLE001 - stays spooled; the target is still down: the rest waits for the next round
                break
            self.owner.count("delivered")
            sent.setdefault(path, set()).add(entry_id)
        for path, ids in sent.items():
            try:
                self.owner.spool.done(path, ids)
            except Exception as exc:  # noqa: BLE001 - delivered already; the spool's trouble is said
                self.owner.warn(f"spool: {type(exc).__name__}: {exc}")
            self.owner.note(f"delivered {len(ids)} spooled alert(s) to {self.target.label} from {path}")

    def abandon(self) -> None:
        """The watcher stops and this target did not finish: spool the alert in flight and the queued ones."""
        with self._abandoned:
            self._given_up = True
        left = [self.current] if self.current is not None else []
        while True:
            try:
                alert = self.queue.get_nowait()
            except queue.Empty:
                break
            if alert is not None:
                left.append(alert)
        for alert in left:
            self.spool(alert, "the watcher stopped before it was sent", abandoning=True)

"""A daemon thread that calls ``tick()`` every ``interval`` seconds; nothing it raises reaches training."""

from __future__ import annotations

import threading

__all__ = ["Periodic"]


class Periodic:
    """Base for the training side's background helpers (resources sampler, timeline watch).

    ``tick()`` returns False to stop for good; an exception goes to ``on_error()``, which
    returns whether to keep going.
    """

    interval: float

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """One round of work."""
        raise NotImplementedError

    def on_error(self, exc: Exception) -> bool:  # the base ignores exc: subclasses report it
        """Called with what ``tick()`` raised; True keeps the thread going."""
        return True

    def start_thread(self, name: str) -> None:
        """Start ticking (first tick after one interval)."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def stop_thread(self) -> None:
        """Stop ticking and wait a moment for the thread."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.tick() is False:
                    return
            except Exception as exc:  # noqa: BLE001 - never reaches training
                try:
                    if not self.on_error(exc):
                        return
                except Exception:  # noqa: BLE001 - not even from the error report
                    return

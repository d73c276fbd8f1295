"""The process's own end, recorded at interpreter exit: ``event.action: process_exit`` with
``process.exit_code``, a fact the read side trusts over any inference from silence.

The status is the one ``sys.exit`` was given (its wrapper stays for the life of the process,
because ``sys.exit(main())`` after a ``hvdlog.shutdown()`` inside ``main`` is the common
shape); 1 after an uncaught exception (seen by the hooks, or by ``sys.last_value``, which the
interpreter sets before it prints a traceback), 130 after an uncaught ``KeyboardInterrupt``
(SIGINT); 128+N when the SIGTERM hook kills the process; else 0, "the script ended" (a bare
``raise SystemExit(n)`` is the one end this cannot see). Written through the configured
writer, or, after ``hvdlog.shutdown()``, appended to the rank's events file. Never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
from collections.abc import Callable
from typing import Any, Final

from hvdlog.runtime.context import progress_state
from hvdlog.types import Emit

__all__ = ["ACTION", "exit_status", "recorder"]

#: The ``event.action`` of the record.
ACTION: Final = "process_exit"


def exit_status(requested: object) -> int:
    """The status ``sys.exit(requested)`` ends the process with: None is 0, an int is itself, anything else 1."""
    if requested is None:
        return 0
    return requested if isinstance(requested, int) and not isinstance(requested, bool) else 1


class _Recorder:
    """One per process: how it is ending, and where the record goes."""

    def __init__(self) -> None:
        self.ending: tuple[int, str, str | None] | None = None
        self.emit: Emit | None = None
        #: After shutdown: appends one rendered event to the rank's file.
        self.fallback: Emit | None = None
        self.written = False
        self._exit: Callable[..., Any] | None = None

    def install(self, emit: Emit) -> None:
        """Write through ``emit`` from now on; the first call wraps ``sys.exit`` and registers the atexit hook."""
        self.emit = emit
        if self._exit is None:
            self._exit = sys.exit
            sys.exit = self._exit_called  # type: ignore[assignment]  # the same call; remembers the status first
            atexit.register(self.at_exit)

    def _exit_called(self, status: object = None) -> None:
        self.ending = (exit_status(status), "sys.exit", None)
        (self._exit or _raise)(status)

    def uncaught(self, exc_type: type[BaseException]) -> None:
        """An exception ends the main thread."""
        if issubclass(exc_type, KeyboardInterrupt):
            self.ending = (128 + signal.SIGINT, "uncaught KeyboardInterrupt", "SIGINT")
        else:
            self.ending = (1, f"uncaught {exc_type.__name__}", None)

    def write(self, status: int, why: str, name: str | None) -> None:
        """The record, once per process."""
        target = self.emit or self.fallback
        if self.written or target is None:
            return
        self.written = True
        fields: dict[str, Any] = {"event.action": ACTION, "process.exit_code": status, "event.reason": name or why}
        if progress_state.step is not None:
            fields["step"] = progress_state.step
        level = "info" if status == 0 else "warning" if name is not None else "error"
        with contextlib.suppress(Exception):
            target(level, f"process exit: status {status} ({name or why})", fields)

    def at_exit(self) -> None:
        """Interpreter exit: how the process ended, as far as it is known."""
        ending = self.ending
        last = getattr(sys, "last_value", None)
        if ending is None and isinstance(last, BaseException):  # a traceback was printed after the hooks were removed
            self.uncaught(type(last))
            ending = self.ending
        self.write(*(ending or (0, "the script ended", None)))


def _raise(status: object) -> None:
    raise SystemExit(status)


#: The process's recorder.
recorder: Final = _Recorder()

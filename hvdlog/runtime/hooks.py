"""Bring everything else a rank reports into the same stream with the same fields.

- stdlib ``logging`` (libraries, Horovod's Python side) and ``warnings``;
- an uncaught exception (main thread or others), logged before the process exits;
- SIGTERM, logged, so a rank killed as collateral can be told from the culprit;
- the process's own end (``event.action: process_exit`` with ``process.exit_code``), written at
  interpreter exit: a fact the read side trusts over any inference from silence. The status is
  the one ``sys.exit`` was given, 1 after an uncaught exception, 130 after an uncaught
  ``KeyboardInterrupt`` (SIGINT), 128+N when a signal hook kills the process; else 0 ("the
  script ended"; a bare ``raise SystemExit(n)`` is the one end this cannot see).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from hvdlog.runtime.context import progress_state
from hvdlog.runtime.renderer import level_name
from hvdlog.types import Emit

__all__ = ["EXIT_ACTION", "Hooks", "StdlibHandler", "exit_status"]

#: The ``event.action`` of the record a rank writes at its end.
EXIT_ACTION = "process_exit"


def exit_status(requested: object) -> int:
    """The status ``sys.exit(requested)`` ends the process with: None is 0, an int is itself, anything else 1."""
    if requested is None:
        return 0
    return requested if isinstance(requested, int) and not isinstance(requested, bool) else 1


class StdlibHandler(logging.Handler):
    """A logging handler that writes records through hvdlog's renderer and writer."""

    def __init__(self, emit: Emit, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {
                "log.logger": record.name,
                "log.origin.file.name": record.pathname,
                "log.origin.file.line": record.lineno,
                "log.origin.function": record.funcName,
            }
            if record.exc_info:
                fields["exc_info"] = record.exc_info
            self._emit(level_name(record.levelname), record.getMessage(), fields)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


class Hooks:
    """Installs and removes the process-wide hooks; keeps what it replaced."""

    def __init__(self, emit: Emit, level: int) -> None:
        self.emit = emit
        self.handler = StdlibHandler(emit, level)
        self._previous_excepthook: Callable[..., Any] | None = None
        self._previous_thread_hook: Callable[..., Any] | None = None
        self._previous_sigterm: Any = None
        self._previous_root_level: int | None = None
        self._previous_exit: Callable[..., Any] | None = None
        #: How the process is ending, as far as it is known: (status, why, signal name or None).
        self._ending: tuple[int, str, str | None] | None = None
        self._exit_written = False

    def install(self) -> None:
        """Route logging/warnings here and watch for crashes and SIGTERM."""
        root = logging.getLogger()
        root.addHandler(self.handler)
        self._previous_root_level = root.level
        root.setLevel(self.handler.level)
        logging.captureWarnings(True)
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        self._previous_thread_hook = threading.excepthook
        threading.excepthook = self._thread_excepthook
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._previous_exit = sys.exit
        sys.exit = self._exit_called  # type: ignore[assignment]  # same call, remembers the status first
        atexit.register(self._at_exit)

    def uninstall(self) -> None:
        """Undo :meth:`install` (configure() calls it before reconfiguring)."""
        root = logging.getLogger()
        root.removeHandler(self.handler)
        if self._previous_root_level is not None:
            root.setLevel(self._previous_root_level)
        logging.captureWarnings(False)
        if self._previous_excepthook is not None:
            sys.excepthook = self._previous_excepthook
        if self._previous_thread_hook is not None:
            threading.excepthook = self._previous_thread_hook
        if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None
        atexit.unregister(self._at_exit)
        if self._previous_exit is not None and sys.exit == self._exit_called:
            sys.exit = self._previous_exit
        self._previous_exit = None

    def _exit_called(self, status: object = None) -> None:
        """``sys.exit``: remembers the status, then exits as before (never raises anything else)."""
        self._ending = (exit_status(status), "sys.exit", None)
        if self._previous_exit is None:
            raise SystemExit(status)
        self._previous_exit(status)

    def _write_exit(self, status: int, why: str, name: str | None) -> None:
        """The exit record, once per process; never raises."""
        if self._exit_written:
            return
        self._exit_written = True
        fields: dict[str, Any] = {"event.action": EXIT_ACTION, "process.exit_code": status, "event.reason": name or why}
        if progress_state.step is not None:
            fields["step"] = progress_state.step
        level = "info" if status == 0 else "warning" if name is not None else "error"
        with contextlib.suppress(Exception):
            self.emit(level, f"process exit: status {status} ({name or why})", fields)

    def _at_exit(self) -> None:
        """Interpreter exit: how the process ended, as :meth:`_exit_called` and the hooks saw it."""
        status, why, name = self._ending or (0, "the script ended", None)
        self._write_exit(status, why, name)

    def _log_exception(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None, where: str) -> None:
        if where == "main thread":  # the process ends with it
            interrupted = issubclass(exc_type, KeyboardInterrupt)
            self._ending = (128 + signal.SIGINT, "uncaught KeyboardInterrupt", "SIGINT") if interrupted else (1, f"uncaught {exc_type.__name__}", None)
        fields: dict[str, Any] = {"event.action": "uncaught_exception", "exc_info": (exc_type, exc, tb)}
        if progress_state.step is not None:
            # The step's context has unwound by now; the last step entered is where it died.
            fields["step"] = progress_state.step
        self.emit("critical", f"uncaught {exc_type.__name__} in {where}: {exc}", fields)

    def _excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        self._log_exception(exc_type, exc, tb, "main thread")
        (self._previous_excepthook or sys.__excepthook__)(exc_type, exc, tb)

    def _thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit and args.exc_value is not None:
            name = args.thread.name if args.thread else "a thread"
            self._log_exception(args.exc_type, args.exc_value, args.exc_traceback, f"thread {name}")
        (self._previous_thread_hook or threading.__excepthook__)(args)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Log, then die exactly as SIGTERM would have made us die."""
        name = signal.Signals(signum).name
        self.emit("warning", f"received {name}: terminating", {"event.action": "signal", "event.reason": name})
        previous = self._previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        if previous in (None, signal.SIG_DFL):  # the process dies now, before any atexit
            self._write_exit(128 + signum, f"killed by {name}", name)
        signal.signal(signum, signal.SIG_DFL if previous in (None, signal.SIG_DFL) else previous)
        os.kill(os.getpid(), signum)

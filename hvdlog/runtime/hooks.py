"""Bring everything else a rank reports into the same stream with the same fields.

- stdlib ``logging`` (libraries, Horovod's Python side) and ``warnings``;
- an uncaught exception (main thread or others), logged before the process exits;
- SIGTERM, logged, so a rank killed as collateral can be told from the culprit;
- the process's own end, recorded at interpreter exit (:mod:`hvdlog.runtime.ending`).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from hvdlog.runtime.context import progress_state
from hvdlog.runtime.ending import recorder
from hvdlog.runtime.renderer import level_name
from hvdlog.types import Emit

__all__ = ["Hooks", "StdlibHandler"]



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
        recorder.install(self.emit)

    def uninstall(self) -> None:
        """Undo :meth:`install` (configure() calls it before reconfiguring)."""
        if recorder.emit == self.emit:
            recorder.emit = None  # the exit record goes to the fallback shutdown() sets
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

    def _log_exception(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None, where: str) -> None:
        if where == "main thread":  # the process ends with it
            recorder.uncaught(exc_type)
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
        if previous in (None, signal.SIG_DFL):  # the process dies now, before any atexit hook
            recorder.write(128 + signum, f"killed by {name}", name)
        signal.signal(signum, signal.SIG_DFL if previous in (None, signal.SIG_DFL) else previous)
        os.kill(os.getpid(), signum)

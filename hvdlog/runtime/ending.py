"""The process's own end, recorded at interpreter exit: ``event.action: process_exit`` with
``process.exit_code``, a fact the read side trusts over any inference from silence.

How the process ends, best evidence first:

- an uncaught exception (seen by the hooks, or by ``sys.last_value``, which the interpreter sets
  before it prints a traceback): 1, or 130 for ``KeyboardInterrupt`` (SIGINT); 128+N when the
  SIGTERM hook kills the process;
- a ``SystemExit`` leaving the main module: ``sys.exit(n)``, ``raise SystemExit(n)``, ``exit(n)``.
  Python runs no hook for it (no excepthook; its status reaches only the C ``exit()``), so on
  Python 3.12+ a ``sys.monitoring`` tool sees the exception unwind the main thread's outermost
  frame and reads its code: the status exactly. Before 3.12 only ``sys.exit`` is seen (the wrapper
  ``import hvdlog`` makes, so ``sys.exit(main())`` with ``configure()`` inside ``main``, the common
  shape, is seen too); a ``SystemExit`` raised otherwise is known only by the main
  module's frame, kept from ``install()``: it ended at a raise, not a return. Its status is then
  not known, and the record says so (no ``process.exit_code``) rather than claim 0;
- the main module returned: 0, "the script ended" (a ``sys.exit`` seen earlier was caught, or
  called in another thread, and did not end the process).

Written through the configured writer, or, after ``hvdlog.shutdown()``, appended to the rank's
events file. Never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import dis
import signal
import sys
import threading
from types import CodeType, FrameType
from typing import Any, Final

from hvdlog.runtime.context import progress_state
from hvdlog.types import Emit

__all__ = ["ACTION", "exit_status", "recorder"]

#: The ``event.action`` of the record.
ACTION: Final = "process_exit"

#: Opcodes a frame that returned (rather than raised) ended on.
_RETURNS: Final = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)

#: An ending: (status, or None when not known; why; the signal's name, if one ended it).
Ending = tuple[int | None, str, str | None]


def exit_status(requested: object) -> int:
    """The status ``sys.exit(requested)`` ends the process with: None is 0, an int is itself, anything else 1."""
    if requested is None:
        return 0
    return requested if isinstance(requested, int) and not isinstance(requested, bool) else 1


def _main_frame() -> FrameType | None:
    """The main module's frame, when it is the bottom of the main thread's stack (``python x.py``,
    ``python -c``; below it only runpy's frames for ``python -m``): its end is the process's end."""
    if threading.current_thread() is not threading.main_thread():
        return None
    main = sys.modules.get("__main__")
    found: FrameType | None = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if main is not None and frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            found = frame
        elif found is not None and not frame.f_code.co_filename.endswith("runpy.py"):
            return None  # something else runs the main module (an IDE, a notebook): its end is not ours to read
        frame = frame.f_back
    return found


def _returned(frame: FrameType) -> bool | None:
    """Whether a finished frame returned (True) or was left by an exception (False); None when it cannot be told."""
    with contextlib.suppress(Exception):
        code = frame.f_code.co_code
        if 0 <= frame.f_lasti < len(code):
            return code[frame.f_lasti] in _RETURNS
    return None


class _Recorder:
    """One per process: how it is ending, and where the record goes."""

    def __init__(self) -> None:
        self.ending: Ending | None = None
        #: A SystemExit seen leaving the main thread's outermost frame (Python 3.12+: exact).
        self.system_exit: Ending | None = None
        self.emit: Emit | None = None
        #: After shutdown: appends one rendered event to the rank's file.
        self.fallback: Emit | None = None
        self.written = False
        self.installed = False
        self._main: FrameType | None = None

    def install(self, emit: Emit) -> None:
        """Write through ``emit`` from now on; the first call keeps the main module's frame, starts
        the SystemExit watch (3.12+) and registers the atexit hook. (``sys.exit``'s status is
        remembered by the wrapper ``import hvdlog`` made: ``hvdlog.exit_requested``.)"""
        self.emit = emit
        if not self.installed:
            self.installed = True
            with contextlib.suppress(Exception):
                self._main = _main_frame()
            _watch_system_exit(self)
            atexit.register(self.at_exit)

    def uncaught(self, exc_type: type[BaseException]) -> None:
        """An exception ends the main thread."""
        if issubclass(exc_type, KeyboardInterrupt):
            self.ending = (128 + signal.SIGINT, "uncaught KeyboardInterrupt", "SIGINT")
        else:
            self.ending = (1, f"uncaught {exc_type.__name__}", None)

    def write(self, status: int | None, why: str, name: str | None) -> None:
        """The record, once per process (``status`` None: the process ended in a way whose status it cannot see)."""
        target = self.emit or self.fallback
        if self.written or target is None:
            return
        self.written = True
        fields: dict[str, Any] = {"event.action": ACTION, "event.reason": name or why}
        if status is not None:
            fields["process.exit_code"] = status
        if progress_state.step is not None:
            fields["step"] = progress_state.step
        level = "info" if status == 0 else "warning" if name is not None or status is None else "error"
        shown = "unknown" if status is None else str(status)
        with contextlib.suppress(Exception):
            target(level, f"process exit: status {shown} ({name or why})", fields)

    def how_it_ends(self) -> Ending:
        """The ending, from the best evidence there is (the module docstring's order)."""
        last = getattr(sys, "last_value", None)
        if self.ending is not None:
            return self.ending  # an uncaught exception, seen by the hooks
        if isinstance(last, BaseException) and not isinstance(last, SystemExit):
            self.uncaught(type(last))  # a traceback was printed after the hooks were removed
            return self.ending or (1, "uncaught exception", None)
        if self.system_exit is not None:
            return self.system_exit
        returned = _returned(self._main) if self._main is not None else None
        if returned:
            return 0, "the script ended", None
        requested = getattr(sys.modules.get("hvdlog"), "exit_requested", None)
        if requested:
            return exit_status(requested[-1]), "sys.exit", None  # sys.exit, and the main module did not return
        if returned is False:
            return None, "SystemExit raised without sys.exit: its status is not visible before Python 3.12", None
        return 0, "the script ended", None

    def at_exit(self) -> None:
        """Interpreter exit: how the process ended, as far as it is known."""
        with contextlib.suppress(Exception):
            self.write(*self.how_it_ends())


def _watch_system_exit(recorder: _Recorder) -> None:
    """Python 3.12+: a ``sys.monitoring`` tool told of every exception that unwinds a frame keeps the
    status of a SystemExit leaving the main thread's outermost frame (the process's end). It costs
    one call per frame an exception unwinds, none otherwise. Without free tool ids: nothing."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return
    main = threading.main_thread()
    for tool in (4, 3):  # the ids no standard tool claims (0 debugger, 1 coverage, 2 profiler, 5 optimizer)
        with contextlib.suppress(ValueError):
            monitoring.use_tool_id(tool, "hvdlog")
            break
    else:
        return

    def unwound(code: CodeType, offset: int, exception: BaseException) -> object:
        if isinstance(exception, SystemExit) and threading.current_thread() is main:
            with contextlib.suppress(Exception):
                frame = sys._getframe(1)
                if frame.f_code is code and frame.f_back is None:
                    recorder.system_exit = (exit_status(exception.code), "SystemExit", None)
        return None

    monitoring.register_callback(tool, monitoring.events.PY_UNWIND, unwound)
    monitoring.set_events(tool, monitoring.get_events(tool) | monitoring.events.PY_UNWIND)


#: The process's recorder.
recorder: Final = _Recorder()

"""Stall detection in every rank that does not depend on Horovod's stall inspector.

Horovod 0.28.1 built with Gloo never prints stall warnings (ARCHITECTURE.md), so each
rank watches itself: a daemon thread wakes every ``poll`` seconds and, when the training
loop has made no progress (no :func:`hvdlog.step`/:func:`hvdlog.mark_progress`) for
``after`` seconds, logs a ``stall`` event — repeated every ``repeat`` seconds — and a
``stall_resolved`` event when progress resumes. The hot path pays one float store per
step; the thread reads the stalled thread's Python stack only when it reports, to name
the Horovod collective it waits in (or the user code it is stuck in), and asks the
DistributedOptimizer which tensors it waits for or has not submitted (:mod:`hvdlog.runtime.pending`).

Before the first step the threshold is ``STARTUP_FACTOR`` times longer: import, ``hvd.init()``
and the parameter broadcast are legitimately slow on a loaded machine.

The rank whose stall event has no ``horovod.stall.operation`` is stuck outside any
collective: that is the culprit; ranks waiting in a collective are its victims. When the
native capture process is stuck at that moment (stopped, wedged: ``capture_state`` says so),
the event names it (``event.reason: capture_stuck``): a print waiting for it is a likely cause.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType
from typing import Any

from hvdlog.runtime.context import progress_state
from hvdlog.runtime.pending import add_pending_tensors, horovod_op_name, summarize
from hvdlog.types import Emit

__all__ = ["StallWatchdog", "describe_wait"]


#: Threshold multiplier until the training loop enters its first step.
STARTUP_FACTOR = 4.0

@functools.cache
def _package_dir(name: str) -> str | None:
    """The folder a top-level package is loaded from (not imported here), with a trailing separator."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    return os.path.join(os.path.realpath(locations[0]), "") if locations else None


def _in_package(filename: str, *names: str) -> bool:
    """Whether code from ``filename`` is one of these packages' own: where they really live, not a
    folder name a user's path may share (a checkout named ``hvdlog``, a project under ``/data/horovod/``)."""
    real = os.path.realpath(filename)
    return any((folder := _package_dir(name)) is not None and real.startswith(folder) for name in names)


def _library_code(filename: str) -> bool:
    return filename == threading.__file__ or _in_package(filename, "hvdlog", "torch", "horovod")


def describe_wait(frame: FrameType | None) -> dict[str, Any]:
    """What a thread is blocked in: the outermost Horovod function and tensor name, and
    the innermost user-code location, from its current Python stack."""
    fields: dict[str, Any] = {}
    if frame is None:
        return fields
    stack = traceback.extract_stack(frame)
    frames: list[FrameType] = []
    walker: FrameType | None = frame
    while walker is not None:
        frames.append(walker)
        walker = walker.f_back
    frames.reverse()  # outermost first, like `stack`
    horovod_functions = []
    for live in frames:
        if _in_package(live.f_code.co_filename, "horovod"):
            horovod_functions.append(getattr(live.f_code, "co_qualname", live.f_code.co_name))
            name = live.f_locals.get("name")
            tensor = horovod_op_name(live.f_code.co_name, name) if isinstance(name, str) and name else None
            if tensor:  # a named op called directly, e.g. hvd.allreduce(loss, name="loss")
                fields["horovod.stall.tensors"] = [tensor]
    if horovod_functions:
        # e.g. "_DistributedOptimizer.step > synchronize": what the user called, what blocks.
        outer, inner = horovod_functions[0], horovod_functions[-1]
        fields["horovod.stall.operation"] = outer if outer == inner else f"{outer} > {inner}"
    for summary in reversed(stack):
        if not _library_code(summary.filename):
            fields["log.origin.file.name"] = summary.filename
            fields["log.origin.file.line"] = summary.lineno
            fields["log.origin.function"] = summary.name
            break
    fields["horovod.stall.stack"] = "".join(traceback.format_list(stack[-12:]))
    return fields


class StallWatchdog(threading.Thread):
    """Daemon thread reporting this rank's own stalls through ``emit(level, message, fields)``."""

    def __init__(self, emit: Emit, after: float, repeat: float | None = None, poll: float | None = None) -> None:
        if after <= 0:
            raise ValueError("the stall threshold must be a positive number of seconds")
        super().__init__(name="hvdlog-stall-watchdog", daemon=True)
        self.emit = emit
        self.after = after
        self.repeat = repeat if repeat and repeat > 0 else after
        self.poll = poll if poll and poll > 0 else min(1.0, after / 4)
        self._stop_event = threading.Event()
        self.on_tick: Callable[[], None] | None = None
        #: A sentence when the native capture process is stuck, else None (see :mod:`hvdlog.runtime.capture_guard`).
        self.capture_state: Callable[[], str | None] | None = None
        #: Answers ``hvdlog snapshot`` requests (:mod:`hvdlog.runtime.snapshot`); polled every tick.
        self.snapshot: Callable[[], object] | None = None
        self._stall_step: int | None = None
        self.failures = 0

    def stop(self, timeout: float = 2.0) -> None:
        """Finish the thread (reporting a stall that just resolved) and wait for it."""
        self._stop_event.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout)

    def run(self) -> None:
        stall_started_at: float | None = None  # the progress mark the current stall began after
        last_report = 0.0
        while not self._stop_event.wait(self.poll):
            try:  # no error (a full disk, a failing hook) may end the watch: the next tick retries
                if self.on_tick is not None:
                    self.on_tick()
                if self.snapshot is not None:
                    self.snapshot()
                stall_started_at = self._check_resolved(stall_started_at)
                now = time.monotonic()
                idle = now - progress_state.last
                threshold = self.after if progress_state.step is not None else self.after * STARTUP_FACTOR
                if idle >= threshold and (stall_started_at is None or now - last_report >= self.repeat):
                    if stall_started_at is None:
                        stall_started_at = progress_state.last
                        self._stall_step = progress_state.step
                    last_report = now
                    self._report_stall(idle)
            except Exception as exc:  # noqa: BLE001
                self._tick_failed(exc)
        # Stopping right after progress resumed (the job's last steps) still closes the episode.
        try:
            self._check_resolved(stall_started_at)
        except Exception as exc:  # noqa: BLE001
            self._tick_failed(exc)

    def _tick_failed(self, exc: Exception) -> None:
        """Count the failure; say it once on stderr."""
        self.failures += 1
        if self.failures == 1:
            with contextlib.suppress(OSError):
                os.write(2, f"hvdlog: stall watchdog: {type(exc).__name__}: {exc} (still watching)\n".encode("utf-8", "replace"))

    def _check_resolved(self, stall_started_at: float | None) -> float | None:
        """Report the end of a stall once progress moved past its start; None when resolved."""
        if stall_started_at is not None and progress_state.last > stall_started_at:
            self._report_resolved(progress_state.last - stall_started_at)
            return None
        return stall_started_at

    def _report_stall(self, idle: float) -> None:
        frame = sys._current_frames().get(progress_state.thread_id)  # the only way to see a blocked thread
        fields: dict[str, Any] = {
            "event.action": "stall",
            "horovod.stall.source": "watchdog",
            "horovod.stall.seconds": round(idle, 3),
        }
        if progress_state.step is not None:
            fields["step"] = progress_state.step
        fields.update(describe_wait(frame))
        add_pending_tensors(fields, frame)  # the DistributedOptimizer's view; never raises
        where = fields.get("horovod.stall.operation")
        tensors, unsubmitted = fields.get("horovod.stall.tensors"), fields.get("horovod.stall.unsubmitted_tensors")
        message = (
            f"no progress for {idle:.0f} s: waiting in horovod {where}" + (f" for {summarize(tensors)}" if tensors else "")
            if where
            else f"no progress for {idle:.0f} s outside any horovod collective"
            + (f"; not submitted: {summarize(unsubmitted)}" if unsubmitted else "")
        )
        stuck = self.capture_state() if self.capture_state is not None else None
        if stuck:
            fields["event.reason"] = "capture_stuck"
            message += f"; {stuck}"
        self.emit("warning", message, fields)

    def _report_resolved(self, stalled_for: float) -> None:
        fields: dict[str, Any] = {
            "event.action": "stall_resolved",
            "horovod.stall.source": "watchdog",
            "horovod.stall.seconds": round(stalled_for, 3),
            "event.duration": int(stalled_for * 1e9),
        }
        if self._stall_step is not None:
            fields["step"] = self._stall_step
        self.emit("info", f"progress resumed after {stalled_for:.0f} s", fields)

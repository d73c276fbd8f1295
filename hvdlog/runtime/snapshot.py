"""Every thread's stack on demand, written as events by the watchdog thread (``hvdlog snapshot``).

``hvdlog snapshot JOB`` writes a request id into ``<root>/<job>/.hvdlog-snapshot`` (:data:`TRIGGER`);
at each tick the stall watchdog stats that one file (one ``stat`` a second per rank, nothing on
the training thread) and, when its modification time moved, logs one ``snapshot`` event per thread of
the process: its name, the Horovod operation it waits in and the user code it is in
(:func:`hvdlog.runtime.watchdog.describe_wait`), its trimmed stack, and the request id as ``event.id``.
No server runs on the ranks, and it works while the training thread is blocked in a collective:
the watchdog is a thread of its own and reads the others' frames with ``sys._current_frames``.
The training thread's event comes last (``event.reason: training_thread``; the others ``thread``):
once it is written, the rank has answered. Never raises (the watchdog's tick catches).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Final

from hvdlog.types import Emit

__all__ = ["MAX_ID", "TRIGGER", "SnapshotTrigger"]

#: The trigger file's name in the job's folder.
TRIGGER: Final = ".hvdlog-snapshot"
#: Longest request id read from the trigger (the rest of a bigger file is ignored).
MAX_ID: Final = 64


class SnapshotTrigger:
    """Polled by the watchdog: answers each new request in ``job_dir/.hvdlog-snapshot`` once."""

    __slots__ = ("emit", "path", "seen", "training_thread")

    def __init__(self, job_dir: Path, emit: Emit, training_thread: int | None = None) -> None:
        self.path = job_dir / TRIGGER
        self.emit = emit
        self.training_thread = training_thread
        self.seen = self._stamp()  # a request older than this process is not for it

    def _stamp(self) -> int | None:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return None

    def poll(self) -> bool:
        """Answer a new request, if any; True when one was answered."""
        stamp = self._stamp()
        if stamp is None or stamp == self.seen:
            return False
        self.seen = stamp
        try:
            with open(self.path, "rb") as handle:
                request = handle.read(MAX_ID).decode("utf-8", "replace").strip() or str(stamp)
        except OSError:
            request = str(stamp)
        self.answer(request)
        return True

    def answer(self, request: str) -> None:
        """One ``snapshot`` event per thread, the training thread's last."""
        from hvdlog.runtime.context import progress_state
        from hvdlog.runtime.watchdog import describe_wait

        frames = sys._current_frames()  # the only way to see a blocked thread
        names = {thread.ident: thread.name for thread in threading.enumerate()}
        training = self.training_thread if self.training_thread is not None else progress_state.thread_id
        me = threading.get_ident()
        for ident in [*(ident for ident in frames if ident not in (me, training)), training]:
            fields: dict[str, Any] = {"event.action": "snapshot", "event.id": request, "process.thread.name": names.get(ident, str(ident)),
                                      "event.reason": "training_thread" if ident == training else "thread"}
            fields.update(describe_wait(frames.get(ident)))
            if ident == training and progress_state.step is not None:
                fields["step"] = progress_state.step
            where = fields.get("horovod.stall.operation") or fields.get("log.origin.function") or "?"
            kind = "training thread" if ident == training else "thread"
            self.emit("info", f"snapshot {request}: {kind} {fields['process.thread.name']} in {where}", fields)

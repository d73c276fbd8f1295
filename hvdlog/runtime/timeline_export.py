"""Training side: Horovod writes its timeline into the job's directory, bounded on disk.

``hvdlog.configure(timeline=True)`` (or ``HVDLOG_TIMELINE=1``) sets ``HOROVOD_TIMELINE`` to
``<root>/<job>/<host>/horovod-timeline.json`` before ``hvd.init()`` reads it (only the
coordinator, rank 0, writes it). Unless the user set ``HOROVOD_CACHE_CAPACITY``, it also sets
it to 0: with Horovod's response cache on, repeated negotiations record no per-rank readiness,
and the timeline could not say which rank the others waited for.

A timeline grows for as long as the job runs, so a thread on rank 0 checks its size every few
seconds and, past ``max_bytes``, switches Horovod to a new segment with ``hvd.start_timeline``
(``horovod-timeline.1.json``, ``.2``...), deleting the oldest beyond ``backups``: at most
``(backups + 1) * max_bytes`` on disk, the newest events kept. The same thread turns the new
events into documents for Elasticsearch (:mod:`hvdlog.timeline_format.documents`), appended to
``horovod-timeline.ndjson`` (rotated like the other files) for Filebeat. A timeline the user
asked for by their own means (``HOROVOD_TIMELINE`` already set) is left alone, and found by the CLI.
Elastic jobs: every process watches (any may become rank 0 at a reset), and each process and
incarnation writes ``horovod-timeline-p<pid>-e<epoch>.json`` (Horovod truncates its file at
every re-init), so no incarnation's timeline is lost.
Nothing here may raise into training: failures become one warning event.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from hvdlog.runtime.periodic import Periodic
from hvdlog.types import Emit

__all__ = ["SEGMENT_PATTERN", "TIMELINE_FILE", "TimelineCapture", "timeline_requested"]

TIMELINE_FILE: Final = "horovod-timeline.json"
#: First segment ``horovod-timeline.json``, then ``horovod-timeline.<n>.json``; in elastic jobs
#: one series per process and incarnation, ``horovod-timeline-p<pid>-e<epoch>[.<n>].json``.
SEGMENT_PATTERN: Final = re.compile(r"^(horovod-timeline(?:-p\d+-e\d+)?)(?:\.(\d+))?\.json$")
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
#: At shutdown the export repeats until the timeline has not grown for this long (Horovod's writer thread lags)...
SETTLE_S: Final = 0.15
#: ...but never longer than this: shutdown stays well under a second.
SETTLE_MAX_S: Final = 0.5
#: Longest wait for Horovod to close its timeline at shutdown (s); beyond it the rank goes on exiting.
STOP_TIMELINE_S: Final = 5.0



def timeline_requested(option: bool | None, env: dict[str, str] | None = None) -> bool:
    """``configure(timeline=...)`` wins; else ``HVDLOG_TIMELINE`` (1/true/yes/on)."""
    if option is not None:
        return option
    env = dict(os.environ) if env is None else env
    return env.get("HVDLOG_TIMELINE", "").strip().lower() in _TRUE


def _horovod_initialized() -> bool:
    hvd = sys.modules.get("horovod.torch")
    try:
        return bool(hvd is not None and hvd.is_initialized())
    except Exception:  # noqa: BLE001 - a half-loaded Horovod counts as not initialised
        return False


class TimelineCapture(Periodic):
    """Points Horovod's timeline into the job directory and keeps it within bounds."""

    def __init__(
        self, directory: Path, emit: Emit, *, max_bytes: int, backups: int, check_seconds: float = 5.0,
        rank: Callable[[], int | None] = lambda: None,
    ) -> None:
        super().__init__()
        #: The rank hvdlog's fields hold (a launcher's, or Horovod's after init): who writes the
        #: timeline once Horovod is shut down and can no longer be asked.
        self.rank = rank
        self._writes_timeline: bool | None = None
        self._stopped = False
        self.directory = directory
        self.emit = emit
        self.max_bytes = max_bytes
        self.backups = backups
        self.interval = check_seconds
        self.path: Path | None = None
        self.owned = False
        self.segments = 0
        #: Elastic jobs: each re-init reopens (truncates) HOROVOD_TIMELINE, and whichever process
        #: is rank 0 then writes it; so each process and incarnation gets its own file name.
        self.elastic = os.environ.get("HOROVOD_ELASTIC", "").strip() == "1"
        self.base = f"horovod-timeline-p{os.getpid()}-e0" if self.elastic else "horovod-timeline"
        self._follower: Any = None
        self._writer: Any = None
        self._lock = threading.Lock()

    def prepare(self, env: dict[str, str] | os._Environ[str] = os.environ) -> None:
        """Set Horovod's environment (call before ``hvd.init()``); warn if it is too late."""
        if env.get("HOROVOD_TIMELINE"):
            self.path = Path(env["HOROVOD_TIMELINE"])
            return
        if _horovod_initialized():
            self.emit("warning", "timeline requested after hvd.init(): Horovod reads HOROVOD_TIMELINE at init; "
                      "call hvdlog.configure(timeline=True) before hvd.init(), or set HVDLOG_TIMELINE=1", {})
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self._segment(0)
        env["HOROVOD_TIMELINE"] = str(self.path)
        env.setdefault("HOROVOD_CACHE_CAPACITY", "0")
        self.owned = True
        # Registered before hvd.init() registers Horovod's own shutdown, so it runs after it
        # (atexit is last in, first out): the file is whole then, and its end is exported.
        atexit.register(self.stop)

    def start(self) -> None:
        """Start the size watch (only useful on the rank that writes, found once Horovod is up)."""
        if not self.owned or self.max_bytes <= 0:
            return
        self.start_thread("hvdlog-timeline")

    def stop(self) -> None:
        """Stop the size watch and export the rest (idempotent; also run at interpreter exit).

        Horovod holds the end of the last collective until its timeline closes (0.28.1: the
        final ``E`` record), so with Horovod still up on the writing rank the timeline is
        closed here with ``hvd.stop_timeline()``: nothing is recorded after
        ``hvdlog.shutdown()``. After ``hvd.shutdown()`` the file is already whole. Horovod's
        writer is a thread with a queue, so the export repeats until the file has not grown
        for :data:`SETTLE_S` (at most :data:`SETTLE_MAX_S`, on the writing rank only).
        """
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        self.stop_thread()
        with contextlib.suppress(Exception):  # shutdown of a logging helper must not raise
            self._close_timeline()
            self._export()
            self._settle()
        if self._writer is not None:
            self._writer.close()

    def _close_timeline(self) -> None:
        """``hvd.stop_timeline()`` where this process writes the timeline hvdlog set and Horovod still runs.

        Horovod's ``stop_timeline`` sleeps until its background loop has taken the change, and that
        loop turns only with every rank: when the others have already left (the last rank of an
        elastic job, seen hanging for ever after its "done"), it never returns. So it runs in a
        daemon thread, waited for :data:`STOP_TIMELINE_S` at most: the rank's exit never waits on it.
        """
        if self.owned and _horovod_initialized() and self._writes():
            stop = sys.modules["horovod.torch"].stop_timeline

            def close() -> None:
                with contextlib.suppress(Exception):  # never a traceback from a closing timeline
                    stop()

            closer = threading.Thread(target=close, name="hvdlog-timeline-close", daemon=True)
            closer.start()
            closer.join(STOP_TIMELINE_S)

    def _writes(self) -> bool:
        """Whether this process writes the (non-elastic) timeline: Horovod's rank 0.

        Asked of Horovod while it runs (and remembered); after ``hvd.shutdown()``, the last
        answer, else the rank in hvdlog's fields. No rank there means no launcher gave one:
        a one-process Horovod, whose only rank is 0.
        """
        if _horovod_initialized():
            with contextlib.suppress(Exception):  # shutting down under us: fall back below
                self._writes_timeline = sys.modules["horovod.torch"].rank() == 0
        if self._writes_timeline is None:
            rank = self.rank()
            return rank is None or rank == 0
        return self._writes_timeline

    def _settle(self) -> None:
        """Export again until the timeline stops growing (bounded; only where this rank exported)."""
        if self._follower is None:
            return
        deadline = time.monotonic() + SETTLE_MAX_S
        size, still_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            try:
                now = self._follower.path.stat().st_size
            except OSError:
                return
            if now != size:
                size, still_since = now, time.monotonic()
                self._export()
            elif time.monotonic() - still_since >= SETTLE_S:
                return
            time.sleep(0.02)

    def tick(self) -> bool:
        """One size check and export (the thread stops on ranks that do not write the timeline)."""
        return self.check()

    def on_error(self, exc: Exception) -> bool:
        """Said once, then the watch stops (the timeline itself goes on, unbounded)."""
        self.emit("warning", "timeline size watch stopped", {"error.type": type(exc).__name__, "error.message": str(exc)})
        return False

    def check(self) -> bool:
        """One size check; rotates when due. False once this rank is known not to write the timeline."""
        if not _horovod_initialized():
            return True
        hvd = sys.modules["horovod.torch"]
        if hvd.rank() != 0:
            if self.elastic:  # it may have been rank 0 earlier in this incarnation, and may become it
                self._export()
            return self.elastic

        current = self._segment(self.segments)
        self._export()
        try:
            size = current.stat().st_size
        except FileNotFoundError:
            return True
        if size < self.max_bytes:
            return True
        self.segments += 1
        hvd.start_timeline(str(self._segment(self.segments)))
        self._export()  # the rest of the closed segment; the next poll starts the new one
        self._follower = None
        self._prune()
        return True

    def _segment(self, number: int) -> Path:
        return self.directory / (f"{self.base}.json" if not number else f"{self.base}.{number}.json")

    def next_incarnation(self, epoch: int) -> None:
        """Before Horovod's elastic re-init: the new incarnation writes a file of its own (the
        one Horovod would otherwise truncate keeps the last incarnation's timeline)."""
        if not self.owned or not self.elastic:
            return
        with contextlib.suppress(Exception):  # export what is left of the ending incarnation
            self._export()
        with self._lock:
            self.base, self.segments, self._follower = f"horovod-timeline-p{os.getpid()}-e{epoch}", 0, None
            self.path = self._segment(0)
            os.environ["HOROVOD_TIMELINE"] = str(self.path)

    def _export(self) -> None:
        """Append documents for what Horovod wrote since the last call (rank 0, owned timeline only;
        elastic: this process's own file of this incarnation, whatever its rank is now)."""
        if not self.owned:
            return
        if self.elastic:
            if not self._segment(self.segments).exists():
                return
        elif not self._writes() or (self._follower is None and not self._segment(self.segments).exists()):
            return
        with self._lock:
            self._export_locked()

    def _export_locked(self) -> None:
        from hvdlog.runtime.writer import RankFileWriter
        from hvdlog.timeline_format.documents import EXPORT_FILE, TimelineFollower, documents, export_line, job_and_host

        if self._follower is None:
            self._follower = TimelineFollower(self._segment(self.segments))
        if self._writer is None:
            # Elastic: whichever process is rank 0 exports, so each process has its own file.
            name = f"horovod-timeline-p{os.getpid()}.ndjson" if self.elastic else EXPORT_FILE
            self._writer = RankFileWriter(self.directory / name, max_bytes=self.max_bytes, backups=self.backups)
        job, host = job_and_host(self._follower.path)
        for doc in documents(self._follower.poll(), job, host):
            self._writer.write(export_line(doc))

    def _prune(self) -> None:
        """Delete the oldest closed segments beyond ``backups``."""
        numbered = sorted(
            (int(m[2] or 0), p) for p in self.directory.iterdir() if (m := SEGMENT_PATTERN.match(p.name)) and m[1] == self.base
        )
        for _, path in numbered[: max(len(numbered) - (self.backups + 1), 0)]:
            path.unlink(missing_ok=True)

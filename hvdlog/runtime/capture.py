"""Keep each rank's native stdout and stderr in files next to its JSON file.

Horovod's C++ core writes DEBUG/INFO to fd 1 and WARNING+ to fd 2 of each process,
below Python. We point fds 1 and 2 at pipes read by one small capture process
(``hvdlog/runtime/tee.py``, stdlib only) that appends to ``rank-N.stdout.log`` /
``rank-N.stderr.log`` and still writes to the original console, so ``horovodrun``
shows (and tags) everything as before.

Capture must never break the rank's output:

- the rank keeps its own copy of each pipe's read end, so a write never meets a pipe
  without a reader (no ``BrokenPipeError``/``SIGPIPE``) even while the tee is dead;
- a monitor thread sees the tee die (EOF on its status pipe) and starts a new one on the
  same pipes, which reads what queued up meanwhile; after too many deaths it points
  fds 1 and 2 back at the console and gives up capturing;
- the tee reports lines it could not write to its files; the monitor logs them as a
  ``log_dropped`` event through the rank's own writer;
- a guard thread (:mod:`hvdlog.runtime.capture_guard`) drains the pipes to the console while
  the tee is stopped or wedged, so a write never waits for it for long (counted, reported once).
- a tee left stopped when the rank ends (``shutdown()`` or interpreter exit) is continued: it
  holds the launcher's console pipes, and horovodrun waits for their end before it exits.

``linger()`` (what ``shutdown()`` does) keeps fds 1 and 2 on the pipes until the process ends:
Horovod prints its last lines (``Shutting down background thread``) from its own shutdown at
interpreter exit, after the script's ``hvdlog.shutdown()``. The tee writes them and exits at
EOF, when the process has ended; the rank never waits for it.

``stop()`` (a new ``configure()``) restores the fds, asks the tee to write out what is already in the pipes and
waits for its answer (well under a second) — it does not wait for children that still
hold the pipes: the tee keeps serving them in the background and exits at EOF.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvdlog.runtime import stdio
from hvdlog.runtime.capture_guard import CaptureGuard, process_state
from hvdlog.runtime.secrets import Redactor, secret_values
from hvdlog.types import Emit

__all__ = ["TEE_SCRIPT", "NativeCapture"]

#: The capture process's script, run by path so it imports nothing of the package.
TEE_SCRIPT = str(Path(__file__).resolve().with_name("tee.py"))


_MAX_RESTARTS = 5  # within _RESTART_WINDOW seconds; more means something is badly wrong
_RESTART_WINDOW = 30.0
_RETRY_REPORT = 0.2  # seconds between attempts to log a drop count the JSON file refused
_RANK_ACK = 1.0  # seconds to wait for the tee to take a new rank (an elastic reset)


@dataclass
class NativeCapture:
    """Redirects fds 1 and 2 through one tee process; ``console_fds`` keeps the originals."""

    stdout_path: Path
    stderr_path: Path
    max_bytes: int = 0
    backups: int = 5
    redact: bool = True
    #: Elastic jobs: the file is the process's, so each line carries a ``[rank]<stream>:`` tag
    #: with the rank at the time it was printed (:meth:`set_rank`); ``rank`` None: no tag yet.
    rank_tags: bool = False
    rank: int | None = None
    emit: Emit | None = None
    try_emit: Callable[[str, str, dict[str, Any]], bool] | None = None
    console_fds: dict[int, int] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    restarts: list[float] = field(default_factory=list)
    _read_ends: dict[int, int] = field(default_factory=dict)
    _control: int = -1
    _status: int = -1
    _stopping: bool = False
    _flushed: threading.Event = field(default_factory=threading.Event)
    _ranked: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending_drops: dict[str, tuple[int, str]] = field(default_factory=dict)
    _drops_lock: threading.Lock = field(default_factory=threading.Lock)
    guard: CaptureGuard | None = None
    _replaced: stdio.Replaced = field(default_factory=stdio.Replaced)

    def start(self) -> None:
        """Start the tee and swap the file descriptors (idempotent). Raises OSError when the
        pipes or the process cannot be made; the fds are then left as they were."""
        if self.console_fds:
            return
        _flush_standard_streams()
        consoles: dict[int, int] = {}
        pipes: dict[int, tuple[int, int]] = {}
        try:
            for fd in (1, 2):
                consoles[fd] = os.dup(fd)
                pipes[fd] = os.pipe()
            self.console_fds, self._read_ends = consoles, {fd: ends[0] for fd, ends in pipes.items()}
            self._spawn()
        except OSError:
            self.console_fds, self._read_ends = {}, {}
            for fd in [*consoles.values(), *(end for ends in pipes.values() for end in ends)]:
                os.close(fd)
            raise
        for fd, (_, write_end) in pipes.items():
            os.dup2(write_end, fd)
            os.close(write_end)
        self._await_ready()
        self._start_guard()
        with contextlib.suppress(RuntimeError):  # no thread to spare: capture still works, only without restarts and drop reports
            threading.Thread(target=self._monitor, args=(self.process, self._status), name="hvdlog-capture-monitor", daemon=True).start()
        # Python's own prints reach the file line by line, not at exit, and a print in a signal
        # handler during a print blocked on the pipe neither fails nor tears a line (stdio.py).
        self._replaced = stdio.install()
        atexit.register(self._continue_at_exit)
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                with contextlib.suppress(OSError, ValueError):
                    reconfigure(line_buffering=True)

    def _start_guard(self) -> None:
        """The thread that keeps a stuck tee from blocking the rank (none where /proc is missing)."""
        guard = CaptureGuard(
            dict(self._read_ends), dict(self.console_fds), self._tee_pid, self._report, self._guard_dropped,
            redactor=Redactor(secret_values()) if self.redact else None,
        )
        self.guard = guard if guard.start() else None

    def _tee_pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None else None

    def stuck(self) -> str | None:
        """A sentence naming the capture process when it is stuck (for the stall watchdog), else None."""
        guard = self.guard
        return guard.describe() if guard is not None else None

    def _stop_guard(self) -> None:
        guard, self.guard = self.guard, None
        if guard is not None:
            guard.stop()

    def _spawn(self) -> None:
        """Start a tee on the existing pipes, with fresh control and status pipes."""
        control_read, control_write = os.pipe()
        status_read, status_write = os.pipe()
        spec = {
            "stdout_fd": self._read_ends[1], "stderr_fd": self._read_ends[2],
            "stdout_file": str(self.stdout_path), "stderr_file": str(self.stderr_path),
            "control_fd": control_read, "status_fd": status_write,
            "max_bytes": self.max_bytes, "backups": self.backups, "redact": self.redact,
            "rank": self.rank if self.rank_tags else None,
        }
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", TEE_SCRIPT, json.dumps(spec)],
                stdin=subprocess.DEVNULL,
                stdout=self.console_fds[1],
                stderr=self.console_fds[2],
                pass_fds=(self._read_ends[1], self._read_ends[2], control_read, status_write),
                start_new_session=True,  # Ctrl-C and launcher kills reach the rank, not the tee
            )
        except OSError:
            for fd in (control_read, control_write, status_read, status_write):
                os.close(fd)
            raise
        os.close(control_read)
        os.close(status_write)
        self._control, self._status = control_write, status_read

    def _await_ready(self, timeout: float = 2.0) -> None:
        """Wait (bounded) until the tee reads: a line's arrival time is when the tee reads it,
        so output written while it is still starting would be stamped late."""
        deadline = time.monotonic() + timeout
        received = b""
        while b"\n" not in received and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._status], [], [], left)
            if not ready:
                break
            chunk = os.read(self._status, 1)  # one byte at a time: leave later messages to the monitor
            if not chunk:
                break
            received += chunk

    def _monitor(self, process: subprocess.Popen[bytes], status: int) -> None:
        """Follow one tee's status pipe; when it dies, start another (or give up)."""
        while True:
            buffered = b""
            while True:
                if self._pending_drops and not select.select([status], [], [], _RETRY_REPORT)[0]:
                    self._report_drops()  # the JSON file may be writable again by now
                    continue
                try:
                    data = os.read(status, 4096)
                except OSError:
                    data = b""
                if not data:
                    break
                buffered += data
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    self._on_status(line.decode("ascii", "replace").split())
            _close(status)
            code = process.wait()
            with self._lock:
                if self._stopping or code == 0:
                    return
                restarted, status = self._restart(code)
                if restarted is None:
                    return
                process = restarted

    def _on_status(self, words: list[str]) -> None:
        if words[:1] == ["flushed"]:
            self._flushed.set()
        elif words[:1] == ["ranked"]:
            self._ranked.set()
        elif words[:1] == ["dropped"] and len(words) >= 3 and words[2].isdigit():
            self._add_drops(words[1], int(words[2]), words[3] if len(words) > 3 else "")
        self._report_drops()

    def _guard_dropped(self, stream: str, count: int, reason: str) -> None:
        self._add_drops(stream, count, reason)
        self._report_drops()

    def _add_drops(self, stream: str, count: int, reason: str) -> None:
        """Count lines of ``stream`` that missed the file; :meth:`_report_drops` logs them."""
        with self._drops_lock:
            before, _ = self._pending_drops.get(stream, (0, reason))
            self._pending_drops[stream] = (before + count, reason)

    def _report_drops(self) -> None:
        """Log the capture's drop counts; a count that cannot be written yet (the JSON file is
        on the same full disk) is kept and added to the next report."""
        with self._drops_lock:
            self._report_drops_locked()

    def _report_drops_locked(self) -> None:
        for stream, (count, reason) in list(self._pending_drops.items()):
            path = self.stdout_path if stream == "stdout" else self.stderr_path
            fields = {"event.action": "log_dropped", "event.reason": reason, "log.dropped": count, "horovod.launcher.stream": stream}
            try:
                written = self.try_emit is not None and self.try_emit("warning", f"{count} lines of {stream} were not written to {path} ({reason})", fields)
            except Exception:  # noqa: BLE001 - a report must never break the rank
                written = False
            if written:
                del self._pending_drops[stream]

    def _restart(self, code: int) -> tuple[subprocess.Popen[bytes] | None, int]:
        """A new tee after the last one died with ``code`` (lock held)."""
        _close(self._control)
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < _RESTART_WINDOW] + [now]
        if len(self.restarts) <= _MAX_RESTARTS:
            try:
                self._spawn()
            except OSError as exc:
                how += f"; cannot start another: {exc}"
            else:
                self._report("warning", f"the capture process died ({how}); started a new one", {"event.action": "capture_restarted", "event.reason": how})
                assert self.process is not None
                return self.process, self._status
        stopped = {"event.action": "capture_stopped", "event.reason": how}
        self._report("error", f"the capture process died ({how}); native output goes to the console only from now on", stopped)
        self._stop_guard()
        self._release()
        return None, -1

    def _release(self) -> None:
        """Point fds 1 and 2 back at the console and pass on what is still queued in the pipes."""
        self._give_back_fds()
        for fd, read_end in self._read_ends.items():
            os.set_blocking(read_end, False)
            try:
                while chunk := os.read(read_end, 65536):
                    os.write(self.console_fds[fd], chunk)
            except OSError:
                pass
            _close(read_end)
        self._read_ends.clear()

    def _give_back_fds(self) -> None:
        """Point fds 1 and 2 back at the console, but only those still on our pipes: a script
        that re-pointed fd 1 at its own file (``os.dup2``) keeps writing there."""
        for fd, console in self.console_fds.items():
            read_end = self._read_ends.get(fd)
            if read_end is None or _same_file(fd, read_end):
                os.dup2(console, fd)

    def _report(self, level: str, message: str, fields: dict[str, Any]) -> None:
        emit = self.emit
        try:
            if emit is not None:
                emit(level, message, fields)
            else:
                os.write(self.console_fds.get(2, 2), f"hvdlog: {message}\n".encode())
        except Exception:  # noqa: BLE001, S110 - a report must never break the rank, and has nowhere left to go
            pass

    def stop(self, timeout: float = 0.8) -> None:
        """Restore the original fds and have the tee write out what is already in the pipes.

        Returns within ``timeout`` even when children still hold the pipes (the tee keeps
        serving them and exits when they are done).
        """
        if not self.console_fds:
            return
        atexit.unregister(self._continue_at_exit)
        _flush_standard_streams()
        stdio.restore(self._replaced)
        with self._lock:
            self._stopping = True
            self._flushed.clear()
            self._give_back_fds()
            self._continue_if_stopped()
            if self._running() is not None and self._read_ends:
                self._ask_flush(timeout)
            self._continue_if_stopped()  # a stop that was still arriving
            self._stop_guard()
            self._report_drops()
            for fd in [self._control, *self._read_ends.values(), *self.console_fds.values()]:
                _close(fd)
            self._read_ends.clear()
            self.console_fds.clear()
            self._control = -1

    def _ask_flush(self, timeout: float) -> None:
        """Ask the capture process to write out what the pipes hold; wait for it at most
        ``timeout`` (0.1 s when it is stuck). A capture that is gone is not waited for."""
        try:
            os.write(self._control, b"flush\n")
        except OSError:
            return
        self._flushed.wait(0.1 if self.stuck() else timeout)

    def linger(self, timeout: float = 0.8) -> None:
        """``shutdown()``: write out what is in the pipes and report drops now, while the rank's
        JSON file is open, but keep capturing until the process ends (the tee exits at EOF).

        Python's standard streams are put back; later reports go to the console's stderr.
        Returns within ``timeout``, like :meth:`stop`.
        """
        if not self.console_fds:
            return
        _flush_standard_streams()
        stdio.restore(self._replaced)
        self._replaced = stdio.Replaced()
        with self._lock:
            self._continue_if_stopped()
            if self._running() is not None and self._read_ends:
                self._flushed.clear()
                self._ask_flush(timeout)
            self._continue_if_stopped()
            guard = self.guard
            if guard is not None:
                guard.settle()
            self._report_drops()
            self.emit, self.try_emit = None, self._to_console

    def _to_console(self, level: str, message: str, fields: dict[str, Any]) -> bool:
        """After ``shutdown()`` the JSON file is closed: a report goes to the console's stderr."""
        del level, fields
        self._report("warning", message, {})
        return True

    def _running(self) -> subprocess.Popen[bytes] | None:
        """The capture process, while it has not exited (None: never started, or gone)."""
        process = self.process
        return process if process is not None and process.poll() is None else None

    def _continue_if_stopped(self) -> None:
        """A capture process left stopped (``kill -STOP``) when the rank ends is continued: stopped,
        it would hold the launcher's console pipes for ever, and horovodrun waits for their end
        after the rank exits (a job that never finishes). Running, it writes out and exits at EOF."""
        process = self._running()
        if process is None or process_state(process.pid) != "T":
            return
        pid = process.pid
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)
            self._report("warning", f"the capture process (pid {pid}) was stopped when the rank ended; continued it so the launcher's console can close",
                         {"event.action": "capture_continued"})

    def _continue_at_exit(self) -> None:
        """At interpreter exit without ``shutdown()``: the same, the capture staying on."""
        if self.console_fds:
            self._continue_if_stopped()

    def set_rank(self, rank: int | None) -> None:
        """The process's rank changed (elastic reset): lines already written keep the old
        rank's tag, later ones get the new one (the tee reads the pipes empty first)."""
        if not self.rank_tags or rank == self.rank or rank is None:
            return
        self.rank = rank
        _flush_standard_streams()
        with self._lock, contextlib.suppress(OSError):
            if self._control >= 0:
                self._ranked.clear()
                os.write(self._control, f"rank {rank}\n".encode())
                # Bytes in the pipes now were printed under the old rank: wait (bounded) until
                # the tee has written them, so what this thread prints next gets the new tag.
                self._ranked.wait(_RANK_ACK)

    def console_fd(self, fd: int) -> int:
        """The fd that reaches the original console for ``fd`` (itself when not captured)."""
        return self.console_fds.get(fd, fd)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        _flush(stream)


def _flush(stream: Any) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.flush()


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _same_file(fd: int, other: int) -> bool:
    """Whether two fds are the same open file (a pipe's two ends are); True when ``fd`` is closed."""
    try:
        mine = os.fstat(fd)
    except OSError:
        return True
    try:
        theirs = os.fstat(other)
    except OSError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)

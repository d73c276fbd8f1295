"""Keep a stopped or wedged capture process from blocking the rank.

The rank's fds 1 and 2 are pipes read by the capture process (:mod:`hvdlog.runtime.tee`). When
that process stops reading (``kill -STOP``, a debugger, a wedged disk write), a pipe fills up
after 64 KiB and the next ``print`` — or Horovod's C++ logging — blocks for ever. This thread
watches for that: every ``poll`` seconds it looks at how much waits in each pipe (``FIONREAD``)
and whether the capture process read anything since (``rchar`` in ``/proc/<pid>/io``).

Data waiting while the capture reads nothing for ``stopped_after`` seconds (the process is
stopped, state ``T``) or ``wedged_after`` seconds (any other state: wedged, or starved on a
very loaded machine) starts an *episode*: a ``capture_stuck`` warning, then the guard itself
takes the oldest bytes out of any pipe more than half full and writes them to the console
(redacted), so a writer waits at most about one ``poll``. Those lines miss the per-rank file:
they are counted and, when the capture reads again (or at ``shutdown()``), reported once as a
``log_dropped`` event with ``event.reason: capture_stuck``. Less than half a pipe is left for
the capture, so lines resume in the file as soon as it runs again.

The guard reads through its own open of each pipe (``/proc/self/fd/N``, non-blocking), so the
capture process's descriptor stays blocking. Without ``/proc`` (not Linux) there is no guard.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hvdlog.runtime.secrets import Redactor

__all__ = ["CaptureGuard", "process_state"]

_F_GETPIPE_SZ = 1032  # Linux fcntl; not exported by the fcntl module before Python 3.10 everywhere
_STREAMS = {1: "stdout", 2: "stderr"}


def process_state(pid: int) -> str | None:
    """The one-letter state of a process (``R``, ``S``, ``D``, ``T``...), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    after = stat.rfind(b")")  # the command name may hold spaces and parentheses
    return stat[after + 2 : after + 3].decode("ascii", "replace") if after > 0 else None


def _chars_read(pid: int) -> int | None:
    """Bytes the process has read so far (``rchar``), or None when ``/proc/<pid>/io`` is closed to us."""
    try:
        with open(f"/proc/{pid}/io", "rb") as handle:
            for line in handle:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _queued(fd: int) -> int:
    """Bytes waiting in a pipe."""
    try:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])
    except OSError:
        return 0


@dataclass
class _Pipe:
    """The guard's own view of one captured pipe."""

    name: str
    rescue: int  # non-blocking read end, the guard's own open file description
    console: int
    capacity: int
    lines: int = 0  # lines taken out in the current episode
    held: bytes = b""  # redaction hold-back: may still be the start of a secret


@dataclass
class CaptureGuard:
    """A daemon thread that drains the capture's pipes to the console while the capture is stuck."""

    read_ends: dict[int, int]
    consoles: dict[int, int]
    pid: Callable[[], int | None]
    report: Callable[[str, str, dict[str, object]], None]
    dropped: Callable[[str, int, str], None]
    redactor: Redactor | None = None
    poll: float = 0.05
    stopped_after: float = 0.25
    wedged_after: float = 5.0
    stuck_since: float | None = None
    _pipes: list[_Pipe] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> bool:
        """Open the rescue ends and start the thread; False (no guard) when that is impossible."""
        try:
            for fd, read_end in self.read_ends.items():
                rescue = os.open(f"/proc/self/fd/{read_end}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                try:
                    capacity = fcntl.fcntl(rescue, _F_GETPIPE_SZ)
                except OSError:
                    capacity = 65536
                self._pipes.append(_Pipe(_STREAMS.get(fd, str(fd)), rescue, self.consoles[fd], capacity))
            self._thread = threading.Thread(target=self._run, name="hvdlog-capture-guard", daemon=True)
            self._thread.start()
        except (OSError, RuntimeError):  # no /proc, no fd or no thread to spare: capture without a guard
            self._close()
            return False
        return True

    def stop(self) -> None:
        """End the thread (reporting an episode in progress) and close the rescue ends."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(1.0)
        with self._lock:
            self._end_episode()
            self._close()

    def settle(self) -> None:
        """Report the lines counted so far in an episode in progress, the guard going on
        (``shutdown()``: the rank's JSON file closes next, the capture stays until the process ends)."""
        with self._lock:
            for pipe in self._pipes:
                if pipe.lines:
                    self.dropped(pipe.name, pipe.lines, "capture_stuck")
                    pipe.lines = 0

    def describe(self) -> str | None:
        """A sentence naming the stuck capture process, or None while it reads."""
        since, pid = self.stuck_since, self.pid()
        if since is None or pid is None:
            return None
        state = process_state(pid)
        how = "stopped" if state in ("T", "t") else f"in state {state}" if state else "not reading"
        return f"the capture process (pid {pid}) is {how} and has not read for {time.monotonic() - since:.0f} s"

    def _close(self) -> None:
        for pipe in self._pipes:
            with contextlib.suppress(OSError):
                os.close(pipe.rescue)
        self._pipes.clear()

    def _run(self) -> None:
        progress: int | None = None
        idle_since = time.monotonic()
        while not self._stop.wait(self.poll):
            with self._lock, contextlib.suppress(Exception):  # the guard must never break the rank; the next tick retries
                progress, idle_since = self._tick(progress, idle_since)

    def _tick(self, progress: int | None, idle_since: float) -> tuple[int | None, float]:
        now = time.monotonic()
        pid = self.pid()
        if pid is None or not self._pipes:
            return progress, now
        read = _chars_read(pid)
        queued = max(_queued(pipe.rescue) for pipe in self._pipes)
        if (read is not None and read != progress) or queued == 0:
            if self.stuck_since is not None and read != progress:
                self._end_episode()
            return read, now
        if self.stuck_since is None:
            state = process_state(pid)
            limit = self.stopped_after if state in ("T", "t") else self.wedged_after
            if now - idle_since < limit:
                return progress, idle_since
            self.stuck_since = idle_since
            self.report("warning", f"{self.describe()}: native output goes to the console only until it reads again", {"event.action": "capture_stuck"})
        for pipe in self._pipes:
            if _queued(pipe.rescue) * 2 >= pipe.capacity:
                self._drain(pipe)
        return _chars_read(pid), idle_since

    def _drain(self, pipe: _Pipe) -> None:
        """Take what waits in the pipe and write it to the console."""
        try:
            data = os.read(pipe.rescue, pipe.capacity)
        except OSError:  # EAGAIN: the capture took it first
            return
        pipe.lines += data.count(b"\n")
        data = pipe.held + data
        hold = 0
        if self.redactor:
            data = self.redactor(data)
            hold = self.redactor.holdback(data)
        out, pipe.held = data[: len(data) - hold], data[len(data) - hold :]
        _write_all(pipe.console, out)

    def _end_episode(self) -> None:
        if self.stuck_since is None:
            return
        self.stuck_since = None
        for pipe in self._pipes:
            _write_all(pipe.console, pipe.held)
            pipe.held = b""
            if pipe.lines:
                self.dropped(pipe.name, pipe.lines, "capture_stuck")
                pipe.lines = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    with contextlib.suppress(OSError):
        while view:
            view = view[os.write(fd, view) :]

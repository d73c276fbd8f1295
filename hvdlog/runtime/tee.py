"""The per-rank capture process: one for both streams, stdlib only.

Started by :mod:`hvdlog.runtime.capture` as ``python -I -S .../hvdlog/runtime/tee.py SPEC`` — a script
path, not a module of the package, so it never imports hvdlog, structlog or orjson (it
loads ``secrets.py`` and ``writer.py`` by file path; both are stdlib only). It reads the
rank's stdout and stderr pipes and for each:

- writes the bytes through to the original console at once (after redaction), raw;
- appends whole lines to ``rank-N.stdout.log`` / ``rank-N.stderr.log``, each prefixed with
  the UTC time its first byte arrived (``2026-11-30T14:35:49.123456Z ``) unless it starts
  with Horovod's own ``[YYYY-MM-DD HH:MM:SS.`` header. Only whole lines go to the file,
  so rotation can never split one.

Secrets (see ``secrets.py``) are redacted; only the trailing bytes that may still be the
start of a secret are held back, until more bytes (or EOF/flush) decide.

It never dies of a write error: a dead console is dropped, a file that cannot be written
is retried on every batch and its dropped lines are counted and reported to the rank
over the status pipe (``dropped <stream> <count> <reason>``) once writing works again.
It ignores SIGINT/SIGTERM/SIGHUP (those are for the rank) and exits at EOF on both pipes,
so a rank killed by SIGKILL loses nothing it wrote. On ``flush`` from the control pipe
(the rank's ``shutdown()``), it writes out everything already in the pipes, partial
lines included, and answers ``flushed``. In elastic jobs each file line carries a gloo-style
``[rank]<stream>:`` tag after the time; on ``rank N`` (an elastic reset) it writes out what is
already in the pipes under the old tag, then tags with N and answers ``ranked`` (the rank waits
for it, so what it prints next cannot be read before the change).
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import json
import os
import re
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the checker only: at run time these are loaded by path (see _load)
    from hvdlog.runtime.secrets import Redactor
    from hvdlog.runtime.writer import RankFileWriter

HOROVOD_HEADER = re.compile(rb"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.")  # Horovod's core header: has its own time
MAX_LINE = 1 << 20  # a "line" longer than this without a newline is written in pieces
READ_SIZE = 65536


def _load(name: str) -> ModuleType:
    """Load a stdlib-only sibling file as a private module (no package import)."""
    spec = importlib.util.spec_from_file_location(f"_hvdlog_tee_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def arrival_prefix(seconds: float) -> bytes:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ `` for a UTC epoch time."""
    micros = int(seconds * 1_000_000)
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(micros // 1_000_000))
    return f"{whole}.{micros % 1_000_000:06d}Z ".encode()


class Stream:
    """One captured stream: pipe in, console and file out."""

    def __init__(self, name: str, pipe: int, console: int, writer: RankFileWriter, redactor: Redactor | None, status: Callable[[bytes], None]) -> None:
        self.name, self.pipe, self.console = name, pipe, console
        self.writer, self.redactor, self.status = writer, redactor, status
        self.pending = b""  # may still be the start of a secret
        self.partial = bytearray()  # the current line, not yet ended by a newline (amortised appends: linear time)
        self.line_time: float | None = None  # when the current line's first byte arrived
        self.tag = b""  # elastic jobs: ``[rank]<stream>:`` before each line (the file is the process's)

    def set_rank(self, rank: int | None) -> None:
        self.tag = b"" if rank is None else f"[{rank}]<{self.name}>:".encode()

    def feed(self, chunk: bytes, now: float) -> None:
        if self.line_time is None:
            self.line_time = now
        data = self.pending + chunk
        if self.redactor:
            data = self.redactor(data)
            hold = self.redactor.holdback(data)
        else:
            hold = 0
        out, self.pending = data[: len(data) - hold], data[len(data) - hold :]
        if out:
            self._console(out)
            self._file(out, now)

    def flush(self, now: float) -> None:
        """Release everything held: held-back bytes and the partial line (newline added)."""
        if self.pending:
            self._console(self.pending)
            self._file(self.pending, now)
            self.pending = b""
        if self.partial:
            self._write([self._stamp(bytes(self.partial) + b"\n", self.line_time or now)])
            self.partial.clear()
        self.line_time = None

    def _stamp(self, line: bytes, arrived: float) -> bytes:
        return (b"" if HOROVOD_HEADER.match(line) else arrival_prefix(arrived)) + self.tag + line

    def _file(self, out: bytes, now: float) -> None:
        lines = []
        arrived = self.line_time if self.line_time is not None else now
        start = 0
        while (end := out.find(b"\n", start)) != -1:
            if self.partial:
                self.partial += out[start : end + 1]
                lines.append(self._stamp(bytes(self.partial), arrived))
                self.partial.clear()
            else:
                lines.append(self._stamp(out[start : end + 1], arrived))
            arrived, start = now, end + 1
        self.partial += out[start:]
        if len(self.partial) >= MAX_LINE:
            lines.append(self._stamp(bytes(self.partial) + b"\n", arrived))
            self.partial.clear()
            arrived = now
        self.line_time = arrived if (self.partial or self.pending) else None
        if lines:
            self._write(lines)

    def _write(self, lines: list[bytes]) -> None:
        self.writer.last_resumed = None
        self.writer.write_lines(lines)
        self._report_resumed()

    def _report_resumed(self) -> None:
        """Tell the rank how many lines an episode of drops that this write ended lost."""
        if self.writer.last_resumed is not None:
            count, reason = self.writer.last_resumed
            self.status(f"dropped {self.name} {count} {reason}\n".encode())

    def _console(self, data: bytes) -> None:
        """Write through to the console; when it is gone (EPIPE, EBADF, EIO) stop trying."""
        if self.console < 0:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.console, view) :]
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO, errno.ENXIO):
                self.console = -1


def _open_streams(spec: dict[str, Any], writer_module: ModuleType, redactor: Redactor | None, status: Callable[[bytes], None]) -> dict[int, Stream]:
    """One stream per pipe (stdout, stderr), each writing its own rank file."""
    streams: dict[int, Stream] = {}
    for name, console in (("stdout", 1), ("stderr", 2)):
        writer = writer_module.RankFileWriter()
        writer.console_fd = 2
        writer.fallback_console = False  # the console already has these bytes
        writer.open(spec[f"{name}_file"], spec.get("max_bytes", 0), spec.get("backups", 5))
        pipe = spec[f"{name}_fd"]
        streams[pipe] = Stream(name, pipe, console, writer, redactor, status)
        streams[pipe].set_rank(spec.get("rank"))
    return streams


def _obey(command: bytes, streams: dict[int, Stream], drain: Callable[[], None], status: Callable[[bytes], None]) -> None:
    """The rank's commands on the control pipe: ``rank N`` (retag from now on) and ``flush``."""
    for word, _, value in (part.partition(b" ") for part in command.split(b"\n")):
        if word == b"rank" and value.strip().isdigit():
            drain()  # what was printed before the rank changed keeps the old tag
            for stream in streams.values():
                stream.set_rank(int(value))
            status(b"ranked\n")
    if b"flush" in command:
        drain()
        status(b"flushed\n")


def main(spec: dict[str, Any]) -> int:
    """Tee until EOF on both pipes."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    secrets, writer_module = _load("secrets"), _load("writer")
    redactor = secrets.Redactor(secrets.secret_values()) if spec.get("redact", True) else None
    status_fd = spec["status_fd"]

    def status(message: bytes) -> None:
        with contextlib.suppress(OSError):
            os.write(status_fd, message)

    streams = _open_streams(spec, writer_module, redactor, status)
    poller = select.poll()
    for pipe in streams:
        poller.register(pipe, select.POLLIN)
    control = spec["control_fd"]
    poller.register(control, select.POLLIN)
    status(b"ready\n")

    def read(pipe: int) -> None:
        try:
            chunk = os.read(pipe, READ_SIZE)
        except OSError:
            chunk = b""
        stream = streams[pipe]
        if chunk:
            stream.feed(chunk, time.time())
            return
        stream.flush(time.time())  # EOF: every writer is gone
        stream.writer.close()
        poller.unregister(pipe)
        del streams[pipe]

    def drain() -> None:
        """Everything already written to the pipes, then the partial lines."""
        while streams:
            ready = [fd for fd, _ in poller.poll(0) if fd in streams]
            if not ready:
                break
            for pipe in ready:
                read(pipe)
        now = time.time()
        for stream in streams.values():
            stream.flush(now)

    while streams:
        for fd, _ in poller.poll():
            if fd == control:
                try:
                    command = os.read(control, 4096)
                except OSError:
                    command = b""
                if not command:  # the rank is gone (and nobody else holds the control pipe)
                    poller.unregister(control)
                    continue
                _obey(command, streams, drain, status)
            elif fd in streams:
                read(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))

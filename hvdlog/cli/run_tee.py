"""The console tee of ``hvdlog run``: its own process, stdlib only.

Started by :mod:`hvdlog.cli.run` as ``python -I -S .../hvdlog/cli/run_tee.py SPEC`` before the
launcher, it holds the read ends of the launcher's stdout and stderr pipes. It is a process of
its own, not a thread of ``hvdlog run``, so the launcher's output keeps flowing when
``hvdlog run`` is killed (SIGKILL too) or hung up: a launcher whose reader died would get
``BrokenPipeError`` at its next print. For each stream it:

- redacts secrets with the ranks' own redactor (``hvdlog/runtime/secrets.py``, loaded by path),
  holding back only trailing bytes that could still start a secret;
- writes the bytes through to the console at once; a console that is gone (``| head -1``
  exited, the terminal closed: EPIPE, EIO, ...) is dropped and the launcher is read on, so it
  never blocks or dies for want of a reader;
- appends whole lines to ``launcher.log`` through the ranks' writer
  (``hvdlog/runtime/writer.py``: 0640, ``O_NOFOLLOW``, a short write on a full disk taken back,
  one warning on stderr, the count said and noted in the file when writing works again), each
  line after the UTC time its first byte arrived. A line longer than 1 MiB without a newline
  (``\\r`` progress bars) is written in 1 MiB pieces; the unfinished line is kept in a
  ``bytearray``, so output without newlines costs linear time.

In an elastic job the workers' tagged lines are not copied to the file (see
:data:`hvdlog.cli.run.WORKER_LINE`). It ignores SIGINT, SIGTERM, SIGHUP and SIGPIPE (those are
for the launcher) and exits at EOF on both pipes, when the launcher and everything it started
that shares its console are gone.
"""

from __future__ import annotations

import contextlib
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
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # for the checker only: at run time these are loaded by path (see _load)
    from hvdlog.runtime.secrets import Redactor
    from hvdlog.runtime.writer import RankFileWriter

_ARRIVAL_LENGTH = len("2026-11-30T14:35:49.123456Z ")


def _ranks_tee() -> ModuleType:
    """The ranks' own capture script (``hvdlog/runtime/tee.py``, stdlib only), loaded by path as a
    private module: its loader, its stream and its arrival stamp serve the launcher's console too."""
    path = Path(__file__).resolve().parent.parent / "runtime" / "tee.py"
    spec = importlib.util.spec_from_file_location("_hvdlog_run_tee_base", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


_TEE: Final = _ranks_tee()
arrival_prefix: Final[Callable[[float], bytes]] = _TEE.arrival_prefix


if TYPE_CHECKING:
    from hvdlog.runtime.tee import Stream as _RankStream
else:
    _RankStream = _TEE.Stream


class Stream(_RankStream):
    """One of the launcher's streams: the ranks' stream (redaction, console, linear line
    assembly), but every line gets its arrival time, and one batch write falls back to line
    by line so a full disk keeps every line that fits."""

    def __init__(self, console: int, writer: RankFileWriter, redactor: Redactor | None, skip: re.Pattern[bytes] | None,
                 glued: re.Pattern[bytes] | None = None) -> None:
        super().__init__("launcher", -1, console, writer, redactor, status=lambda _message: None)
        self.skip = skip
        self.glued = glued

    def _unglued(self, line: bytes) -> list[bytes]:
        """A dead worker's last piece and horovodrun's exit line behind it, as two lines with the
        same arrival time (the grammar's HOROVOD_GLUED_LAUNCHER_LINE, given by hvdlog run)."""
        found = self.glued.match(line, _ARRIVAL_LENGTH) if self.glued is not None and b"]<" in line else None
        if found is None:
            return [line]
        start = found.start("launcher_line")
        return [line[:start] + b"\n", line[:_ARRIVAL_LENGTH] + line[start:]]

    def _stamp(self, line: bytes, arrived: float) -> bytes:
        return arrival_prefix(arrived) + line

    def _write(self, lines: list[bytes]) -> None:
        if self.glued is not None:
            lines = [piece for line in lines for piece in self._unglued(line)]
        if self.skip is not None:
            lines = [line for line in lines if not self.skip.match(line, _ARRIVAL_LENGTH)]
        # The counted drops cover exactly the lines that did not fit.
        if lines and not self.writer.write(b"".join(lines), count_drop=False):
            for line in lines:
                self.writer.write(line)


def _drop_note(count: int, reason: str) -> bytes:
    """The line launcher.log gets where lines are missing (written when writing works again)."""
    return arrival_prefix(time.time()) + f"hvdlog run: {count} lines of this console could not be written here ({reason})\n".encode()


def _streams(spec: dict[str, Any]) -> dict[int, Stream]:
    """One stream per pipe, both appending to the one launcher.log."""
    secrets, writer_module = _TEE._load("secrets"), _TEE._load("writer")
    redactor = secrets.Redactor(secrets.secret_values()) if spec.get("redact", True) else None
    writer = writer_module.RankFileWriter()
    writer.console_fd = 2
    writer.fallback_console = False  # the console already has these bytes
    writer.drop_note = _drop_note
    writer.open(spec["log"], 0, 0)
    skip = re.compile(spec["skip"].encode()) if spec.get("skip") else None
    glued = re.compile(spec["glued"].encode()) if spec.get("glued") else None
    return {pipe: Stream(console, writer, redactor, skip, glued) for pipe, console in spec["pipes"]}


def _said_at_end(streams: list[Stream]) -> None:
    """Lines still dropped when the launcher ended (the disk never came back): said once."""
    writer = streams[0].writer if streams else None
    if writer is not None and writer.dropped:
        message = f"hvdlog run: {writer.dropped} lines of the launcher's console are missing from {writer.path} ({writer.drop_reason})\n"
        with contextlib.suppress(OSError):
            os.write(2, message.encode())
    if writer is not None:
        writer.close()


def main(spec: dict[str, Any]) -> int:
    """Tee until EOF on every pipe."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    streams = _streams(spec)
    every = list(streams.values())
    with contextlib.suppress(OSError):  # hvdlog run starts the launcher only now (if it is still there)
        os.write(spec["ready"], b"r")
        os.close(spec["ready"])
    poller = select.poll()
    for pipe in streams:
        poller.register(pipe, select.POLLIN)
    while streams:
        for pipe, _ in poller.poll():
            try:
                chunk = os.read(pipe, _TEE.READ_SIZE)
            except OSError:
                chunk = b""
            if chunk:
                streams[pipe].feed(chunk, time.time())
                continue
            streams.pop(pipe).flush(time.time())  # EOF: every writer of this pipe is gone
            poller.unregister(pipe)
    _said_at_end(every)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))

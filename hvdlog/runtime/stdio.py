"""Python's own ``sys.stdout``/``sys.stderr`` while the capture is on: no reentrancy error, no torn line.

A print blocks while the capture pipe is full (the capture process is stopped or slow, for at
most about one guard poll). Python's standard stream holds a ``BufferedWriter`` lock through
that blocked write, so a signal handler that prints meanwhile dies with ``RuntimeError:
reentrant call inside <_io.BufferedWriter name='<stdout>'>`` and kills the rank (issue #23).
``python -u`` avoids the lock with a bare ``FileIO``, but a write a signal interrupts half way
returns short, and ``TextIOWrapper`` drops the rest.

:class:`WholeWriter` replaces that layer while the capture is on. It writes every byte (a loop of
``os.write``), and a write from a signal handler that arrives while the same thread is inside a
write is queued and written right after it, so lines of the handler and of the code it
interrupted never mix. Only the standard streams are replaced (what the user or a framework put
in ``sys.stdout`` is theirs), and :func:`restore` puts them back.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import weakref
from dataclasses import dataclass

__all__ = ["Replaced", "WholeWriter", "install", "restore"]

_LIVE: weakref.WeakSet[WholeWriter] = weakref.WeakSet()


class WholeWriter(io.RawIOBase):
    """A raw writer on one fd that writes every byte and queues what a signal handler writes
    while its own thread is inside a write."""

    def __init__(self, fd: int, name: str) -> None:
        super().__init__()
        self._fd = fd
        self.name = name
        self._lock = threading.RLock()
        self._depth = 0
        self._queued: list[bytes] = []
        _LIVE.add(self)

    def fileno(self) -> int:
        return self._fd

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        try:
            return os.isatty(self._fd)
        except OSError:
            return False

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]  # RawIOBase's stub takes Buffer
        """Write all of ``data``; inside this thread's own write (a signal handler), queue it."""
        chunk = bytes(data)
        with self._lock:
            if self._depth:
                self._queued.append(chunk)
                return len(chunk)
            self._depth += 1
            try:
                self._write_all(chunk)
                self._write_queued()
            finally:
                self._depth -= 1
            self._write_queued()  # a handler that ran between the last look and the decrement
        return len(chunk)

    def _write_queued(self) -> None:
        while self._queued:
            self._write_all(self._queued.pop(0))

    def _write_all(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while view:
            view = view[os.write(self._fd, view) :]

    def _after_fork(self) -> None:
        """The child has one thread: a lock another thread held at the fork is free there."""
        self._lock = threading.RLock()
        self._depth = 0


def _reset_after_fork() -> None:
    for writer in list(_LIVE):
        writer._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@dataclass
class Replaced:
    """The standard streams :func:`install` replaced, to put back."""

    stdout: object | None = None
    stderr: object | None = None


def install() -> Replaced:
    """Give the standard ``sys.stdout``/``sys.stderr`` (those on fds 1 and 2) a :class:`WholeWriter`,
    line-buffered, with the same encoding and error handling. Returns what it replaced."""
    replaced = Replaced()
    for attribute, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, attribute)
        wrapper = _rewrapped(stream, fd, attribute)
        if wrapper is not None:
            setattr(replaced, attribute, stream)
            setattr(sys, attribute, wrapper)
    return replaced


def _rewrapped(stream: object, fd: int, name: str) -> io.TextIOWrapper | None:
    """A line-buffered text stream over a WholeWriter for a standard stream on ``fd``, else None."""
    if stream is not getattr(sys, f"__{name}__", None) or not isinstance(stream, io.TextIOWrapper):
        return None
    try:
        if stream.fileno() != fd:
            return None
        stream.flush()
        return io.TextIOWrapper(
            WholeWriter(fd, f"<{name}>"), encoding=stream.encoding, errors=stream.errors,
            line_buffering=True, write_through=stream.write_through,
        )
    except (OSError, ValueError):
        return None


def restore(replaced: Replaced) -> None:
    """Put back the streams :func:`install` replaced, where nobody has replaced them since."""
    for attribute in ("stdout", "stderr"):
        original = getattr(replaced, attribute)
        current = getattr(sys, attribute)
        if original is None or not isinstance(current, io.TextIOWrapper) or not isinstance(current.buffer, WholeWriter):
            continue
        with contextlib.suppress(OSError, ValueError):
            current.flush()
        setattr(sys, attribute, original)

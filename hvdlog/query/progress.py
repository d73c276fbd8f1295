"""A progress line on stderr while a command reads large input: bytes read / total, files.

Only on a terminal and only when the input is large (:data:`MIN_BYTES`, or
``HVDLOG_PROGRESS_BYTES``): into a pipe or a file nothing is written, so scripts and logs
stay clean. The line is redrawn in place (``\\r``) at most every :data:`EVERY_S` seconds
and erased when the read ends, before the results print, and before any warning
(:meth:`ReadProgress.warn`), so a warning never lands on the end of the line.
Kept apart from the query layer so ``hvdlog parse`` starts without it. Users: grep and the
analyses (:class:`hvdlog.query.progress_files.ProgressFileSource`), stragglers' step reader
(:meth:`ReadProgress.advance` per file or per worker's share), parse (per file, and within
a file through :meth:`ReadProgress.show`).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Final, TextIO

from hvdlog.types import Warn

__all__ = ["MIN_BYTES", "ReadProgress"]

#: Inputs smaller than this read too fast for a progress line to help.
MIN_BYTES: Final = 64 * 1024 * 1024
EVERY_S: Final = 0.25


class ReadProgress:
    """``hvdlog: reading 1.2 GB of 3.4 GB, 12 of 40 files`` on a terminal's stderr."""

    def __init__(self, total_bytes: int, files: int, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.files = total_bytes, files
        self.done_bytes = self.done_files = 0
        self._shown = 0.0
        threshold = int(os.environ.get("HVDLOG_PROGRESS_BYTES") or MIN_BYTES)
        self.active = self.stream.isatty() and total_bytes >= threshold

    def file_done(self, size: int) -> None:
        """One more file read; redraw when due."""
        self.advance(size, 1)

    def advance(self, size: int, files: int) -> None:
        """``files`` more files, ``size`` bytes in all, read (a worker's share at once); redraw when due."""
        self.done_bytes += size
        self.done_files += files
        self.show()

    def show(self, reading: int = 0) -> None:
        """Redraw when due, counting ``reading`` bytes already read of the file being read."""
        if self.active and time.monotonic() - self._shown >= EVERY_S:
            self._shown = time.monotonic()
            done = min(self.done_bytes + reading, self.total)
            self.stream.write(f"\rhvdlog: reading {_size(done)} of {_size(self.total)}, {self.done_files} of {self.files} files\x1b[K")
            self.stream.flush()

    def warn(self, message: str, say: Warn) -> None:
        """``say(message)`` on a line of its own: the progress line is erased first (and redrawn when due)."""
        self.end()
        say(message)

    def end(self) -> None:
        """Erase the line (the results follow on stdout)."""
        if self.active and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = 0.0


def _size(value: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value} B"

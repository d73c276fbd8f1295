"""A progress line on stderr while a command reads large input: bytes read / total, files.

Only on a terminal and only when the input is large (:data:`MIN_BYTES`, or
``HVDLOG_PROGRESS_BYTES``): into a pipe or a file nothing is written, so scripts and logs
stay clean. The line is redrawn in place (``\\r``) at most every :data:`EVERY_S` seconds
and erased when the read ends, before the results print.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, TextIO

from hvdlog.documents import Document
from hvdlog.query.files import FileSource, discover
from hvdlog.query.spec import Filter
from hvdlog.types import Warn

__all__ = ["MIN_BYTES", "ReadProgress", "WatchedFileSource"]

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
        self.done_bytes += size
        self.done_files += 1
        if self.active and time.monotonic() - self._shown >= EVERY_S:
            self._shown = time.monotonic()
            self.stream.write(f"\rhvdlog: reading {_size(self.done_bytes)} of {_size(self.total)}, {self.done_files} of {self.files} files\x1b[K")
            self.stream.flush()

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


class WatchedFileSource(FileSource):
    """A :class:`FileSource` that reports each file it finished reading to a :class:`ReadProgress`."""

    def __init__(self, paths: Sequence[str | Path], *, timezone: str | None = None, warn: Warn) -> None:
        super().__init__(paths, timezone=timezone, warn=warn)
        self.progress: ReadProgress | None = None

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """The parent's search, with a progress line over the files it reads."""
        files = discover(self.paths, lambda _message: None)
        self.progress = ReadProgress(sum(_stat_size(path) for path in files), len(files))
        try:
            for doc in super().search(spec, last):
                self.progress.end()  # every file is read before the first match comes out
                yield doc
        finally:
            self.progress.end()

    def _read(self, path: Path, spec: Filter) -> Iterator[Document]:
        yield from super()._read(path, spec)
        if self.progress is not None:
            self.progress.file_done(_stat_size(path))

    def _done(self, files: Sequence[Path]) -> None:
        """A worker process read these files (``-j``): counted when its share comes back."""
        for path in files:
            if self.progress is not None:
                self.progress.file_done(_stat_size(path))


def _stat_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

"""The file source the commands read through: a :class:`~hvdlog.query.files.FileSource` that
draws a progress line (:mod:`hvdlog.query.progress`) while it reads, and keeps warnings off it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from hvdlog.documents import Document
from hvdlog.query.files import FileSource, discover
from hvdlog.query.progress import ReadProgress
from hvdlog.query.spec import Filter
from hvdlog.types import Warn

__all__ = ["ProgressFileSource"]


class ProgressFileSource(FileSource):
    """A :class:`FileSource` that reports each file it finished reading to a :class:`ReadProgress`."""

    def __init__(self, paths: Sequence[str | Path], *, timezone: str | None = None, warn: Warn) -> None:
        super().__init__(paths, timezone=timezone, warn=self._warn)
        self.progress: ReadProgress | None = None
        self._say = warn

    def _warn(self, message: str) -> None:
        if self.progress is not None:
            self.progress.warn(message, self._say)
        else:
            self._say(message)

    def watch(self, files: Sequence[Path]) -> ReadProgress:
        """A new progress line over ``files`` (the step reader's files), kept as :attr:`progress`."""
        self.progress = ReadProgress(sum(_stat_size(path) for path in files), len(files))
        return self.progress

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """The parent's search, with a progress line over the files it reads."""
        progress = self.watch(discover(self.paths, lambda _message: None))
        try:
            for doc in super().search(spec, last):
                progress.end()  # every file is read before the first match comes out
                yield doc
        finally:
            progress.end()

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

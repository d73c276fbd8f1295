"""Per-rank file writer: one ``os.write`` per line, size-based rotation by rename.

A line reaches the kernel when it is logged (no user-space buffer), so a rank killed
with SIGKILL loses nothing it logged. Rotation renames ``f`` -> ``f.1`` -> ``f.2``...
and reopens ``f``; Filebeat's filestream follows renamed files by inode.

One writer object lives for the whole process and is re-pointed by ``open()``: loggers
that structlog cached keep working across ``configure()`` calls. While closed, lines go
to stderr instead of being lost.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["RankFileWriter"]

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_STDERR = 2


class RankFileWriter:
    """Appends whole lines to a file; structlog calls it as the wrapped logger."""

    __slots__ = ("_lock", "_retired", "_size", "backups", "fd", "max_bytes", "path")

    def __init__(self, path: str | Path | None = None, max_bytes: int = 0, backups: int = 5) -> None:
        self._lock = threading.Lock()
        self._retired = -1
        self._size = 0
        self.fd = -1
        self.path: Path | None = None
        self.max_bytes = 0
        self.backups = 0
        if path is not None:
            self.open(path, max_bytes, backups)

    def open(self, path: str | Path, max_bytes: int = 0, backups: int = 5) -> None:
        """(Re)point the writer at ``path``, creating its directory."""
        if max_bytes < 0 or backups < 0:
            raise ValueError("max_bytes and backups must be zero or positive")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        new_fd = os.open(path, _FLAGS, 0o644)
        with self._lock:
            old_fd, self.fd = self.fd, new_fd
            self.path, self.max_bytes, self.backups = path, max_bytes, backups
            self._size = os.fstat(new_fd).st_size
        self._retire(old_fd)

    def write(self, line: bytes) -> None:
        """Write one rendered line (already newline-terminated)."""
        fd = self.fd
        os.write(fd if fd >= 0 else _STDERR, line)
        if self.max_bytes:
            self._size += len(line)
            if self._size >= self.max_bytes:
                self._rotate()

    # structlog calls the method named after the level on the wrapped logger.
    msg = debug = info = warning = warn = error = critical = fatal = exception = log = write

    def _retire(self, fd: int) -> None:
        """A thread may still be inside os.write on ``fd``: close it one swap later."""
        if self._retired >= 0:
            os.close(self._retired)
        self._retired = fd

    def _rotate(self) -> None:
        with self._lock:
            if self._size < self.max_bytes or self.path is None:  # another thread rotated first
                return
            path = self.path
            if self.backups:
                for index in range(self.backups - 1, 0, -1):
                    older = path.with_name(f"{path.name}.{index}")
                    if older.exists():
                        older.rename(path.with_name(f"{path.name}.{index + 1}"))
                path.rename(path.with_name(f"{path.name}.1"))
            else:
                path.unlink()
            old_fd, self.fd = self.fd, os.open(path, _FLAGS, 0o644)
            self._size = 0
            self._retire(old_fd)

    def close(self) -> None:
        """Close the file; later lines go to stderr until the next ``open()``."""
        with self._lock:
            old_fd, self.fd, self.path, self.max_bytes = self.fd, -1, None, 0
            self._retire(old_fd)
            self._retire(-1)

"""Per-rank file writer: whole lines or nothing, never an exception to the caller.

A line reaches the kernel when it is logged (no user-space buffer), so a rank killed
with SIGKILL loses nothing it logged. Rotation renames ``f`` -> ``f.1`` -> ``f.2``...
between two writes, so it never splits a line; Filebeat's filestream follows renamed
files by inode.

Faults (disk full, read-only or vanished directory, quota, I/O error) never reach the
caller: a short write is truncated back so no fragment stays in the file, the line is
counted as dropped, the console is told once, and the next write that works first
writes a ``log_dropped`` note (``drop_note``) with the count. Files are opened with
``O_NOFOLLOW`` and ``O_NONBLOCK`` and must be regular files (a planted FIFO would block
the open, or every write, for ever); they are created 0640 (directories 0750), the umask
applying on top. A file deleted while open (its job folder removed) is noticed within a
second (``st_nlink`` 0): the folder and file are made again, and what was written to the
deleted file since it was last seen in place is counted as dropped.

One writer object lives for the whole process and is re-pointed by ``open()``: loggers
that structlog cached keep working across ``configure()`` calls. While closed, or when
the file cannot be opened, lines go to the console's stderr instead of being lost.

Stdlib only: the capture process loads this file by path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "RankFileWriter", "foreign_owner", "make_private_dirs", "not_regular"]

_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
)
FILE_MODE = 0o640
DIR_MODE = 0o750
_STDERR = 2
_REOPEN_EVERY = 1.0
_CHECK_EVERY = 1.0  # seconds between two looks at whether the open file was deleted
_monotonic = time.monotonic
_NO_LIMIT = 1 << 62  # "room" of a file that never rotates
_os_write = os.write  # one global lookup on the hot path


def make_private_dirs(path: Path) -> None:
    """``mkdir -p`` with mode 0750 for every directory we create (the umask still applies;
    ``Path.mkdir(parents=True)`` would make the parents 0777 & ~umask)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)


def foreign_owner(root: Path, directory: Path) -> str | None:
    """Why ``root`` (or a directory between it and ``directory``) must not be used: it
    belongs to another non-root user, who could plant links or read our files. None if fine."""
    me = os.geteuid() if hasattr(os, "geteuid") else 0
    candidates = [root]
    with contextlib.suppress(ValueError):
        candidates += [root / part for part in directory.relative_to(root).parts]
    for index, candidate in enumerate(candidates):
        try:
            info = os.stat(candidate) if index == 0 else os.lstat(candidate)
        except OSError:
            break  # not there yet: we will create it (and own it)
        if info.st_uid not in (0, me):
            return f"{candidate} belongs to another user (uid {info.st_uid})"
    return None


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "OSError")


def not_regular(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file (``a FIFO``), else None."""
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _newlines_since(fd: int, offset: int) -> int | None:
    """Lines written to ``fd`` after ``offset`` (read back through ``/proc``: the fd is write-only); None if unknown."""
    try:
        source = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        count, position = 0, offset
        while chunk := os.pread(source, 1 << 20, position):
            count += chunk.count(b"\n")
            position += len(chunk)
        return count
    except OSError:
        return None
    finally:
        os.close(source)


_WRITERS: weakref.WeakSet[RankFileWriter] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A fork (DataLoader workers) while another thread held a writer's lock must not leave
    the child's writer locked forever."""
    for writer in list(_WRITERS):
        writer._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RankFileWriter:
    """Appends whole lines to a file; structlog calls it as the wrapped logger.

    Attributes:
        console_fd: where warnings (and lines, when no file is open) go: the real console.
        fallback_console: while no file is open, write lines to ``console_fd`` (else drop them).
        drop_note: renders the ``log_dropped`` line written before the first line that
            gets through after drops, given (count, reason); None writes no note.
        dropped: lines dropped since the last note.
        last_resumed: (count, reason) of the last episode of drops that ended.
    """

    __slots__ = (
        "__weakref__", "_checked_size", "_lock", "_next_check", "_next_open", "_refused", "_retired", "_room", "_rotating", "_warned",
        "backups", "console_fd", "drop_note", "drop_reason", "dropped", "fallback_console", "fd", "last_resumed", "max_bytes", "path", "total_dropped",
    )

    def __init__(self, path: str | Path | None = None, max_bytes: int = 0, backups: int = 5) -> None:
        # Re-entrant: a signal handler (our SIGTERM hook) may log while this thread is mid-write.
        self._lock = threading.RLock()
        _WRITERS.add(self)
        self._retired = -1
        self._room = _NO_LIMIT  # bytes the file may still take before rotation
        self._next_open = 0.0
        self._next_check = 0.0
        self._checked_size = 0
        self._rotating = False
        self._refused = False
        self._warned = False
        self.fd = -1
        self.path: Path | None = None
        self.max_bytes = 0
        self.backups = 0
        self.console_fd = _STDERR
        self.fallback_console = True
        self.drop_note: Callable[[int, str], bytes] | None = None
        self.dropped = 0
        self.total_dropped = 0
        self.drop_reason = ""
        self.last_resumed: tuple[int, str] | None = None
        if path is not None:
            self.open(path, max_bytes, backups)

    # -- setup ----------------------------------------------------------------------------
    def open(self, path: str | Path, max_bytes: int = 0, backups: int = 5, refuse: str | None = None) -> bool:
        """(Re)point the writer at ``path``; False (and lines to stderr) when it cannot be opened.

        ``refuse`` is a reason not to use ``path`` at all (e.g. a foreign owner): one
        warning, then stderr for good.
        """
        if max_bytes < 0 or backups < 0:
            raise ValueError("max_bytes and backups must be zero or positive")
        path = Path(path)
        with self._lock:
            old_fd, self.fd = self.fd, -1
            self.path, self.max_bytes, self.backups = path, max_bytes, backups
            self._refused, self._warned, self._next_open = refuse is not None, False, 0.0
            self._retire(old_fd)
            if refuse is not None:
                self._warn(f"hvdlog: not writing {path}: {refuse}; writing lines to stderr instead")
                return False
            return self._try_open()

    def _try_open(self) -> bool:
        """Open ``self.path`` (lock held); on failure warn once and retry later."""
        fd = self._open_file()
        if fd < 0:
            return False
        self.fd = fd
        return True

    def _open_file(self) -> int:
        """A new fd on ``self.path``, its room measured (lock held); -1 (warned once) when it cannot be opened.

        ``O_NONBLOCK``: a FIFO planted at the path fails at once (``ENXIO``) instead of
        blocking until a reader comes; it, or a device, is refused for good.
        """
        assert self.path is not None
        self._next_open = time.monotonic() + _REOPEN_EVERY
        instead = "writing lines to stderr" if self.fallback_console else "dropping lines"
        try:
            make_private_dirs(self.path.parent)
            fd = os.open(self.path, _FLAGS, FILE_MODE)
        except OSError as exc:
            self.drop_reason = _errno_name(exc)
            if exc.errno == errno.ELOOP:  # a symlink planted where our file goes: never follow it
                self._refused = True
                self._warn(f"hvdlog: {self.path} is a symbolic link: refusing to follow it; {instead} instead")
            elif exc.errno == errno.ENXIO:  # a FIFO nobody reads (or a device without its hardware)
                self._refuse_kind("not a regular file", instead)
            elif not self._warned:  # once per episode, not at every retry
                self._warn(f"hvdlog: cannot open {self.path}: {exc.strerror or exc}; {instead} until it can be opened")
            return -1
        try:
            info = os.fstat(fd)
            kind = not_regular(info.st_mode)
            if kind is None:
                os.set_blocking(fd, True)
        except OSError:
            kind, info = None, None
        if kind is not None:
            os.close(fd)
            self._refuse_kind(kind, instead)
            return -1
        size = info.st_size if info is not None else 0
        self._room = self.max_bytes - size if self.max_bytes else _NO_LIMIT
        self._checked_size, self._next_check = size, _monotonic() + _CHECK_EVERY
        if self._warned:
            self._say(f"hvdlog: writing {self.path} again\n")
            self._warned = False
        return fd

    def _refuse_kind(self, kind: str, instead: str) -> None:
        self._refused = True
        self.drop_reason = "not_regular"
        self._warn(f"hvdlog: {self.path} is {kind}, not a regular file: refusing it; {instead} instead")

    # -- the hot path ---------------------------------------------------------------------
    def write(self, line: bytes, count_drop: bool = True, look_first: bool = False) -> bool:
        """Write one rendered line (newline-terminated) whole, or drop it; never raises.

        True when the line reached the file (or the stderr fallback). ``count_drop=False``
        is for a caller that keeps the line and tries again later (not a loss).
        ``look_first`` checks that the file is still in place before this line, not only once a
        second: for a rare line that must not go to a deleted file (a report of lost lines).
        """
        try:
            with self._lock:
                if look_first or _monotonic() >= self._next_check:
                    self._check_in_place()
                fd = self.fd
                if fd < 0 or self.dropped:
                    return self._write_locked(line, count_drop)
                # The common case, inlined (_write_whole + rotation check): one write, no extra frames.
                try:
                    written = _os_write(fd, line)
                except OSError as exc:
                    self._failed(exc)
                    return self._drop(line) if count_drop else False
                if written != len(line):
                    self._take_back(written)
                    return self._drop(line) if count_drop else False
                self._room -= written
                if self._room <= 0:  # only with a size limit
                    self._rotate()
                return True
        except Exception as exc:  # noqa: BLE001 - logging must never raise into training code
            self.drop_reason = type(exc).__name__
            self.dropped += 1
            self.total_dropped += 1
            return False

    def write_lines(self, lines: list[bytes]) -> bool:
        """Write whole lines in as few writes as rotation allows (rotation falls between lines)."""
        ok = True
        batch: list[bytes] = []
        room = self._room  # _NO_LIMIT without a size limit
        for line in lines:
            batch.append(line)
            room -= len(line)
            if room <= 0:
                ok = self.write(b"".join(batch)) and ok
                batch, room = [], self._room
        if batch:
            ok = self.write(b"".join(batch)) and ok
        return ok

    def _write_locked(self, line: bytes, count_drop: bool = True) -> bool:
        if self.fd < 0 and not self._reopen():
            return self._write_fallback(line)
        if self.dropped and self.drop_note is not None:
            note = self._note()
            if note:
                if not self._write_whole(note):
                    return self._drop(line) if count_drop else False
                self._resumed()
        if not self._write_whole(line):
            return self._drop(line) if count_drop else False
        if self.dropped:
            self._resumed()
        if self._room <= 0:  # only with a size limit
            self._rotate()
        return True

    def _check_in_place(self) -> None:
        """Once a second (lock held): was the open file deleted (``rm -r`` of the job folder)?

        Writes to a deleted file succeed and reach nobody. Then the folder and file are made
        again, and the lines written since the file was last seen in place are counted as
        dropped (reason ``deleted``; some may have been written before the deletion).
        """
        self._next_check = _monotonic() + _CHECK_EVERY
        fd = self.fd
        if fd < 0:
            return
        try:
            info = os.fstat(fd)
        except OSError:
            return
        if info.st_nlink:
            self._checked_size = info.st_size
            return
        since = _newlines_since(fd, self._checked_size)
        self._say(
            f"hvdlog: {self.path} was deleted while in use; writing a new one "
            f"({'an unknown number of' if since is None else since} lines written since it was last seen may be lost)\n"
        )
        self.fd = -1
        self._retire(fd)
        self.drop_reason = "deleted"
        self.dropped += since or 0
        self.total_dropped += since or 0
        self._try_open()

    def _reopen(self) -> bool:
        """Try to open the file again, at most once a second (lock held)."""
        if self.path is None or self._refused or time.monotonic() < self._next_open:
            return False
        return self._try_open()

    # structlog calls the method named after the level on the wrapped logger.
    msg = debug = info = warning = warn = error = critical = fatal = exception = log = write

    def _write_whole(self, data: bytes) -> bool:
        """All of ``data`` or none of it: a short write is truncated back (lock held)."""
        try:
            written = _os_write(self.fd, data)
        except OSError as exc:
            self._failed(exc)
            return False
        if written == len(data):
            self._room -= written
            return True
        self._take_back(written)
        return False

    def _take_back(self, written: int) -> None:
        """After a short write (disk full mid-line): take the fragment back out of the file."""
        try:
            end = os.fstat(self.fd).st_size
            os.ftruncate(self.fd, max(0, end - written))
        except OSError:
            pass
        self._failed(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))

    def _failed(self, exc: OSError) -> None:
        self.drop_reason = _errno_name(exc)
        if not self._warned:
            self._warn(
                f"hvdlog: cannot write {self.path}: {exc.strerror or exc}; dropping lines until it can "
                "(their count is logged when writing works again)"
            )
        if exc.errno in (errno.EBADF, errno.ESTALE, errno.ENOENT):  # the file went away: reopen
            old_fd, self.fd = self.fd, -1
            self._retire(old_fd)

    def _drop(self, data: bytes) -> bool:
        lines = data.count(b"\n") or 1
        self.dropped += lines
        self.total_dropped += lines
        return False

    def _note(self) -> bytes:
        try:
            return self.drop_note(self.dropped, self.drop_reason) if self.drop_note else b""
        except Exception:  # noqa: BLE001
            return b""

    def _resumed(self) -> None:
        self._say(f"hvdlog: writing {self.path} again; {self.dropped} lines were dropped ({self.drop_reason})\n")
        self.last_resumed = (self.dropped, self.drop_reason)
        self.dropped = 0
        self._warned = False

    def _write_fallback(self, line: bytes) -> bool:
        """No file open: the console's stderr (or count the line as dropped)."""
        if not self.fallback_console:
            return self._drop(line)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self.console_fd, view) :]
            return True
        except OSError:
            return self._drop(line)

    def _warn(self, message: str) -> None:
        """One warning per episode on the console (lock held)."""
        self._warned = True
        self._say(message + "\n")

    def _say(self, message: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self.console_fd, message.encode("utf-8", "replace"))

    def _retire(self, fd: int) -> None:
        """Close ``fd`` one swap later (cheap insurance for a write racing a swap)."""
        if self._retired >= 0:
            with contextlib.suppress(OSError):
                os.close(self._retired)
        self._retired = fd

    def _rotate(self) -> None:
        """Rename the full file away and start a new one (lock held, between two lines).

        A signal handler that logs meanwhile (the lock is re-entrant) writes to the file
        being renamed, which stays open until the new one is: it never rotates a second
        time, and its line never falls back to the console.
        """
        path = self.path
        if path is None or self._rotating:
            return
        self._rotating = True
        try:
            self._rotate_now(path)
        finally:
            self._rotating = False

    def _rotate_now(self, path: Path) -> None:
        try:
            if self.backups:
                for index in range(self.backups - 1, 0, -1):
                    older = path.with_name(f"{path.name}.{index}")
                    if older.exists():
                        older.rename(path.with_name(f"{path.name}.{index + 1}"))
                path.rename(path.with_name(f"{path.name}.1"))
            else:
                path.unlink()
        except OSError as exc:
            # Cannot rotate (e.g. read-only now): keep appending; try again after the next line.
            if not self._warned:
                self._warn(f"hvdlog: cannot rotate {path}: {exc.strerror or exc}; still appending")
            return
        old_fd = self.fd
        self.fd = self._open_file()  # measures the new file's room; -1: stderr until it opens
        self._retire(old_fd)

    def close(self) -> None:
        """Close the file; later lines go to stderr until the next ``open()``."""
        with self._lock:
            old_fd, self.fd, self.path, self.max_bytes = self.fd, -1, None, 0
            self.console_fd = _STDERR
            self._retire(old_fd)
            self._retire(-1)

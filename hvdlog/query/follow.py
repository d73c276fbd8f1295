"""``grep -f`` over files: new lines of every file, keyed by file identity, not by path.

A path is not a file: rotation renames ``rank-1.jsonl`` to ``rank-1.jsonl.1`` and creates a
new ``rank-1.jsonl``; ``logrotate copytruncate`` copies the file and truncates it in place.
So, as Filebeat does, each file is known by its identity (device + inode) and read through
a handle kept open, which survives a rename and a delete:

- a renamed file is read on from its offset (at its new path, or through the handle when the
  new path is outside what is followed);
- a file that appears is read from 0, unless its first bytes are those of a file already
  followed (a copy, as ``copytruncate`` makes): then it is read on from that file's offset.
  A copy is made empty, then filled: a new file whose bytes so far begin a followed file's
  is left undecided for a few polls (it may still become that file's copy), and a file
  truncated in place keeps its former first bytes and offset to recognise its copy by;
- a file truncated or rewritten in place (shorter than the offset, or other first bytes) is
  read anew from 0;
- a deleted or renamed-away file is read to its end, then closed once it stopped growing.

Only whole lines are taken: the bytes after a file's last newline wait for the rest. The
line bound of the one-shot read applies (:mod:`hvdlog.parse.bounded`): growth is read in
blocks, a line longer than ``HVDLOG_MAX_LINE_BYTES`` keeps its first and last bytes around a
mark, and an unfinished one past the bound is held only as those ends while it grows.

A file named directly (``grep -f rank-1.jsonl``) has a *companion*, ``rank-1.jsonl.1``, the
name both rotation schemes give the newest rotation: it is looked at only to recognise the
followed file renamed or copied there, never followed for its own sake.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hvdlog.parse.bounded import MAX_LINE_BYTES, TRUNCATED_TAG, CutCounter, LongLine, counted_cut

__all__ = ["Followed", "Follower"]

#: Bytes of a file's start that identify its content (to recognise a copy).
_HEAD: Final = 1024
#: A head shorter than this says too little to recognise a copy by.
_MIN_HEAD: Final = 64
#: Polls a vanished file is kept open after it last grew (a write may still be on its way).
_LINGER: Final = 2
#: Polls a new file whose bytes so far begin a followed file's waits before it is taken as new
#: (a copy being written; ``shutil.copyfile`` and logrotate create it empty, then fill it).
_UNDECIDED_POLLS: Final = 10

#: Bytes read from a file at a time (more than the line bound: a block without a newline is a long line).
_BLOCK: Final = max(8 << 20, MAX_LINE_BYTES + 1)

#: What identifies a followed file's content: (its key, its first bytes, the offset read to).
Known = list[tuple[tuple[int, int], bytes, int]]


@dataclass
class Followed:
    """One file being followed."""

    fd: int
    path: Path
    offset: int
    head: bytes
    idle: int = 0  # polls since it last grew while no followed path showed it
    copy_of: tuple[int, int] | None = None  # the followed file this one was recognised as a copy of
    #: (first bytes, offset) before it was last truncated in place: its copy may appear later
    former: tuple[bytes, int] | None = None
    #: An unfinished line past the line bound, read up to ``offset`` (only its ends are held).
    long: LongLine | None = None


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return (stat.st_dev, stat.st_ino)


def _pread(fd: int, size: int, offset: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.pread(fd, min(size, 1 << 24), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class Follower:
    """The files under some paths, and what each got since the last :meth:`poll`."""

    def __init__(
        self, discover: Callable[[], Iterable[Path]], warn: Callable[[str], None], companions: Callable[[], Iterable[Path]] = lambda: ()
    ) -> None:
        self._discover = discover
        self._companions = companions
        self._warn = warn
        self._files: dict[tuple[int, int], Followed] = {}
        self._warned: set[Path] = set()
        self._undecided: dict[tuple[int, int], int] = {}  # new files that may become a copy: polls waited
        #: Lines cut to the line bound so far.
        self.cuts = CutCounter()

    def start(self) -> None:
        """Know every file there now, positioned after its last whole line (only what comes later is new)."""
        for path in self._discover():
            followed = self._open(path, [])
            if followed is not None:
                followed.offset = _after_last_line(followed.fd)

    def poll(self) -> list[tuple[Path, list[bytes]]]:
        """The whole lines each file got since the last poll, with the path to parse them as."""
        before: Known = [(key, item.head, item.offset) for key, item in self._files.items()]
        before += [(key, *item.former) for key, item in self._files.items() if item.former is not None]
        seen: set[tuple[int, int]] = set()
        for path in self._discover():
            key = self._visit(path, before)
            if key is not None:
                seen.add(key)
        for path in self._companions():
            key = self._visit(path, before, companion=True)
            if key is not None:
                seen.add(key)
        found = []
        cut_before = self.cuts.lines
        for key, item in sorted(self._files.items(), key=lambda pair: pair[1].copy_of is None):  # copies first
            lines = self._read(item)
            if lines:
                found.append((item.path, lines))
            self._skip_copied(item)
            self._linger(key, item, bool(lines), key in seen)
        if self.cuts.lines > cut_before:
            self._warn(f"{self.cuts.lines - cut_before} line(s) longer than {MAX_LINE_BYTES} bytes were cut as they were read "
                       f"(their first and last bytes are kept, tagged {TRUNCATED_TAG})")
        return found

    def _skip_copied(self, copy: Followed) -> None:
        """What was read from a copy is not read again from its original, while the original
        still holds the same content (logrotate copies first, then truncates)."""
        original = self._files.get(copy.copy_of) if copy.copy_of is not None else None
        if original is not None and copy.head.startswith(original.head) and original.head:
            original.offset = max(original.offset, copy.offset)

    def close(self) -> None:
        for item in self._files.values():
            with contextlib.suppress(OSError):
                os.close(item.fd)
        self._files.clear()

    def _visit(self, path: Path, before: Known, companion: bool = False) -> tuple[int, int] | None:
        try:
            key = _identity(os.stat(path))
        except OSError:
            return None  # gone between the walk and now: its handle (if known) is read on
        item = self._files.get(key)
        if item is None:
            item = self._open(path, before, only_copies=companion)
            return key if item is not None else None
        item.path = path  # renamed: same file, same offset, its current name
        return key

    def _open(self, path: Path, before: Known, only_copies: bool = False) -> Followed | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            if path not in self._warned and not only_copies:
                self._warned.add(path)
                self._warn(f"{path}: cannot read ({exc.strerror}); skipped")
            return None
        key = _identity(os.fstat(fd))
        if key in self._files:  # replaced between stat and open: the same file as one known
            os.close(fd)
            return None
        head = _pread(fd, _HEAD, 0)
        original, offset = _copy_of(head, before)
        if original is None and self._may_become_copy(key, head, before):
            os.close(fd)
            return None
        self._undecided.pop(key, None)
        if only_copies and original is None:
            os.close(fd)
            return None
        self._files[key] = item = Followed(fd, path, offset, head, copy_of=original)
        return item

    def _may_become_copy(self, key: tuple[int, int], head: bytes, before: Known) -> bool:
        """Whether a new file is left undecided this poll: its bytes so far begin a followed
        file's (a copy being written), and it has not waited :data:`_UNDECIDED_POLLS` yet."""
        if len(head) >= _HEAD or not any(len(old) >= _MIN_HEAD and offset >= len(old) and old.startswith(head) for _, old, offset in before):
            return False
        waited = self._undecided.get(key, 0)
        if waited >= _UNDECIDED_POLLS:
            return False
        self._undecided[key] = waited + 1
        return True

    def _read(self, item: Followed) -> list[bytes]:
        try:
            size = os.fstat(item.fd).st_size
            head = _pread(item.fd, len(item.head), 0) if item.head else b""
            if size < item.offset or head != item.head:
                if item.head:  # its copy may appear after this (logrotate copies, then truncates)
                    item.former = (item.head, item.offset)
                item.offset, item.head, item.long = 0, b"", None  # truncated or rewritten in place: read anew
            if size <= item.offset:
                if len(item.head) < _HEAD and size > len(item.head):
                    item.head = _pread(item.fd, _HEAD, 0)
                return []
            lines = self._read_lines(item, size)
        except OSError as exc:
            self._warn(f"{item.path}: cannot read ({exc.strerror}); skipped")
            return []
        if len(item.head) < _HEAD:
            item.head = _pread(item.fd, _HEAD, 0)
        return lines

    def _read_lines(self, item: Followed, size: int) -> list[bytes]:
        """The whole lines between ``item.offset`` and ``size``, block by block, each within the
        line bound; ``offset`` ends after the last newline, or after a long unfinished line."""
        lines: list[bytes] = []
        while item.offset < size:
            data = os.pread(item.fd, min(_BLOCK, size - item.offset), item.offset)
            if not data:
                break
            if item.long is not None:  # the rest of a long line: only its end is kept
                newline = data.find(b"\n")
                item.long.add(data if newline < 0 else data[:newline])
                item.offset += len(data) if newline < 0 else newline + 1
                if newline >= 0:
                    lines.append(item.long.end(self.cuts))
                    item.long = None
                continue
            end = data.rfind(b"\n") + 1
            if end:
                lines.extend(counted_cut(line, self.cuts) for line in data[:end].splitlines())
                item.offset += end
            elif len(data) > MAX_LINE_BYTES:  # an unfinished line already past the bound
                item.long = LongLine(data)
                item.offset += len(data)
            else:
                break  # an unfinished line: it waits for the rest
        return lines

    def _linger(self, key: tuple[int, int], item: Followed, grew: bool, visible: bool) -> None:
        """Close a file no followed path shows any more, once it stopped growing."""
        item.idle = 0 if grew or visible else item.idle + 1
        if item.idle > _LINGER:
            with contextlib.suppress(OSError):
                os.close(item.fd)
            del self._files[key]


def _after_last_line(fd: int) -> int:
    """Where the file's last whole line ends (a partial last line is printed once it is whole)."""
    size = os.fstat(fd).st_size
    tail = _pread(fd, min(size, 1 << 20), max(0, size - (1 << 20)))
    newline = tail.rfind(b"\n")
    if newline < 0:
        return 0 if size <= len(tail) else size
    return size - len(tail) + newline + 1


def _copy_of(head: bytes, known: Known) -> tuple[tuple[int, int] | None, int]:
    """The followed file a new one is a copy of, and where to start reading it (0: not a copy)."""
    for key, old_head, offset in known:
        if len(old_head) >= _MIN_HEAD and head.startswith(old_head) and offset >= len(old_head):
            return key, offset
    return None, 0

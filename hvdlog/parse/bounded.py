"""Lines of a file, none held longer than the document bound: a longer line is cut as it is read.

One line can be any size: ``truncate -s 20G rank-0.jsonl`` makes a 20 GB line of zero bytes
that costs no disk, and reading it whole takes the reader (and every other job of a root
command) down. So a line longer than :data:`MAX_LINE_BYTES` keeps its first bytes and its
last :func:`tail_bytes`, with a mark saying how many bytes were cut between them; the middle
is skipped as it streams by, never held. Keeping both ends keeps an event's meaning: our JSON
events put the level and message first and close with their last keys, so a long message or
stack trace cut in its middle is still the same event (tagged ``_hvdlog_truncated``, with
``hvdlog.truncated.bytes``), not a parse failure.

The bound is the document bound of :mod:`hvdlog.parse.blocks` (1 MiB); ``HVDLOG_MAX_LINE_BYTES``
sets another (tests use a small one, never gigabytes).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from typing import Final, Protocol

import orjson

__all__ = [
    "DOCUMENT_BOUND", "MAX_LINE_BYTES", "TRUNCATED_TAG", "CutCounter", "LongLine", "blocks", "counted_cut", "cut_bytes", "cut_line", "lines", "tail_bytes",
]


class Readable(Protocol):
    """A binary file: a handle of ``open(path, "rb")``, ``sys.stdin.buffer``, ``io.BytesIO``."""

    def readinto(self, buffer: bytearray | memoryview, /) -> int | None: ...

    def fileno(self) -> int: ...


#: blocks.json's ``max_document_bytes`` (a test holds them equal; read here without loading the grammar).
DOCUMENT_BOUND: Final = 1 << 20
#: The tag of a document something was cut from.
TRUNCATED_TAG: Final = "_hvdlog_truncated"


def _bound() -> int:
    text = os.environ.get("HVDLOG_MAX_LINE_BYTES", "")
    try:
        return max(int(text), 256) if text else DOCUMENT_BOUND
    except ValueError:
        return DOCUMENT_BOUND


#: Bytes a line may have before it is cut.
MAX_LINE_BYTES: Final = _bound()
#: Bytes read per block.
_BLOCK: Final = 8 * 1024 * 1024
#: The smallest buffer :func:`blocks` starts with.
_SMALLEST: Final = 1 << 16
#: The mark left in a cut line: printable ASCII without quote or backslash, so it sits inside a
#: JSON string as it is.
_MARK: Final = b"...[hvdlog: %d bytes cut]..."
_MARKED: Final = re.compile(rb"\.\.\.\[hvdlog: (\d+) bytes cut\]\.\.\.")


def tail_bytes(limit: int = MAX_LINE_BYTES) -> int:
    """Bytes of a cut line's end that are kept (its last keys)."""
    return max(limit // 16, 64)


class CutCounter:
    """Lines cut while reading, and their bytes skipped (for the one warning a source prints)."""

    __slots__ = ("bytes", "lines")

    def __init__(self) -> None:
        self.lines = 0
        self.bytes = 0


def _char_start(data: bytes, pos: int) -> int:
    """``pos`` moved back to the start of a UTF-8 character (never splitting one)."""
    while pos > 0 and pos < len(data) and (data[pos] & 0xC0) == 0x80:
        pos -= 1
    return pos


_PARTIAL_ESCAPE: Final = re.compile(rb"\\u[0-9a-fA-F]{0,3}$")


def _joined(head: bytes, tail: bytes, cut: int) -> tuple[bytes, int]:
    """(``head`` + mark + ``tail``, bytes cut): neither end splits a UTF-8 character or a JSON escape."""
    whole = len(head) + len(tail) + cut
    head = head[: _char_start(head, len(head))]
    escape = _PARTIAL_ESCAPE.search(head)
    if escape is not None:
        head = head[: escape.start()]
    if (len(head) - len(head.rstrip(b"\\"))) % 2:
        head = head[:-1]
    start = 0
    while start < len(tail) and (tail[start] & 0xC0) == 0x80:
        start += 1
    if head[:1] == b"{":  # an event: the tail may begin inside an escape (``\\"``); a few bytes later it does not
        start = next((at for at in range(start, start + 8) if _is_json(head, tail[at:], whole)), start)
    tail = tail[start:]
    dropped = whole - len(head) - len(tail)
    return head + _MARK % dropped + tail, dropped


def _is_json(head: bytes, tail: bytes, whole: int) -> bool:
    try:
        orjson.loads(head + _MARK % (whole - len(head) - len(tail)) + tail)
    except orjson.JSONDecodeError:
        return False
    return True


def _cut(line: bytes, limit: int) -> tuple[bytes, int]:
    tail = tail_bytes(limit)
    head = limit - tail
    return _joined(line[:head], line[len(line) - tail :], len(line) - head - tail)


def cut_line(line: bytes, limit: int = MAX_LINE_BYTES) -> bytes:
    """``line`` within the bound: unchanged when it fits, else its first and last bytes around the mark."""
    return line if len(line) <= limit else _cut(line, limit)[0]


def counted_cut(line: bytes, counter: CutCounter, limit: int = MAX_LINE_BYTES) -> bytes:
    """:func:`cut_line`, counting a cut in ``counter``."""
    if len(line) <= limit:
        return line
    cut, dropped = _cut(line, limit)
    counter.lines += 1
    counter.bytes += dropped
    return cut


class LongLine:
    """A line over the bound that arrives in pieces (a followed file growing): only its first
    bytes and its last :func:`tail_bytes` are held, however long it gets."""

    __slots__ = ("head", "keep", "tail", "total")

    def __init__(self, start: bytes, limit: int = MAX_LINE_BYTES) -> None:
        self.keep = tail_bytes(limit)
        self.head = start[: limit - self.keep]
        self.tail = start[max(len(self.head), len(start) - self.keep) :]
        self.total = len(start)

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.tail = (self.tail + data[-self.keep :])[-self.keep :]

    def end(self, counter: CutCounter) -> bytes:
        """The line, cut around the mark (counted in ``counter``)."""
        line, dropped = _joined(self.head, self.tail, self.total - len(self.head) - len(self.tail))
        counter.lines += 1
        counter.bytes += dropped
        return line


def cut_bytes(line: bytes | str) -> int | None:
    """The bytes cut from a line this module cut (None for a line it did not cut)."""
    data = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    found = _MARKED.search(data)
    return int(found[1]) if found is not None else None


def _fitted(handle: Readable) -> int:
    """:data:`_BLOCK`, or less for a smaller file: zeroing 8 MB for each of a thousand rank files of
    300 kB costs more than reading them (a file that grows meanwhile is read in more blocks)."""
    try:
        total = os.fstat(handle.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        return _BLOCK
    return min(_BLOCK, max(total + 1, _SMALLEST))


def _skip_long(handle: Readable, buffer: bytearray, limit: int, counter: CutCounter | None) -> bytes:
    """The long line that fills ``buffer`` (no newline in it), cut: its middle is read on and
    dropped up to its newline; returns the cut line plus what followed its newline in the last read."""
    keep = tail_bytes(limit)
    head = bytes(buffer[: limit - keep])
    tail = bytes(buffer[len(buffer) - keep :])
    total = len(buffer)
    rest = b""
    chunk = bytearray(_BLOCK)
    while True:
        count = handle.readinto(chunk)
        if not count:
            break
        newline = chunk.find(b"\n", 0, count)
        end = newline if newline >= 0 else count
        total += end
        tail = bytes(chunk[end - keep : end]) if end >= keep else (tail + bytes(chunk[:end]))[-keep:]
        if newline >= 0:
            rest = bytes(chunk[newline:count])
            break
    line, dropped = _joined(head, tail, total - len(head) - len(tail))
    if counter is not None:
        counter.lines += 1
        counter.bytes += dropped
    return line + rest


def blocks(
    handle: Readable, size: int | None = None, *, limit: int = MAX_LINE_BYTES, counter: CutCounter | None = None,
) -> Iterator[tuple[bytearray, int]]:
    """The file through one reused buffer, as ``(buffer, end)``: ``buffer[:end]`` holds whole
    lines (at the end of the file, the last one may end without a newline).

    A line longer than the buffer grows it up to ``limit``; past that, it is cut
    (:func:`_skip_long`) while it streams by. The buffer is overwritten by the next block.
    """
    buffer = bytearray(size or _fitted(handle))
    kept = 0  # bytes of an unfinished line at the start of the buffer
    while True:
        if kept == len(buffer):
            if kept >= limit:  # one line fills a buffer as long as the bound: cut it
                pending = _skip_long(handle, buffer, limit, counter)
                buffer = bytearray(pending) + bytearray(max(_SMALLEST, len(pending)))
                kept = len(pending)
                cut = buffer.rfind(b"\n", 0, kept) + 1
                if cut:
                    yield buffer, cut
                    kept -= cut
                    buffer[:kept] = buffer[cut : cut + kept]
                continue
            buffer.extend(bytes(min(len(buffer), max(limit, _SMALLEST))))  # make room
        with memoryview(buffer) as view, view[kept:] as free:
            count = handle.readinto(free)
        if not count:
            break
        filled = kept + count
        cut = buffer.rfind(b"\n", kept, filled) + 1
        if cut == 0:
            kept = filled
            continue
        yield buffer, cut
        kept = filled - cut
        buffer[:kept] = buffer[cut:filled]
    if kept:
        yield buffer, kept


def lines(handle: Readable, *, limit: int = MAX_LINE_BYTES, counter: CutCounter | None = None) -> Iterator[bytes]:
    """The file's lines (without their newline), each within ``limit`` bytes: cut as they are read."""
    for data, end in blocks(handle, limit=limit, counter=counter):
        parts = bytes(data[:end]).split(b"\n")
        if parts and not parts[-1]:
            parts.pop()  # the block ended with a newline
        for part in parts:
            if len(part) > limit:
                part, dropped = _cut(part, limit)
                if counter is not None:
                    counter.lines += 1
                    counter.bytes += dropped
            yield part

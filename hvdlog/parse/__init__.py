"""Raw files -> documents of the field contract, with no stack running (``hvdlog parse``).

Reads our JSON event files, native captures (per-rank ``rank-N.stdout.log``), horovodrun
console captures (launcher-tagged, ranks interleaved) and ``--output-filename`` trees,
and yields the documents Logstash's pipelines produce for the same lines, using the same
grok pattern file (``hvdlog/parse/assets/patterns/horovod``). ``hvdlog grep``/``stalls``/... build on
:func:`parse_paths` and :func:`parse_lines`.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, cast

import orjson

from hvdlog.documents import Document
from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.parse.bounded import MAX_LINE_BYTES, TRUNCATED_TAG, cut_bytes
from hvdlog.parse.bounded import lines as bounded_lines
from hvdlog.parse.jsonl import APP_DATASET, MAX_VALUE_DEPTH, TooDeepError, bound_depth, decode_event, event_builder, event_builders, loads_replacing, nest

if TYPE_CHECKING:
    from hvdlog.parse.bounded import Readable
    from hvdlog.parse.launcher import Tagged, TagSplitter
    from hvdlog.parse.native import Chatter, NativeParser
    from hvdlog.parse.prefixes import PrefixMemory

__all__ = ["STDIN", "LineStream", "decode_line", "iter_files", "parse_lines", "parse_paths"]

#: The path that means standard input.
STDIN = "-"

#: Bytes read at a time: line iteration over a 256 kB buffer costs ~40 % less than over the
#: default 8 kB one (fewer reads); a pipe still gives each line as soon as it arrives.
_READ_BUFFER = 1 << 18

#: Our JSON event files (hvdlog/layout.py: ``rank-<r>.jsonl``, rotated ``.1``...).
_EVENTS_FILE = re.compile(r"\.jsonl(?:\.\d+)?$")


def _unparsed_event(line: str, base: dict[str, Any]) -> Document | None:
    """A line of an events file that is not a JSON object: kept raw, tagged (blank: None)."""
    if not line.strip():
        return None
    flat = {**base, "message": line, "log.level": "info", "event.dataset": APP_DATASET, "tags": [PARSE_FAILURE_TAG]}
    return nest(flat)


def decode_line(raw: bytes | str) -> str:
    """One physical line as text without its line ending; invalid UTF-8 bytes are kept
    visibly as ``\\xNN`` escapes rather than dropped."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "backslashreplace")
    return raw.rstrip("\r\n")


def _events_file(
    lines: Iterable[bytes | str], path: str, parser: NativeParser | None, timezone: str | None, chatter: Chatter, size: int | None,
) -> Iterator[Document]:
    """One of our events files: JSON lines, so the native parser has nothing to do. It is
    loaded only to check its options, or to close a shared one as every file does."""
    if parser is None and (timezone is not None or chatter != "keep"):
        _native_parser(timezone, chatter, size)
    yield from _events(lines, path)
    if parser is not None:
        yield from parser.close()


def parse_lines(
    lines: Iterable[bytes | str],
    *,
    path: str | os.PathLike[str] | None = None,
    timezone: str | None = None,
    chatter: Chatter = "keep",
    size: int | None = None,
    parser: NativeParser | None = None,
) -> Iterator[Document]:
    """Documents from the lines of one source (a file, stdin, a list).

    Args:
        lines: physical lines, bytes or text, with or without line endings.
        path: where they were read from; a per-rank path gives rank, stream, job and host,
            and is stored in ``log.file.path``.
        timezone: IANA zone of the nodes' clocks for Horovod's zone-less times (default:
            this machine's local zone).
        chatter: known per-cycle TRACE/DEBUG lines: ``keep``, ``drop`` or keep 1 in N.
        size: job size, for the oldest stall format (``[ready ranks: ...]``).
        parser: share one native parser across files (what :func:`parse_paths` does).
    """
    if path is not None:
        path = os.fspath(path)
        if _EVENTS_FILE.search(path) is not None:
            yield from _events_file(lines, path, parser, timezone, chatter, size)
            return
    stream = LineStream(path=path, timezone=timezone, chatter=chatter, size=size, parser=parser)
    yield from stream.feed(lines)
    yield from stream.close()


class LineStream:
    """One native source parsed as its lines come (``parse_lines`` in push form): :meth:`feed`
    gives the documents complete so far, a block still open stays open for the next lines,
    :meth:`close` completes it. ``grep -f`` and ``watch`` keep one per followed file, so a
    traceback that straddles two polls is one document, as when the file is read at once."""

    __slots__ = ("_base", "_native", "_prefixes", "_shown", "_sniff_json", "_split_arrival", "_splitter", "_unwrapper")

    def __init__(
        self, *, path: str | None = None, timezone: str | None = None, chatter: Chatter = "keep", size: int | None = None,
        parser: NativeParser | None = None,
    ) -> None:
        from hvdlog.parse.arrival import split_arrival
        from hvdlog.parse.launcher import TagSplitter, path_fields, shown
        from hvdlog.parse.prefixes import PrefixMemory
        from hvdlog.parse.wraps import Unwrapper

        self._split_arrival, self._shown = split_arrival, shown

        self._native = parser or _native_parser(timezone, chatter, size)
        self._base: dict[str, Any] = {} if path is None else {"log.file.path": path, **path_fields(path)}
        # A rank's stdout/stderr capture never holds our JSON events (a JSON-looking print stays
        # a print, as in Logstash's native pipeline); elsewhere (stdin, a console capture) a line
        # that decodes to a JSON object is taken as one of our events.
        self._prefixes = PrefixMemory(neighbours="rank" not in self._base)
        self._splitter = TagSplitter(self._prefixes.strip, self._prefixes.learn)
        self._sniff_json = "horovod.launcher.stream" not in self._base
        # A console's lines that a terminal wrapped are joined back (hvdlog/parse/wraps.py). A file whose
        # path names its rank or its stream (an elastic worker's pid-N.stdout.log) is a capture
        # written from a pipe: no terminal wrapped it.
        console = "rank" not in self._base and "horovod.launcher.stream" not in self._base
        self._unwrapper = Unwrapper() if console else None

    def feed(self, lines: Iterable[bytes | str]) -> Iterator[Document]:
        """The documents the lines complete."""
        unwrapper = self._unwrapper
        for raw in lines:
            text = decode_line(raw)
            if unwrapper is None:
                yield from self._line(text)
                continue
            for joined in unwrapper.push(text):
                yield from self._line(joined)

    def close(self) -> Iterator[Document]:
        """What the input's end completes: a line still held, pieces of lines, open blocks."""
        if self._unwrapper is not None:
            for joined in self._unwrapper.end():
                yield from self._line(joined)
        yield from _closed(self._prefixes, self._splitter, self._native, self._base)

    def _line(self, text: str) -> Iterator[Document]:
        line, arrival = self._split_arrival(text)
        prefixes, splitter, native, base = self._prefixes, self._splitter, self._native, self._base
        if self._sniff_json and line[:1] == "{":
            doc = decode_event(line, base.get("log.file.path"))
            if doc is not None:
                yield doc
                return
        if "\x1b" in line or "\r" in line:  # colour codes, tqdm's progress: what a terminal shows
            line = self._shown(line, prefixes.peek)
        if prefixes.holding:  # the file's first line waits for this one to confirm its prefix
            yield from _replayed(prefixes.release(line, arrival), prefixes, splitter, native, base)
            if prefixes.holding:
                return
        line = prefixes.cut(line)
        # no gloo/Open MPI tag (the common case of per-rank files): only a prefix to learn or strip
        pieces = splitter.feed(line, arrival) if "]<" in line else _held_or(prefixes.strip(line, arrival))
        for payload, tag in pieces:
            docs = native.feed(payload, {**base, **tag} if tag else base, arrival)
            if docs:
                yield from docs


def _closed(prefixes: PrefixMemory, splitter: TagSplitter, native: NativeParser, base: dict[str, Any]) -> Iterator[Document]:
    """What the input's end completes: a line still held, pieces of lines, open blocks."""
    if prefixes.holding:
        yield from _replayed(prefixes.release(None), prefixes, splitter, native, base)
    for payload, tag in splitter.close():
        yield from native.feed(payload, {**base, **tag} if tag else base)
    yield from native.close()


def _held_or(tagged: Tagged | None) -> tuple[Tagged, ...]:
    """The line to read: none while it is held (see PrefixMemory.strip)."""
    return () if tagged is None else (tagged,)


def _replayed(
    held: list[tuple[str, str | None]], prefixes: PrefixMemory, splitter: TagSplitter, native: NativeParser, base: dict[str, Any],
) -> Iterator[Document]:
    """The documents of lines held while the file's prefix was unknown, read now (without it, if learned)."""
    prefixes.replaying = True
    try:
        for line, arrival in held:
            line = prefixes.cut(line)
            for payload, tag in splitter.feed(line, arrival) if "]<" in line else [prefixes.strip(line, arrival)]:  # type: ignore[misc]
                yield from native.feed(payload, {**base, **tag} if tag else base, arrival)
    finally:
        prefixes.replaying = False


def _native_parser(timezone: str | None, chatter: Chatter, size: int | None) -> NativeParser:
    from hvdlog.parse.native import NativeParser

    return NativeParser(timezone=timezone, chatter=chatter, size=size)


def _events(lines: Iterable[bytes | str], path: str) -> Iterator[Document]:
    """The documents of an events file's lines: one per JSON object, other lines kept raw.

    Most of the volume: decode_event inlined here (a generator level costs per line);
    orjson reads the bytes as they are; one generated builder per key set."""
    base: dict[str, Any] | None = None
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    builders = event_builders(with_path=True)
    for raw in lines:
        try:
            flat = loads(raw)
        except decode_error:
            flat = loads_replacing(raw)  # one invalid UTF-8 byte: replaced, the event keeps its level
        if type(flat) is dict:
            if _nesting(raw) > MAX_VALUE_DEPTH:  # a nested line: bounded
                bound_depth(flat)
            keys = tuple(flat)
            build = builders.get(keys) or event_builder(keys, with_path=True)
            try:
                doc: Document | None = build(flat, path)
            except TooDeepError:
                doc = None
            if doc is not None:
                if len(raw) > _CUT_FLOOR:  # a line cut to the line bound as it was read: said on the document
                    _mark_cut(doc, raw)
                yield doc
                continue
        if base is None:  # the raw-line fields only when a line is not a JSON object
            from hvdlog.parse.launcher import path_fields

            base = {"log.file.path": path, **path_fields(path)}
        doc = _unparsed_event(decode_line(raw), base)
        if doc is not None:
            yield doc


def _nesting(raw: bytes | str) -> int:
    """An upper bound of a JSON line's nesting: its opening brackets (memchr-fast; most lines have one)."""
    if isinstance(raw, bytes):
        return raw.count(b"{") + raw.count(b"[")
    return raw.count("{") + raw.count("[")


#: A line the reader cut (hvdlog/parse/bounded.py) is at least this long: shorter ones are not looked at.
_CUT_FLOOR: Final = MAX_LINE_BYTES - 16


def _mark_cut(doc: Document, raw: bytes | str) -> None:
    """Tag a document whose line was cut as it was read, with the bytes cut."""
    cut = cut_bytes(raw)
    if cut is None:
        return
    tags = doc.get("tags")
    doc["tags"] = [*(tags if isinstance(tags, list) else [] if tags is None else [tags]), TRUNCATED_TAG]
    hvdlog = doc.setdefault("hvdlog", {})
    if isinstance(hvdlog, dict):
        truncated = hvdlog.setdefault("truncated", {})
        if isinstance(truncated, dict):
            truncated["bytes"] = cut


def iter_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    """Files named by ``paths``; a directory (an ``--output-filename`` tree) is walked in
    name order. Raises FileNotFoundError for a path that does not exist."""
    for item in paths:
        item = os.fspath(item)
        if item == STDIN:
            yield item
        elif Path(item).is_dir():
            yield from sorted(str(found) for found in Path(item).rglob("*") if found.is_file())
        elif Path(item).exists():
            yield item
        else:
            raise FileNotFoundError(f"no such file or directory: {item}")


def parse_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    timezone: str | None = None,
    chatter: Chatter = "keep",
    size: int | None = None,
    stdin: IO[bytes] | None = None,
    opened: Callable[[str, IO[bytes] | None], None] | None = None,
) -> Iterator[Document]:
    """Documents from files, directories (walked) and ``-`` (standard input), in order.

    Same options as :func:`parse_lines`. One native parser serves all files, so a job size
    learned from rank 0's log applies to the others. ``opened(name, handle)`` is told of each
    file as it is opened, and ``opened(name, None)`` once it is read (a progress line's hook).
    """
    native = _native_parser(timezone, chatter, size)
    from hvdlog.layout import without_launcher_copies

    # horovodrun's --output-filename copies of what hvdlog's layout beside them holds: read once
    for name in without_launcher_copies(list(iter_files(paths))):
        if name == STDIN:
            yield from parse_lines(stdin or sys.stdin.buffer, parser=native)
            continue
        with open(name, "rb", buffering=_READ_BUFFER) as handle:
            if opened is not None:
                opened(name, handle)
            yield from parse_lines(bounded_lines(cast("Readable", handle)), path=name, parser=native)
        if opened is not None:
            opened(name, None)

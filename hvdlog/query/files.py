"""Events from per-rank files on disk, through the same parser ``hvdlog parse`` and Logstash use.

Inputs are files or directories: our layout (``<job>/<host>/rank-<r>.jsonl`` and the
``.stdout.log``/``.stderr.log`` next to it) and ``horovodrun --output-filename`` trees
(``rank.<r>/stdout|stderr``). Every line goes through :mod:`hvdlog.parse`, so a document here
is the document Elasticsearch would hold.

Two shortcuts keep ``grep --rank R --level error`` fast on big trees, both exact:

* a file whose *path* names a rank outside ``--rank`` is not opened (the writer names each
  file after the rank whose events it holds);
* in a ``.jsonl`` file, only lines containing a needle that every match must contain
  (``"error"``/``"critical"`` for ``--level error``, the literal PATTERN) are parsed; the
  needles are found over blocks of the file by the ``ahocorasick_rs`` wheel's SIMD search
  (part of ``hvdlog[cli]``), or ``bytes.find`` without it: the same lines either way.

Files are read into one reused buffer (``readinto``), never mapped: a file truncated while
it is read (log rotation, a rank restarting) ends the read early instead of killing the
process (SIGBUS).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import re
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from hvdlog.documents import Document, sort_key
from hvdlog.fields import LEVELS, PARSE_FAILURE_TAG
from hvdlog.layout import path_rank, walk
from hvdlog.parse import parse_lines
from hvdlog.query.follow import Follower
from hvdlog.query.source import SourceError, Warn, stderr_warn
from hvdlog.query.spec import Filter

__all__ = ["FileSource", "discover", "path_rank"]

_JSON_SAFE: Final = re.compile(r"^[\x20-\x7e]+$")
#: Bytes read per block when scanning for needles.
_BLOCK: Final = 8 * 1024 * 1024


def discover(paths: Iterable[str | Path], warn: Warn) -> list[Path]:
    """Files named directly, plus every log file under named directories (:func:`hvdlog.layout.walk`)."""
    return sorted(set(walk(paths, warn)))


def _needles(spec: Filter) -> tuple[list[bytes], bytes | None]:
    """Byte strings a matching ``.jsonl`` line must contain: (any of levels, the pattern)."""
    levels: list[bytes] = []
    if spec.min_level is not None and LEVELS.index(spec.min_level) > LEVELS.index("info"):
        levels = [f'"{name}"'.encode() for name in LEVELS[LEVELS.index(spec.min_level) :]]
    literal = None
    pattern = spec.pattern
    if pattern and not spec.regex and not spec.ignore_case and _JSON_SAFE.match(pattern) and '"' not in pattern and "\\" not in pattern:
        literal = pattern.encode()
    return levels, literal


class _Finder:
    """Every start of one needle in a buffer: ``bytes.find`` in a loop, or the ``ahocorasick_rs``
    wheel's SIMD search when it is installed (several times faster on the needles of
    ``--level``, whose bytes are the common ones of JSON).

    The wheel reports every occurrence, where the loop skips to the next line after one: a
    needle found more than once per :data:`_DENSE` bytes (a short PATTERN such as ``e``) is
    handed back to the loop for the rest of the file, so memory and time stay bounded. One
    byte needles always use the loop (``find`` is ``memchr`` for them). Either way every line
    holding the needle is reported (a needle never spans lines): the candidate lines, and
    what grep prints, are the same with and without the wheel.
    """

    __slots__ = ("_searcher", "needle")

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self._searcher: Any = None
        if _ACCELERATED and len(needle) > 1:
            self._searcher = _accelerator().BytesAhoCorasick([needle])

    def starts(self, data: bytearray, end: int) -> list[int]:
        """Where the needle starts in ``data[:end]``, in order (at least once per line that holds it)."""
        found: list[int] = []
        start = 0
        if self._searcher is not None:
            reach = len(self.needle) - 1  # a window also takes what starts in it and ends after it
            with memoryview(data) as view:
                while start < end and self._searcher is not None:
                    stop = min(start + _WINDOW, end)
                    with view[start : min(stop + reach, end)] as window:
                        hits = self._searcher.find_matches_as_indexes(window)
                    found.extend(start + hit for _, hit, _ in hits)
                    if len(hits) > (stop - start) // _DENSE:
                        self._searcher = None  # dense: the loop below takes one per line
                    start = stop
            if start >= end:
                return found
        needle, find = self.needle, data.find
        pos = find(needle, start, end)
        while pos >= 0:
            found.append(pos)
            line_end = find(b"\n", pos, end)
            if line_end < 0:
                break
            pos = find(needle, line_end, end)
        return found


#: Bytes searched per call into the wheel (its matches come back as one list).
_WINDOW = 1 << 20
#: More than one occurrence per this many bytes is dense: the wheel stops for that needle.
_DENSE = 64


#: Whether to use the ``ahocorasick_rs`` wheel when it can be imported (tests turn it off
#: to compare both scanners).
_ACCELERATED = True


@functools.cache
def _accelerator() -> Any:
    import ahocorasick_rs

    return ahocorasick_rs


def _finders(needles: Sequence[bytes]) -> list[_Finder]:
    global _ACCELERATED
    if _ACCELERATED:
        try:
            _accelerator()
        except ImportError:
            _ACCELERATED = False
    return [_Finder(needle) for needle in needles]


def _candidate_lines(data: bytearray, end: int, finders: Sequence[_Finder], literal: bytes | None) -> list[bytes]:
    """Lines of ``data[:end]`` holding one of the ``finders``' needles (and ``literal``, when given)."""
    spans: dict[int, int] = {}  # line start -> line end, of every line with a needle
    find, rfind = data.find, data.rfind
    for finder in finders:
        stop = -1
        for pos in finder.starts(data, end):
            if pos < stop:
                continue  # this line is in already
            start = rfind(b"\n", 0, pos) + 1
            stop = find(b"\n", pos, end)
            if stop < 0:
                stop = end
            spans[start] = stop
    lines = [bytes(data[start : spans[start]]) for start in sorted(spans)]
    return lines if literal is None else [line for line in lines if literal in line]


def _blocks(handle: io.BufferedIOBase, size: int | None = None) -> Iterator[tuple[bytearray, int]]:
    """The file through one reused buffer, as ``(buffer, end)``: ``buffer[:end]`` holds whole
    lines (at the end of the file, the last one may end without a newline).

    A line longer than the buffer grows it. The buffer is overwritten by the next block.
    """
    buffer = bytearray(size or _BLOCK)
    kept = 0  # bytes of an unfinished line at the start of the buffer
    while True:
        if kept == len(buffer):
            buffer.extend(bytes(len(buffer)))  # one line fills the buffer: make room
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


def _tags(doc: Document) -> tuple[object, ...]:
    """``tags`` as a tuple whatever the data put there (``"tags": 5`` is data, not our bug)."""
    tags = doc.get("tags")
    if isinstance(tags, (list, tuple)):
        return tuple(tags)
    return (tags,) if tags is not None else ()


class FileSource:
    """Per-rank files and directories as a :class:`~hvdlog.query.source.Source`."""

    def __init__(self, paths: Sequence[str | Path], *, timezone: str | None = None, warn: Warn = stderr_warn) -> None:
        self.paths = list(paths)
        self.timezone = timezone
        self.warn = warn
        self.label = "files" if len(self.paths) != 1 else str(self.paths[0])
        self.parse_failures = 0
        #: Inputs that could not be read (the search went on without them).
        self.errors: list[str] = []

    def _error(self, message: str) -> None:
        self.errors.append(message)
        self.warn(message)

    def _files(self, spec: Filter) -> list[Path]:
        files = discover(self.paths, self._error)
        if not files:
            raise SourceError("no log files found: check the paths (files, directories or --output-filename trees)")
        if spec.ranks is None:
            return files
        ranks = spec.ranks
        return [path for path in files if (rank := path_rank(path)) is None or rank in ranks]

    def _read(self, path: Path, spec: Filter) -> Iterator[Document]:
        levels, literal = _needles(spec) if path.name.endswith(".jsonl") or ".jsonl." in path.name else ([], None)
        with open(path, "rb") as handle:
            if levels or literal:
                finders = _finders(levels or [literal])  # type: ignore[list-item]
                lines = (line for data, end in _blocks(handle) for line in _candidate_lines(data, end, finders, literal))
                yield from parse_lines(lines, path=str(path), timezone=self.timezone)
            else:
                yield from parse_lines(handle, path=str(path), timezone=self.timezone)

    def _matches(self, files: Iterable[Path], spec: Filter) -> Iterator[Document]:
        readable = 0
        failures = 0
        for path in files:
            try:
                for doc in self._read(path, spec):
                    if PARSE_FAILURE_TAG in _tags(doc):
                        failures += 1
                    if spec.matches(doc):
                        yield doc
                readable += 1
            except (OSError, UnicodeError) as exc:
                self._error(f"{path}: cannot read ({exc.strerror if isinstance(exc, OSError) else exc}); skipped")
        self.parse_failures += failures
        if failures:
            self.warn(f"{failures} line(s) could not be parsed; they are kept with tag {PARSE_FAILURE_TAG}")
        if not readable and files:
            raise SourceError("none of the log files could be read")

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """Every match (or the ``last`` N), sorted by time then rank."""
        files = self._files(spec)
        with _no_cycle_collection():
            # (key, input index, doc): the unique index keeps the sort stable and never compares documents.
            keyed = sorted((sort_key(doc), index, doc) for index, doc in enumerate(self._matches(files, spec)))
        docs = (doc for _, _, doc in keyed)
        yield from deque(docs, maxlen=last) if last is not None else docs

    def follow(self, spec: Filter, interval: float = 1.0) -> Iterator[Document]:
        """Lines appended from now on (new files included), parsed and filtered, batch by batch.

        Files are followed by identity, across rotation, copy-truncate and delete: every
        whole line once (:mod:`hvdlog.query.follow`).
        """

        def files() -> Iterator[Path]:
            for path in discover(self.paths, lambda _message: None):
                if spec.ranks is None or (rank := path_rank(path)) is None or rank in spec.ranks:
                    yield path

        self._files(spec)  # no file at all is an error now, not a silent wait
        named = [Path(f"{path}.1") for path in self.paths if not Path(path).is_dir()]
        follower = Follower(files, self.warn, lambda: named)
        follower.start()
        try:
            while True:
                time.sleep(interval)
                batch: list[Document] = []
                for path, lines in follower.poll():
                    batch.extend(d for d in parse_lines(lines, path=str(path), timezone=self.timezone) if spec.matches(d))
                yield from sorted(batch, key=sort_key)
        finally:
            follower.close()


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The garbage collector paused while the matches pile up: documents are trees (no cycles
    to find), and each collection would walk all of them again (~10 % of a big grep)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


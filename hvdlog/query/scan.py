"""The byte scanner: lines of a file that hold a needle, found without parsing the file.

A ``.jsonl`` line can only match ``--level error`` if it holds ``"error"`` or ``"critical"``,
and only match a literal PATTERN if it holds those bytes, so only those lines need parsing.
The needles are found over blocks of the file by the ``ahocorasick_rs`` wheel's SIMD search
(part of ``hvdlog[cli]``), or ``bytes.find`` without it: the same lines either way.

Files are read into one reused buffer (``readinto``), never mapped: a file truncated while
it is read (log rotation, a rank restarting) ends the read early instead of killing the
process (SIGBUS).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, Final

from hvdlog.fields import LEVELS
from hvdlog.parse.bounded import MAX_LINE_BYTES, CutCounter, blocks, cut_line
from hvdlog.query.spec import Filter

__all__ = ["ESCAPE", "blocks", "candidate_lines", "finders", "needles"]

_JSON_SAFE: Final = re.compile(r"^[\x20-\x7e]+$")


#: A JSON escape can spell any letter (``"\\u0065rror"`` is ``"error"``): a line holding one is
#: always a candidate, whatever the needles.
ESCAPE: Final = b"\\u"


def needles(spec: Filter) -> tuple[list[bytes], bytes | None]:
    """Byte strings a matching ``.jsonl`` line must contain, unless it holds :data:`ESCAPE`:
    (any of levels, the pattern)."""
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


def finders(needles: Sequence[bytes]) -> list[_Finder]:
    global _ACCELERATED
    if _ACCELERATED:
        try:
            _accelerator()
        except ImportError:
            _ACCELERATED = False
    return [_Finder(needle) for needle in needles]


def candidate_lines(
    data: bytearray, end: int, finders: Sequence[_Finder], literal: bytes | None, counter: CutCounter | None = None,
) -> list[bytes]:
    """Lines of ``data[:end]`` holding one of the ``finders``' needles (and ``literal``, or an
    :data:`ESCAPE` that may spell it, when given); one longer than the line bound is cut (counted in ``counter``)."""
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
    if any(len(line) > MAX_LINE_BYTES for line in lines):  # a long line within one block (blocks cut the longer ones)
        if counter is not None:
            counter.lines += sum(len(line) > MAX_LINE_BYTES for line in lines)
        lines = [cut_line(line) for line in lines]
    return lines if literal is None else [line for line in lines if literal in line or ESCAPE in line]

"""Lines a terminal wrapped, joined back: a console copied from a terminal ``W`` columns wide.

A terminal cuts every line longer than its width into pieces of exactly ``W`` characters and
a shorter last piece; a post copied from it has each piece on a line of its own, and the
pieces after the first have lost the launcher tag (and a scheduler's prefix). Read as they
stand, the rank's line is cut short and its rest is a line of no rank.

The width is read from the file itself: no line of a wrapped capture is longer than ``W``,
so a piece that a continuation follows is always as long as the longest line so far (and at
least 80 columns, the narrowest terminal). The next line continues it when it cannot stand on
its own (see ``Unwrapper._stands``: a blank line, a line drawn across, the piece's first
characters, prefix or launcher tag, a line shape the parser knows all stand; after a tagged
piece, not a line that only a block's lost head would explain: a rank's lines carry its tag) and

- the piece carries a launcher tag (a rank's line went on: an untagged line there is
  no line of that console's launcher); or
- the width is confirmed: a piece as long as the one it continues was seen (the middle of
  a line wrapped more than once); or
- what the two say makes them one line: a stall warning cut short, or together a message of
  the table (hvdlog/parse/assets/messages.json) that the piece alone is not
  (``mpirun noticed ... exited on sign`` + ``al 9 (Killed).``).

A joined line whose last piece is again the full width may go on. A capture wrapped twice (a
post copied from a 100-column terminal, shown again in a narrower one and copied again) has
pieces of pieces: once the narrower pieces are joined, the lines of the first width are pieces
again, and a second pass of the same reading joins them. The second pass holds a line only at
a width it has already seen (a terminal's width recurs, the length of one joined line does
not). Only consoles are read so
(per-rank files are written by horovodrun or hvdlog, no terminal between); a line is held for
one line at most, only when it is the longest so far. This is the Python path (``hvdlog
parse`` and every analysis over files): Logstash reads each event alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

from hvdlog.parse.launcher import shown as terminal_view
from hvdlog.parse.launcher import split_prefixed, visible
from hvdlog.parse.messages import recognise
from hvdlog.parse.prefixes import known_start
from hvdlog.parse.stalls import is_cut_warning

__all__ = ["NARROWEST", "Unwrapper"]

#: the narrowest terminal: shorter lines are never taken for wrapped pieces
NARROWEST: Final = 80
#: how many first characters (digits as 0) say that a line begins as another did
_LEAD: Final = 8
_PREFIX: Final = "@metadata.hvd.prefix"
_FORMAT: Final = "horovod.launcher.format"
_STALL: Final = "One or more tensors"
_ZEROS: Final = str.maketrans("0123456789", "0000000000")
_PARTS: Final = re.compile(r"[0-9A-Za-z]+|\s+|.", re.DOTALL)
_WORD: Final = "[0-9A-Za-z]+"
#: a line drawn across (Open MPI's and Hydra's boxes, tables): never the rest of another line
_RULE: Final = re.compile(r"[ \t]*([-=_*#~+])\1{9,}[ \t]*\Z")


def _columns(line: str, shown: str) -> int:
    """The columns ``line`` took, as a terminal or a wrapping viewer counted them: colour codes
    take none; a carriage return and what it hides are counted (a terminal's copy has none)."""
    if "\r" not in line:
        return len(shown)
    return len(visible(line.replace("\r", " "))) if "\x1b" in line else len(line)


def _lead(line: str) -> str:
    """The first characters of ``line`` (as shown), digits as 0."""
    return line[:_LEAD].translate(_ZEROS)


def _shape(prefix: str) -> re.Pattern[str]:
    """The regex of a prefix whose words and numbers may change (times, hosts, a stream's
    name), its punctuation not."""
    return re.compile("".join(_WORD if part[0].isalnum() else r"\s+" if part.isspace() else re.escape(part) for part in _PARTS.findall(prefix)))


class _Held:
    """The line waiting for the next one: its text (pieces joined so far), its first piece as
    shown and how that begins (tag and prefix read once, only when needed), its last piece's width."""

    __slots__ = ("_fields", "_prefix", "first", "lead", "piece", "text")

    def __init__(self, text: str, first: str, width: int, fields: dict[str, Any] | None) -> None:
        self.text, self.first, self.lead, self.piece = text, first, _lead(first), width
        self._fields = fields
        self._prefix: re.Pattern[str] | None = None

    @property
    def fields(self) -> dict[str, Any]:
        """The first piece's launcher tag and prefix (:func:`split_prefixed`)."""
        if self._fields is None:
            self._fields = split_prefixed(self.first).fields
        return self._fields

    @property
    def tagged(self) -> bool:
        return _FORMAT in self.fields

    @property
    def prefix(self) -> re.Pattern[str] | None:
        """The shape of the prefix before the first piece's tag, if any."""
        prefix = self.fields.get(_PREFIX)
        if prefix and self._prefix is None:
            self._prefix = _shape(prefix)
        return self._prefix


class Unwrapper:
    """Joins one console's wrapped lines back (see the module): feed it the decoded lines, one
    :meth:`push` at a time (a followed file's lines come poll by poll), then :meth:`end`.
    Two passes: the lines the first completes go through the second (a capture wrapped twice)."""

    __slots__ = ("_first", "_second")

    def __init__(self) -> None:
        self._first, self._second = _Pass(recurring=False), _Pass(recurring=True)

    def lines(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` with each wrapped line's pieces joined into one."""
        for line in lines:
            yield from self.push(line)
        yield from self.end()

    def push(self, line: str) -> list[str]:
        """The lines complete once ``line`` is read (none while a piece may still go on)."""
        second = self._second
        return [done for joined in self._first.push(line) for done in second.push(joined)]

    def end(self) -> list[str]:
        """The lines still held when the input ends."""
        second = self._second
        return [*(done for joined in self._first.end() for done in second.push(joined)), *second.end()]


class _Pass:
    """One reading of the lines (see the module); ``recurring``: a line is held only at a width
    an earlier line had too (the second pass, over lines the first may have joined)."""

    __slots__ = ("_confirmed", "_held", "_read", "_recurring", "_seen", "_widest")

    def __init__(self, *, recurring: bool) -> None:
        self._recurring = recurring
        self._seen = 0  # how many lines were as long as the widest
        self._widest = 0  # the longest line so far (columns)
        self._confirmed = 0  # a width that a piece as long as the one it continued confirmed
        self._read: tuple[str, dict[str, Any]] | None = None  # the last line whose tag was read
        self._held: _Held | None = None  # a line as long as the widest: the next piece may go on it

    def push(self, line: str) -> list[str]:
        """The lines complete once ``line`` is read (none while a piece may still go on)."""
        shown = terminal_view(line)
        width = _columns(line, shown)
        if width > self._widest:
            self._widest, self._seen = width, 0
        if width == self._widest:
            self._seen += 1
        out: list[str] = []
        held = self._held
        if held is not None:
            joined = held.piece == self._widest and self._continues(held, shown, width)
            if joined:
                held.text += line
                held.piece = width
                if width == self._widest:  # a full piece again: the line may go on
                    return out
            out.append(held.text)
            self._held = None
            if joined:
                return out
        if width >= NARROWEST and width == self._widest and (self._seen > 1 or not self._recurring):
            read = self._read
            self._held = _Held(line, shown, width, read[1] if read is not None and read[0] is shown else None)
            return out
        out.append(line)
        return out

    def end(self) -> list[str]:
        """The line still held when the input ends."""
        held, self._held = self._held, None
        return [] if held is None else [held.text]

    def _continues(self, held: _Held, line: str, width: int) -> bool:
        """Whether ``line`` (as shown, ``width`` columns) goes on the held line, whose last
        piece is still the longest."""
        if self._stands(line, held):
            return False
        full = self._widest
        if width == full:  # a piece as long as the one before: the width is the terminal's
            self._confirmed = full
        if held.tagged or self._confirmed == full:
            return True
        return _completes(terminal_view(held.text), line)

    def _stands(self, line: str, held: _Held) -> bool:
        """Whether ``line`` begins as a line of its own: blank, a line drawn across, the same
        first characters as the held line (its tag or prefix, or the next of a series of
        prints), the held line's prefix, a line shape the parser knows; after a tagged line
        without a prefix, a tag at column 0 (Open MPI's tags in the middle of a line may begin
        a piece); after an untagged line, any tag."""
        if _lead(line) == held.lead or not line.strip() or _RULE.match(line):
            return True
        prefix = held.prefix
        if prefix is not None and prefix.match(line) is not None:
            return True
        fields = split_prefixed(line).fields
        self._read = (line, fields)
        if _FORMAT in fields:
            return not held.tagged or (prefix is None and not fields.get(_PREFIX))
        return known_start(line, headless=not held.tagged)  # a rank's lines are tagged in a tagged console


def _completes(held: str, line: str) -> bool:
    """Whether what ``held`` and ``line`` say makes them one line: ``held`` is a stall
    warning cut short, or the two are a message of the table that ``held`` alone is not."""
    at = held.find(_STALL)
    if at >= 0 and is_cut_warning(held[at:]):
        return True
    return recognise(held, net=False) is None and recognise(held + line, net=False) is not None

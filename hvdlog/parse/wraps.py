"""Lines a terminal wrapped, joined back: a console copied from a terminal ``W`` columns wide.

A terminal cuts every line longer than its width into pieces of exactly ``W`` characters and
a shorter last piece; a post copied from it has each piece on a line of its own, and the
pieces after the first have lost the launcher tag (and a scheduler's prefix). Read as they
stand, the rank's line is cut short and the rest is an untagged line of no rank.

The width is read from the file itself: no line of a wrapped capture is longer than ``W``,
so a piece that a continuation follows is always as long as the longest line so far (and at
least 80 columns, the narrowest terminal). The next line is that piece's continuation when it
cannot stand on its own (blank, a launcher tag at column 0 or behind the same prefix, a line
shape the parser knows: those stand) and

- the piece carries a launcher tag the next line lacks (a rank's line went on); or
- the width is confirmed: two lines (the next one counts) are exactly this longest length; or
- the two together are a message of the table (hvdlog/parse/assets/messages.json) that the
  piece alone is not (``mpirun noticed ... exited on sign`` + ``al 9 (Killed).``).

A joined line whose last piece is again the full width may go on. Only consoles are read so
(per-rank files are written by horovodrun or hvdlog, no terminal between); a line is held
for one line at most, only when it is the longest so far. This is the Python path
(``hvdlog parse`` and every analysis over files): Logstash reads each event alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

from hvdlog.parse.launcher import split_prefixed, visible
from hvdlog.parse.messages import recognise
from hvdlog.parse.prefixes import known_start

__all__ = ["Unwrapper"]

#: the narrowest terminal: shorter lines are never taken for wrapped pieces
NARROWEST: Final = 80
#: how many first characters (digits as 0) say that a line begins as another did
_LEAD: Final = 8
_PREFIX: Final = "@metadata.hvd.prefix"
_DIGITS: Final = re.compile(r"\d+")
_ZEROS: Final = str.maketrans("0123456789", "0000000000")
#: a line drawn across (Open MPI's and Hydra's boxes, tables): never the rest of another line
_RULE: Final = re.compile(r"[ \t]*([-=_*#~+])\1{9,}[ \t]*\Z")


class _Start(NamedTuple):
    """How a held line begins: whether it carries a launcher tag, the shape of the prefix
    before it (digits may change), and its first characters with digits as 0."""

    tagged: bool
    prefix: re.Pattern[str] | None
    lead: str


def _shown(line: str) -> str:
    """What the terminal shows of ``line``: no colour codes, and tqdm's progress output glued
    before it gone (behind the launcher tag, as the parser reads it)."""
    if "\r" not in line:
        return visible(line) if "\x1b" in line else line
    payload = split_prefixed(line).payload
    if "\r" not in payload:
        return visible(line)
    return line[: len(line) - len(payload)] + visible(payload)


def _start(line: str) -> _Start:
    """How ``line`` (as shown) begins."""
    fields = split_prefixed(line).fields
    prefix = fields.get(_PREFIX)
    shape = re.compile(_DIGITS.sub(r"\\d+", re.escape(prefix.translate(_ZEROS)))) if prefix else None
    return _Start("horovod.launcher.format" in fields, shape, line[:_LEAD].translate(_ZEROS))


class Unwrapper:
    """Joins one console's wrapped lines back (see the module): feed it the decoded lines."""

    __slots__ = ("_confirmed", "_widest")

    def __init__(self) -> None:
        self._widest = 0  # the longest line so far (columns)
        self._confirmed = 0  # a width a piece as long as the line it continued confirmed

    def lines(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines`` with each wrapped line's pieces joined into one."""
        held: str | None = None  # the longest line so far (or pieces joined), waiting for the next
        start = _Start(False, None, "")  # how it begins
        for line in lines:
            shown = _shown(line)
            width = len(shown)
            self._widest = max(self._widest, width)
            if held is not None:
                joined = self._continues(held, start, shown)
                if joined:
                    held += line
                    if width == self._widest:  # a full piece again: the line may go on
                        continue
                yield held
                held = None
                if joined:
                    continue
            if width >= NARROWEST and width == self._widest:
                held, start = line, _start(shown)
                continue
            yield line
        if held is not None:
            yield held

    def _continues(self, held: str, start: _Start, line: str) -> bool:
        """Whether ``line`` (as shown) goes on the held line, whose last piece (the longest line
        so far when it came) is still the longest."""
        full, width = self._widest, len(line)
        if width > full or _stands(line, start):
            return False
        if width == full:  # a piece as long as the one before: the width is the terminal's
            self._confirmed = full
        if start.tagged or self._confirmed == full:
            return True
        shown = _shown(held)
        return recognise(shown) is None and recognise(shown + line) is not None


def _stands(line: str, start: _Start) -> bool:
    """Whether ``line`` begins as a line of its own: blank, a line shape the parser knows, a
    line drawn across, a line that begins as the held one did (the next of a series) or
    with its prefix, or a launcher tag (behind another prefix only when the held line had none:
    Open MPI's tags in the middle of a line may begin a piece)."""
    if not line.strip() or line[:_LEAD].translate(_ZEROS) == start.lead or known_start(line) or _RULE.match(line):
        return True
    if start.prefix is not None and start.prefix.match(line) is not None:
        return True
    fields = split_prefixed(line).fields
    return "horovod.launcher.format" in fields and not (start.tagged and fields.get(_PREFIX))

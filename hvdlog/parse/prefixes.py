"""The prefix a scheduler, CI system or log viewer puts before every line of one file.

A prefix is found by rule (HOROVOD_SCHEDULER_PREFIX: at most 160 characters ending in a
separator or a time, then blanks), learned once per file and removed from the file's other
lines. It is learned where it stands before a line the parser knows:

- a launcher tag, a core header, a traceback's header, a signal handler's line or Slurm's own
  error (``srun: error: ``, ``slurmstepd: error: ``): one line says it, the grok patterns find
  such a prefix themselves (HOROVOD_PREFIXED_CORE, see hvdlog/parse/launcher.py);
- any other known line shape -- a block's first line (blocks.json), a message of the table
  (messages.json), a headless stall line -- but only when the line as a whole is not one,
  and the neighbouring line (the one before or, for the first line, the one after: that
  line is held until the next arrives) starts with the same prefix. A console whose lines
  carry no launcher tag (Open MPI's box, horovodrun's summary, an elastic driver's log)
  learns its prefix so; a real message (``job: ERROR: ...`` once) keeps its text, and a
  per-rank file without a prefix reads as before.

Digits may change from line to line (times, counters); the rest of the prefix is the same.
Only the Python path (``hvdlog parse`` and every query command) learns prefixes this way:
Logstash reads one event at a time, and keeps the prefix of an untagged line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Final

from hvdlog.parse.blocks import grammar
from hvdlog.parse.launcher import Tagged, split_prefixed
from hvdlog.parse.messages import load_messages
from hvdlog.parse.patterns import any_of, compile_pattern

__all__ = ["PrefixMemory", "known_shape", "known_start"]

_SCHEDULER: Final = compile_pattern("HOROVOD_SCHEDULER_PREFIX").regex
_COLLECTOR_ONLY: Final = compile_pattern("HOROVOD_COLLECTOR_PREFIX").regex
#: a scheduler's prefix and the collector's after it (HOROVOD_LINE_PREFIX's second form)
_COLLECTOR_TAIL: Final = re.compile(f"(?P<scheduler>.+?)(?:{_COLLECTOR_ONLY.pattern})\\Z", re.DOTALL)
_CORE: Final = compile_pattern("HOROVOD_CORE_LINE").regex
_OPS: Final = compile_pattern("HOROVOD_STALL_OPS_LINE").regex
_GRAMMAR: Final = grammar()
_DIGITS: Final = re.compile(r"\d+")
_PREFIX: Final = "@metadata.hvd.prefix"
#: a prefix is at most this long (HOROVOD_SCHEDULER_PREFIX's bound, with its blanks)
_LONGEST: Final = 170
#: blank lines a held line waits through for the line that confirms its prefix
_BLANKS: Final = 2
#: lines (digits as 0) remembered as teaching nothing, so a repeated progress print costs little
_PLAIN: Final = 1024
_ZEROS: Final = str.maketrans("0123456789", "0000000000")

Held = tuple[str, str | None]  # a line and its arrival time


@lru_cache(maxsize=256)
def _zeroed_shape(zeroed: str) -> re.Pattern[str]:
    return re.compile(_DIGITS.sub(r"\\d+", re.escape(zeroed)))


def _shape(prefix: str) -> re.Pattern[str]:
    """The regex of a prefix whose digits vary (times, counters); the rest stays the same."""
    return _zeroed_shape(prefix.translate(_ZEROS))


#: blocks.json's openers of a block whose first line was lost (a frame or an exception line
#: without its ``Traceback``): known alone only where a line may have lost its head
_HEADLESS: Final = frozenset({"headless_frame", "lone_exception"})


def _starts(*, headless: bool = True) -> re.Pattern[str]:
    """One regex for every line shape a block or a message begins with (blocks.json's
    openers, messages.json's rows, the core line): the rows stay the only source."""
    shapes = [message.pattern.regex.pattern for message in load_messages() if not message.net]  # the net: any line
    shapes.append(_CORE.pattern)
    for opener in _GRAMMAR.opens:
        if opener.state == "code" or opener.tests or (not headless and opener.name in _HEADLESS):
            continue
        if opener.contains is not None:  # the legacy stall header: its mark starts the line
            shapes.append(r"\A" + re.escape(opener.contains))
        elif opener.pattern is not None:
            shapes.append(f"(?={re.escape(opener.prefix)})(?:{opener.pattern.regex.pattern})")
    return any_of(shapes)


_STARTS: Final = _starts()
_HEADED: Final = _starts(headless=False)


def known_start(text: str, *, headless: bool = True) -> bool:
    """Whether ``text`` as it stands begins a line the parser knows (no tag or prefix looked
    for): a core header, a block's first line, a message of the table, a stall tensor line;
    not ``headless``: no line that only a block's lost head would explain (a stall tensor
    line, a frame or an exception line alone)."""
    if not headless:
        return _HEADED.match(text) is not None
    return _STARTS.match(text) is not None or ("ranks: " in text and _OPS.match(text) is not None)


def known_shape(text: str) -> bool:
    """Whether ``text`` starts as a line the parser knows: a launcher tag (also behind a
    collector's prefix), a core header, a block's first line, a message of the table or a
    stall report's tensor line. Indented lines are continuations, never known alone."""
    if not text or text[0] in " \t":
        return False
    if _STARTS.match(text) is not None:
        return True
    tagged = split_prefixed(text)
    return bool(tagged.fields) or tagged.payload != text or ("ranks: " in text and _OPS.match(text) is not None)


def _agreeing(prefix: str, neighbour: str) -> re.Pattern[str] | None:
    """The shape of ``prefix`` that ``neighbour`` starts with too, if any: its blanks may
    have taken a line's own leading blanks (`` WARNING: ...``), so fewer are tried."""
    body = prefix.rstrip(" \t")
    for keep in range(len(prefix), len(body), -1):
        shape = _shape(prefix[:keep])
        if shape.match(neighbour) is not None:
            return shape
    return None


def _cut(line: str, previous: str | None) -> tuple[int, re.Pattern[str] | None] | None:
    """Where ``line``'s prefix ends: the shortest cut before a known line shape that the line
    before shares (with its shape; None when there is no line before), or None."""
    for cut in _cuts(line):
        shape = None
        if previous is not None:
            shape = _agreeing(line[:cut], previous)
            if shape is None:  # a longer prefix begins with this one: it does not agree either
                return None
        if known_shape(line[cut:]):
            return cut, shape
    return None


def _cuts(line: str) -> Iterator[int]:
    """Where a prefix of ``line`` could end, shortest first (each a HOROVOD_SCHEDULER_PREFIX)."""
    position = 0
    while True:
        found = _SCHEDULER.match(line, position)
        if found is None or found.end() > _LONGEST:
            return
        position = found.end()
        yield position


class PrefixMemory:
    """One file's prefix: learned (see the module), then removed from every line that has it."""

    __slots__ = ("_head", "_held", "_plain", "_previous", "_settled", "_shape", "replaying")

    def __init__(self, *, neighbours: bool = True) -> None:
        """``neighbours``: learn by neighbouring lines too (not in a per-rank file: horovodrun
        and hvdlog write those themselves, no scheduler stands between)."""
        self._shape: re.Pattern[str] | None = None
        self._previous: str | None = None  # the last untagged line with text, while nothing is learned
        self._head: str | None = None  # its shortest possible prefix, digits as 0
        self._held: tuple[list[Held], str] | None = None  # the lines, and the first one's prefix
        #: a known line stood at column 0: this file has no prefix to learn by neighbours
        self._settled = not neighbours
        self._plain: set[str] = set()
        #: held lines are being read again (see :meth:`release`): they teach nothing
        self.replaying = False

    @property
    def holding(self) -> bool:
        """A line waits for the next one to confirm its prefix (call :meth:`release`)."""
        return self._held is not None

    def cut(self, line: str) -> str:
        """``line`` without the learned prefix (itself when none is learned or it has none)."""
        if self._shape is not None:
            found = self._shape.match(line)
            if found is not None:
                return line[found.end():]
        return line

    def learn(self, prefix: str | None) -> None:
        """Take the prefix a launcher tag or a core header stood behind (the first one found);
        a collector's prefix after a scheduler's is not part of it (its stream and times vary,
        and the line's own reading removes it)."""
        if prefix and self._shape is None:
            found = None if _COLLECTOR_ONLY.fullmatch(prefix) else _COLLECTOR_TAIL.match(prefix)
            self._shape = _shape(found["scheduler"] if found else prefix)

    def peek(self, line: str) -> Tagged:
        """:meth:`strip` that learns nothing and holds nothing."""
        tagged = split_prefixed(line)
        tagged.fields.pop(_PREFIX, None)
        return tagged if tagged.fields else Tagged(self.cut(tagged.payload), {})

    def strip(self, line: str, arrival: str | None = None) -> Tagged | None:
        """The launcher tag (see :func:`hvdlog.parse.launcher.strip_tag`) and payload of
        ``line``, learning and removing this file's prefix; None when the line is held
        until the next one says whether its prefix is one (see :meth:`release`)."""
        tagged = split_prefixed(line)
        prefix = tagged.fields.pop(_PREFIX, None)
        if prefix:
            self.learn(prefix)
            return tagged
        if tagged.fields:  # a tag at column 0 (or behind a collector's prefix): no prefix to learn
            self._settled = True
            return tagged
        if self._shape is None and not self._settled and self._confirmed(line, arrival) and self._held is not None:
            return None
        if self._shape is not None:  # also over a collector's prefix: it is part of the learned one
            found = self._shape.match(line)
            if found is not None:
                return Tagged(line[found.end():], {})
        return tagged

    def _confirmed(self, line: str, arrival: str | None) -> bool:
        """An untagged line while nothing is learned: True when it taught the prefix (its
        neighbour before has it too) or is held (the file's first line: the next one says)."""
        if self.replaying or not line.strip():
            return False
        if line[0] == "[" and _CORE.match(line) is not None:  # the hot path: a core line, no prefix
            self._settled = True
            return False
        previous, head = self._previous, self._head
        self._previous, self._head = line, None
        if line[0] in " \t":
            return False
        if known_start(line):
            self._settled = True  # known as it stands: this file has no prefix
            return False
        first = _SCHEDULER.match(line)
        if first is None or first.end() > _LONGEST:
            return False
        self._head = _DIGITS.sub("0", first.group().rstrip(" \t"))  # its blanks may be the line's own
        if previous is not None and head != self._head:
            return False
        key = line.translate(_ZEROS)
        if key in self._plain:  # the same line but for its digits (a progress print) taught nothing
            return False
        found = _cut(line, previous)
        if found is None:
            if len(self._plain) >= _PLAIN:
                self._plain.clear()
            self._plain.add(key)
            return False
        cut, shape = found
        if shape is None:
            self._held = ([(line, arrival)], line[:cut])
        self._shape = shape
        return True

    def release(self, line: str | None, arrival: str | None = None) -> list[Held]:
        """The held lines, now that ``line`` came (None: the input ended), to be read again
        with :attr:`replaying` set. The prefix is learned when ``line`` starts with it; a blank line
        waits with them (at most two)."""
        assert self._held is not None
        waiting, prefix = self._held
        if line is not None and not line.strip() and len(waiting) <= _BLANKS:
            waiting.append((line, arrival))
            return []
        self._held = None
        if line is not None:
            self._shape = _agreeing(prefix, line)
        return waiting

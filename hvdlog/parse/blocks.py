"""The declared multi-line grammar and the bounds of one document (``assets/blocks.json``).

hvdlog parse (:mod:`hvdlog.parse.native`) and Logstash (logstash/pipeline/horovod_native.rb)
read the same file, and ``python -m hvdlog.elastic.generate`` writes Filebeat's multiline
patterns from it, so the three agree by construction rather than by goldens alone.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, NamedTuple

from hvdlog.parse.bounded import TRUNCATED_TAG
from hvdlog.parse.patterns import CompiledPattern, compile_pattern
from hvdlog.parse.stalls import is_cut_header

__all__ = [
    "BLOCKS_FILE", "MAX_DOCUMENT_BYTES", "MAX_PIECES", "TRUNCATED_TAG", "Grammar", "Opener", "Rule", "Step", "bound", "cut_text",
    "filebeat_patterns", "grammar", "load_blocks", "segments", "walk",
]

#: The grammar, shipped inside the package; ``HVDLOG_BLOCKS`` points elsewhere.
BLOCKS_FILE: Final = Path(os.environ.get("HVDLOG_BLOCKS") or Path(__file__).resolve().parent / "assets" / "blocks.json")
_CUT_FIELDS: Final = ("message", "error.stack_trace", "error.message")


def load_blocks(path: Path = BLOCKS_FILE) -> dict[str, Any]:
    """The whole file, as JSON."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


_LIMITS: Final = load_blocks()["limits"]
#: A document's message (and stack trace, error message) is cut to this many bytes at a line end.
MAX_DOCUMENT_BYTES: Final[int] = int(_LIMITS["max_document_bytes"])
#: At most this many documents leave Logstash for one Filebeat event; the rest become one summary.
MAX_PIECES: Final[int] = int(_LIMITS["max_pieces"])


def cut_text(text: str, limit: int = MAX_DOCUMENT_BYTES) -> tuple[str, int, int]:
    """(the first whole lines of ``text`` within ``limit`` UTF-8 bytes -- its first ``limit``
    bytes when the first line is longer -- plus the cut mark, lines not kept whole, bytes cut);
    the same cut as horovod_native.rb's ``cut_text``."""
    data = text.encode("utf-8", "surrogateescape")
    head = data[: limit + 1].decode("utf-8", "ignore")
    stop = head.rfind("\n")
    kept = head[:stop] if stop > 0 else data[:limit].decode("utf-8", "ignore")
    rest = data[len(kept.encode("utf-8", "surrogateescape")):]
    lines = rest.count(b"\n") + (0 if rest.startswith(b"\n") else 1)
    return f"{kept}\n... [hvdlog: {lines} lines ({len(rest)} bytes) cut]", lines, len(rest)


def bound(fields: dict[str, Any], limit: int = MAX_DOCUMENT_BYTES) -> None:
    """Cut a document's long texts in place; the message's cut is counted (``hvdlog.truncated.*``)."""
    message = fields.get("message")
    if not isinstance(message, str) or len(message) * 4 <= limit:
        return  # the hot path (a character is at most 4 bytes); the other texts are parts of the message
    counted = None
    for name in _CUT_FIELDS:
        text = fields.get(name)
        if isinstance(text, str) and len(text.encode("utf-8", "surrogateescape")) > limit:
            fields[name], lines, cut = cut_text(text, limit)
            if name == "message":
                counted = (lines, cut)
    if counted is not None:
        fields["hvdlog.truncated.lines"], fields["hvdlog.truncated.bytes"] = counted
        fields["tags"] = [*fields.get("tags", []), TRUNCATED_TAG]


# --- the grammar --------------------------------------------------------------------------

#: (line, previous line of the block, blank lines held before it) -> whether a condition holds
Test = Callable[[str, str, bool], bool]


def _condition(spec: str | dict[str, Any]) -> Test:
    """One ``when`` entry of the file as a test."""
    if spec == "indented":
        return lambda line, previous, blank: line[:1] in (" ", "\t")
    if spec == "blank":
        return lambda line, previous, blank: not line.strip()
    if spec == "no_blank_before":
        return lambda line, previous, blank: not blank
    if isinstance(spec, dict) and "previous" in spec:
        before = compile_pattern(spec["previous"]).regex
        return lambda line, previous, blank: before.match(previous) is not None
    if isinstance(spec, dict) and "match" in spec:
        regex = compile_pattern(spec["match"]).regex
        if spec.get("lstrip"):  # old builds indent some stall entries
            return lambda line, previous, blank: regex.match(line.lstrip(" ")) is not None
        return lambda line, previous, blank: regex.match(line) is not None
    raise ValueError(f"{BLOCKS_FILE}: unknown condition {spec!r}")


@dataclass(frozen=True, slots=True)
class Rule:
    """A line that continues a block in some state: its name, conditions, next state, action."""

    name: str
    tests: tuple[Test, ...]
    then: str  # a state, or "hold" (a blank line kept only if the block goes on)
    action: str | None
    filebeat: bool  # False: only the previous line announces it, Filebeat's multiline cannot follow
    pattern: CompiledPattern | None  # the line's pattern, whose captures an action may take

    def holds(self, line: str, previous: str, blank_before: bool) -> bool:
        return all(test(line, previous, blank_before) for test in self.tests)


@dataclass(frozen=True, slots=True)
class Opener:
    """A line that opens a block: a cheap prefix/substring check, then the pattern or conditions."""

    name: str
    pattern: CompiledPattern | None
    prefix: str
    contains: str | None
    tests: tuple[Test, ...]
    state: str
    action: str | None

    def opens(self, line: str) -> bool:
        if not line.startswith(self.prefix):
            return False
        if self.contains is not None:  # the pattern matches from the marker on (text may come before it)
            at = line.find(self.contains)
            if at < 0 or self.pattern is None or self.pattern.regex.match(line[at:]) is None:
                return False
        elif self.pattern is not None and self.pattern.regex.match(line) is None:
            return False
        return all(test(line, "", False) for test in self.tests)


def _rule(row: dict[str, Any]) -> Rule:
    matched = [spec["match"] for spec in row["when"] if isinstance(spec, dict) and "match" in spec]
    pattern = compile_pattern(matched[0]) if matched else None
    return Rule(row["name"], tuple(map(_condition, row["when"])), row["then"], row.get("action"), row.get("filebeat", True), pattern)


def _opener(row: dict[str, Any]) -> Opener:
    pattern = compile_pattern(row["pattern"]) if "pattern" in row else None
    return Opener(row["name"], pattern, row.get("prefix", ""), row.get("contains"), tuple(map(_condition, row.get("when", []))),
                  row["state"], row.get("action"))


@dataclass(frozen=True, slots=True)
class Grammar:
    """blocks.json compiled: what opens a block, what continues it in each state, how a finished one is classified."""

    core_opens: tuple[Opener, ...]
    opens: tuple[Opener, ...]
    states: dict[str, tuple[Rule, ...]]
    classify: dict[str, tuple[tuple[CompiledPattern, dict[str, Any]], ...]]

    def opener(self, line: str) -> Opener | None:
        """The first opener of a line that is not a Horovod core line, or None."""
        for opener in self.opens:
            if opener.opens(line):
                return opener
        return None

    def opening(self, line: str) -> Opener | None:
        """The opener a line that is not a core line begins a block with, as both parsers take it:
        a ``legacy_stall`` line only when a whole stall header follows its marker (native.py
        ``_open``, horovod_native/blocks.rb ``opening``), else the line is a document of its own."""
        opener = self.opener(line)
        return opener if opener is not None and header_follows(opener, line) else None

    def step(self, state: str, line: str, previous: str, blank_before: bool) -> Rule | None:
        """The first rule of ``state`` that ``line`` satisfies (None: the block ends before it)."""
        for rule in self.states.get(state, ()):
            if rule.holds(line, previous, blank_before):
                return rule
        return None

    def classified(self, state: str, fields: dict[str, Any]) -> None:
        """A finished block's fields refined by the first ``classify`` row its error.message matches."""
        message = fields.get("error.message")
        for pattern, extra in self.classify.get(state, ()):
            captured = pattern.match(message) if isinstance(message, str) else None
            if captured is not None:
                fields.update({name: value for name, value in captured.items() if not name.startswith("@metadata.")})
                fields.update(extra)
                return


def header_follows(opener: Opener, line: str) -> bool:
    """False for a line of an opener with a ``contains`` marker (``legacy_stall``) whose text after
    the marker is no whole stall header (a `WARNING: One or more tensors` cut short); True for any
    other opener (horovod_native/blocks.rb ``header_follows?``)."""
    if opener.contains is None or opener.pattern is None:
        return True
    legacy = opener.pattern.match(line[line.find(opener.contains):])
    message = legacy.get("message") if legacy is not None else None
    return isinstance(message, str) and compile_pattern("HOROVOD_STALL_HEADER").match(message) is not None


@cache
def grammar(path: Path = BLOCKS_FILE) -> Grammar:
    """The compiled grammar of ``path`` (once per process)."""
    data = load_blocks(path)
    return Grammar(
        core_opens=tuple(map(_opener, data["core_opens"])),
        opens=tuple(map(_opener, data["opens"])),
        states={state: tuple(map(_rule, rows)) for state, rows in data["states"].items()},
        classify={state: tuple((compile_pattern(row["pattern"]), row["fields"]) for row in rows) for state, rows in data["classify"].items()},
    )


def _opener_of(rules: Grammar, core: CompiledPattern, line: str) -> Opener | None:
    """What ``line`` opens: on a core line, a ``core_opens`` of its message (a stall header a
    terminal wrapped opens the stall block too, as in native.py ``_core`` and horovod_native
    ``stall_header?``); else an ``opens``."""
    found = core.match(line) if line.startswith("[") else None
    if found is None:
        return rules.opening(line)
    message = found.get("message") or ""
    opener = next((opener for opener in rules.core_opens if opener.opens(message)), None)
    if opener is None and is_cut_header(message):
        opener = next((opener for opener in rules.core_opens if opener.action == "stall"), None)
    return opener


class Step(NamedTuple):
    """How the grammar takes one line of a stream (:func:`walk`)."""

    #: "open" (begins a block), "single" (a document of its own), "continue", "hold" (a blank line
    #: kept if the block goes on) or "skip" (a blank line between documents)
    kind: str
    name: str | None  # the opener ("open") or the state rule ("continue", "hold") that took the line
    state: str | None  # the open block's state before the line (None: no block was open)
    previous: str  # the open block's last line before this one ("" when none)
    blank_before: bool  # blank lines were held between the block's last line and this one


def walk(lines: list[str], *, filebeat_only: bool = False) -> Iterator[Step]:
    """How the grammar takes each of one stream's lines, in order. Lines are the rank's own
    text, without launcher prefixes; ``filebeat_only`` ends a block at a rule Filebeat's
    multiline cannot follow."""
    rules, core = grammar(), compile_pattern("HOROVOD_CORE_LINE")
    state: str | None = None
    last = -1
    for index, line in enumerate(lines):
        previous = lines[last] if state is not None else ""
        blank_before = state is not None and last + 1 < index
        rule = rules.step(state, line, previous, blank_before) if state is not None else None
        if rule is not None and (rule.filebeat or not filebeat_only):
            if rule.then == "hold":
                yield Step("hold", rule.name, state, previous, blank_before)
            else:
                yield Step("continue", rule.name, state, previous, blank_before)
                state, last = rule.then, index
            continue
        before, state = state, None
        if not line.strip():
            yield Step("skip", None, before, previous, blank_before)
            continue
        opener = _opener_of(rules, core, line)
        last = index
        if opener is None:
            yield Step("single", None, before, previous, blank_before)
        else:
            yield Step("open", opener.name, before, previous, blank_before)
            state = opener.state


def segments(lines: list[str], *, filebeat_only: bool = False) -> Iterator[tuple[str | None, int, int]]:
    """(name of the opener or None, first, last) of each document of one stream's lines as the
    grammar reads them (:func:`walk`; blank lines between documents are skipped; held blank
    lines at a block's end are not in it)."""
    current: list[Any] | None = None
    for index, step in enumerate(walk(lines, filebeat_only=filebeat_only)):
        if step.kind in ("open", "single"):
            if current is not None:
                yield current[0], current[1], current[2]
            current = [step.name, index, index]
        elif step.kind == "continue" and current is not None:
            current[2] = index
    if current is not None:
        yield current[0], current[1], current[2]


# --- Filebeat's multiline patterns ----------------------------------------------------------

_PIECE: Final = re.compile(r"%\{(\w+)\}")


def filebeat_patterns(path: Path = BLOCKS_FILE) -> tuple[str, ...]:
    """The multiline patterns of shipper/filebeat.yml's native input, in parser order: the
    `match: after` one, then each `match: before` stage (a stage sees the events the one
    before it joined)."""
    spec = load_blocks(path)["filebeat"]
    rows = spec["after"]["continues"]
    # behind a prefix no list names, only what no print starts with: a row's `behind_prefix`
    # (null: nothing), else its own regex
    behind = [row.get("behind_prefix", row["regex"]) for row in rows]
    pieces = {**spec["pieces"], "CONTINUES": "|".join(row["regex"] for row in rows),
              "BEHIND_PREFIX": "|".join(regex for regex in behind if regex is not None)}

    def expand(template: str) -> str:
        while _PIECE.search(template):
            template = _PIECE.sub(lambda found: pieces[found[1]], template)
        return template

    return expand(spec["after"]["template"]), *(expand(stage["template"]) for stage in spec["before"])

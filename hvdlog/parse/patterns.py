"""The grok pattern file, translated into Python regexes: one source of patterns.

Logstash loads ``hvdlog/parse/assets/patterns/horovod`` through ``patterns_dir``; ``hvdlog parse``
loads the same file and expands ``%{NAME:[field][path]:type}`` references into named
groups, so a pattern changes in one place. The file keeps to a subset that translates
cleanly (see its header); anything else fails here with the pattern's name. Each definition
carries its own samples and near-misses as comments above it (:func:`load_samples`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

__all__ = [
    "PATTERN_FILE",
    "Capture",
    "CompiledPattern",
    "PatternError",
    "PatternSamples",
    "any_of",
    "compile_pattern",
    "field_path",
    "load_definitions",
    "load_samples",
]

#: The pattern file, shipped inside the package (Logstash mounts the same folder);
#: ``HVDLOG_PATTERNS`` points elsewhere.
PATTERN_FILE: Final = Path(os.environ.get("HVDLOG_PATTERNS") or Path(__file__).resolve().parent / "assets" / "patterns" / "horovod")

_REFERENCE: Final = re.compile(r"%\{(?P<name>\w+)(?::(?P<field>[^:}]+))?(?::(?P<type>int|float))?\}")
_DEFINITION: Final = re.compile(r"^\s*(?P<name>[A-Za-z0-9_]+)\s+(?P<pattern>.*\S)$")
_FIELD_REF: Final = re.compile(r"\[([^\[\]]+)\]")
_CONVERT: Final[dict[str | None, Callable[[str], Any]]] = {None: str, "int": int, "float": float}
_NAMED: Final = re.compile(r"\(\?P<\w+>")
_EXAMPLE: Final = re.compile(r"^#(?P<kind>[+-])(?: (?P<text>.*))?$")


class PatternError(ValueError):
    """The pattern file is missing, malformed, or uses what the translator cannot express."""


@dataclass(frozen=True, slots=True)
class Capture:
    """One named group: the grok field it fills and the type it converts to."""

    group: str
    field: str
    convert: Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    """A pattern expanded to a Python regex, with its captures in order."""

    name: str
    regex: re.Pattern[str]
    captures: tuple[Capture, ...]
    repeated: frozenset[str] = frozenset()  # fields captured by more than one group

    def match(self, text: str) -> dict[str, Any] | None:
        """Captured fields (grok field refs as keys) when the pattern matches at the start."""
        found = self.regex.match(text)
        return None if found is None else self.fields_of(found)

    def search(self, text: str) -> dict[str, Any] | None:
        """Like :meth:`match`, anywhere in ``text``."""
        found = self.regex.search(text)
        return None if found is None else self.fields_of(found)

    def finditer(self, text: str) -> Iterator[dict[str, Any]]:
        """Every non-overlapping match's captures."""
        for found in self.regex.finditer(text):
            yield self.fields_of(found)

    def fields_of(self, found: re.Match[str]) -> dict[str, Any]:
        """The captured fields of a match of :attr:`regex`."""
        # Like grok in Elasticsearch and Logstash: a field captured by several groups that
        # all matched becomes a list, in pattern order.
        fields: dict[str, Any] = {}
        groups = found.groupdict()
        for capture in self.captures:
            value = groups[capture.group]
            if value is None:
                continue
            value = capture.convert(value)
            if capture.field not in fields:
                fields[capture.field] = value
            elif isinstance(previous := fields[capture.field], list) and capture.field in self.repeated:
                previous.append(value)
            else:
                fields[capture.field] = [previous, value]
        return fields


def any_of(sources: Iterable[str], flags: int = 0) -> re.Pattern[str]:
    """One regex that matches where any of the regex ``sources`` does, their named groups made
    plain (two sources may name the same capture): one search instead of one per pattern."""
    return re.compile("|".join(f"(?:{_NAMED.sub('(?:', source)})" for source in sources), flags)


def field_path(reference: str) -> str:
    """``[log][origin][file][line]`` -> ``log.origin.file.line`` (a bare name stays as is)."""
    parts = _FIELD_REF.findall(reference)
    return ".".join(parts) if parts else reference


@cache
def load_definitions(path: Path = PATTERN_FILE) -> dict[str, str]:
    """``NAME -> pattern`` from a grok pattern file (comments and blank lines skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise PatternError(f"cannot read the grok pattern file {path}: {error.strerror}; set HVDLOG_PATTERNS") from error
    definitions: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line != line.rstrip():
            # Logstash's loader keeps trailing blanks as part of the pattern, other loaders
            # strip them: ambiguous, so refused (write a trailing space as [ ]).
            raise PatternError(f"{path}:{number}: trailing blank after the pattern; write a trailing space as [ ]")
        found = _DEFINITION.match(line)
        if not found:
            raise PatternError(f"{path}:{number}: expected `NAME pattern`, got {line!r}")
        definitions[found["name"]] = found["pattern"]
    return definitions


@dataclass(frozen=True, slots=True)
class PatternSamples:
    """A definition's own examples: texts it must match (``#+``) and near-misses it must not (``#-``)."""

    samples: tuple[str, ...] = ()
    misses: tuple[str, ...] = ()


def load_samples(path: Path = PATTERN_FILE) -> dict[str, PatternSamples]:
    """``NAME -> its samples`` for every definition of a grok pattern file (none: empty).

    The examples are comment lines right above their definition, so grok (which skips every
    line starting with ``#``) reads the file unchanged: ``#+ "text"`` must match, ``#- "text"``
    must not, each text one JSON string (escapes for tabs, colour codes, line breaks)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise PatternError(f"cannot read the grok pattern file {path}: {error.strerror}; set HVDLOG_PATTERNS") from error
    found: dict[str, PatternSamples] = {}
    pending: dict[str, list[str]] = {"+": [], "-": []}
    first = 0  # the line of the first pending example
    for number, line in enumerate(lines, 1):
        if line.startswith(("#+", "#-")):
            example = _EXAMPLE.match(line)
            text = _json_string(example["text"]) if example and example["text"] is not None else None
            if example is None or text is None:
                raise PatternError(f"{path}:{number}: a sample line is `#+ \"text\"` or `#- \"text\"` (one JSON string), got {line!r}")
            first = first or number
            pending[example["kind"]].append(text)
            continue
        definition = None if line.lstrip().startswith("#") else _DEFINITION.match(line)
        if any(pending.values()) and definition is None:
            raise PatternError(f"{path}:{first}: samples must sit right above the definition they belong to, not above line {number}")
        if definition is not None:
            found[definition["name"]] = PatternSamples(tuple(pending["+"]), tuple(pending["-"]))
            pending, first = {"+": [], "-": []}, 0
    if any(pending.values()):
        raise PatternError(f"{path}:{first}: samples at the end of the file belong to no definition")
    return found


def _json_string(text: str) -> str | None:
    """``text`` read as one JSON string (None when it is not one)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


@cache
def compile_pattern(name: str, path: Path = PATTERN_FILE) -> CompiledPattern:
    """The named pattern, expanded and compiled (cached: compile once, match often)."""
    definitions = load_definitions(path)
    captures: list[Capture] = []

    def expand(pattern_name: str, seen: tuple[str, ...]) -> str:
        if pattern_name not in definitions:
            raise PatternError(f"{path}: pattern {seen[-1] if seen else name} references unknown %{{{pattern_name}}}")
        if pattern_name in seen:
            raise PatternError(f"{path}: pattern {pattern_name} refers to itself through {' -> '.join(seen)}")
        source = definitions[pattern_name]
        if "(?<" in source.replace("(?<=", "").replace("(?<!", "") or "(?m)" in source:
            raise PatternError(f"{path}: {pattern_name} uses a raw named group or inline flag; capture with %{{NAME:[field]}}")

        def replace(found: re.Match[str]) -> str:
            inner = expand(found["name"], (*seen, pattern_name))
            if found["field"] is None:
                return f"(?:{inner})"
            group = f"g{len(captures)}"
            captures.append(Capture(group, field_path(found["field"]), _CONVERT[found["type"]]))
            return f"(?P<{group}>{inner})"

        return _REFERENCE.sub(replace, source)

    source = expand(name, ())
    try:
        # As Logstash's grok compiles: Ruby's Regexp::MULTILINE is Python's DOTALL, and Ruby's
        # ^/$ always match at line boundaries (MULTILINE here). ASCII: Joni's \d, \w and \s
        # (Ruby syntax) do not match non-ASCII characters.
        regex = re.compile(source, re.ASCII | re.DOTALL | re.MULTILINE)
    except re.error as error:
        raise PatternError(f"{path}: pattern {name} does not compile in Python: {error}") from error
    fields = [capture.field for capture in captures]
    repeated = frozenset(field for field in fields if fields.count(field) > 1)
    return CompiledPattern(name, regex, tuple(captures), repeated)

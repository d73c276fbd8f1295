"""The message table: single-line messages declared once, for `hvdlog parse` and Logstash.

``hvdlog/parse/assets/messages.json`` lists, in order, a pattern of the grok pattern file
and the fields a line it matches gets (constants, or values mapped from a capture).
logstash/pipeline/horovod_native.rb reads the same file, so a new one-line message is one
pattern, one row and one corpus case (recipe in CONTRIBUTING.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from hvdlog.fields import LAUNCHER_DATASET, LEVELS
from hvdlog.parse.families import kept
from hvdlog.parse.patterns import CompiledPattern, PatternError, compile_pattern

__all__ = ["LEVELS_MAP", "MESSAGES_FILE", "Message", "box_fields", "level_words", "load_messages", "read_table", "recognise", "signal_names"]

#: The table, shipped inside the package; ``HVDLOG_MESSAGES`` points elsewhere.
MESSAGES_FILE: Final = Path(os.environ.get("HVDLOG_MESSAGES") or Path(__file__).resolve().parent / "assets" / "messages.json")
DEFAULT_DATASET: Final = LAUNCHER_DATASET
_METADATA: Final = "@metadata."
#: A field spec's ``map`` that names the table's one map of level words instead of a map of its own.
LEVELS_MAP: Final = "levels"
#: Levels in increasing severity, to pick a box's most severe line.
_SEVERITY: Final = LEVELS


@dataclass(frozen=True, slots=True)
class Message:
    """One row: a pattern and how its captures become a document's fields."""

    pattern: CompiledPattern
    dataset: str
    fields: tuple[tuple[str, Any], ...]
    #: A field the line's source must not give (``lacks: rank``: a launcher's line read in a rank's own
    #: file or behind its tag is that rank's print, never the launcher's verdict about another rank).
    lacks: str | None = None
    #: The safety net (the last rows): a line no other row knows, with the shape of a crash report or a failure.
    net: bool = False

    def fields_of(self, line: str, base: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The document fields for ``line`` (message = the line), or None if it does not match."""
        if self.lacks is not None and base is not None and base.get(self.lacks) is not None:
            return None
        captured = self.pattern.match(line)
        if captured is None:
            return None
        fields = {name: value for name, value in captured.items() if not name.startswith(_METADATA)}
        for name, spec in self.fields:
            if not isinstance(spec, dict):
                fields[name] = spec
                continue
            source = captured.get(spec["from"])
            value = spec["map"].get(str(source), spec.get("default")) if source is not None else spec.get("default")
            if value is not None:
                fields[name] = value
        fields["message"] = line
        fields["event.dataset"] = self.dataset
        fields.setdefault("log.level", "info")
        return fields


def _row(row: dict[str, Any], path: Path) -> Message:
    name = row.get("pattern")
    if not isinstance(name, str):
        raise PatternError(f"{path}: a row without a pattern name: {row!r}")
    pattern = compile_pattern(name)
    if not pattern.regex.pattern.startswith(("\\A", "^")):
        raise PatternError(f"{path}: {name} must be anchored with \\A (Logstash searches, Python matches)")
    fields = dict(row.get("fields", {}))
    for field, spec in fields.items():
        if isinstance(spec, dict) and not ({"from", "map"} <= set(spec) <= {"from", "map", "default"}):
            raise PatternError(f"{path}: {name}: field {field} must be a value or {{from, map[, default]}}")
        if isinstance(spec, dict) and spec["map"] == LEVELS_MAP:
            fields[field] = {**spec, "map": level_words(path)}
        elif isinstance(spec, dict) and not isinstance(spec["map"], dict):
            raise PatternError(f"{path}: {name}: field {field}: map must be an object or {LEVELS_MAP!r}")
    return Message(pattern, row.get("dataset", DEFAULT_DATASET), tuple(fields.items()), row.get("lacks"), bool(row.get("net", False)))


def read_table(path: Path = MESSAGES_FILE) -> dict[str, Any]:
    """The table file as JSON (its ``messages`` rows, and the ``evidence`` rules of hvdlog.parse.evidence_rules)."""
    try:
        table: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PatternError(f"cannot read the message table {path}: {error}; set HVDLOG_MESSAGES") from error
    return table


@cache
def level_words(path: Path = MESSAGES_FILE) -> dict[str, str]:
    """The level words loggers print -> ``log.level`` (the table's ``levels``, written once for
    Horovod's core letters, every row and the ruby filter)."""
    words = read_table(path).get(LEVELS_MAP)
    if not isinstance(words, dict) or not words:
        raise PatternError(f"{path}: the table has no {LEVELS_MAP!r} map of level words")
    return {str(word): str(level) for word, level in words.items()}


@cache
def load_messages(path: Path = MESSAGES_FILE) -> tuple[Message, ...]:
    """The table's rows, compiled (cached)."""
    return tuple(_row(dict(row), Path(path)) for row in kept(read_table(path)["messages"]))


def recognise(line: str, base: Mapping[str, Any] | None = None, *, net: bool = True) -> dict[str, Any] | None:
    """The fields of the first table row ``line`` matches, or None (``base``: what the line's
    file and launcher tag say, for rows that apply only where it lacks a field; ``net=False``: the
    safety net's rows aside, for repairs that ask whether a line is a message the table knows)."""
    for message in load_messages():
        if message.net and not net:
            continue
        fields = message.fields_of(line, base)
        if fields is not None:
            return fields
    return None


def box_fields(lines: list[str], base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A framed box's fields (Open MPI's help box, one document): those the table gives its most
    severe line (the first among equals; info when no line has a row), its message the whole box.
    A box's verdict is in one of its lines, which a Filebeat event may also carry alone: read
    line by line, both paths give the box's failure the level its line gives."""
    best: dict[str, Any] | None = None
    for line in lines:
        found = recognise(line, base)
        if found is not None and (best is None or _SEVERITY.index(found["log.level"]) > _SEVERITY.index(best["log.level"])):
            best = found
    return {**(best or {"log.level": "info", "event.dataset": LAUNCHER_DATASET}), "message": "\n".join(lines)}


#: The row whose event.reason map names signal numbers (mpirun's `exited on signal N`).
SIGNAL_ROW: Final = "HOROVOD_MPIRUN_SIGNAL"


def signal_names() -> dict[str, str]:
    """Signal number (as text) -> name, from the table (Hydra's box uses it too)."""
    for row in read_table()["messages"]:  # the whole table: the names hold whatever family is switched off
        if row.get("pattern") == SIGNAL_ROW:
            return dict(row["fields"]["event.reason"]["map"])
    raise PatternError(f"{MESSAGES_FILE}: the table has no {SIGNAL_ROW} row with an event.reason map")

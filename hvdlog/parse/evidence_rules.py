"""Failure evidence, classified once at parse time: ``hvdlog.evidence.kind``/``.rank``/``.source``.

The rules are the ``evidence`` list of the message table (hvdlog/parse/assets/messages.json),
which logstash/pipeline/horovod_native.rb applies the same way, so files and Elasticsearch
documents carry the same fields. A rule names a pattern of the grok pattern file searched in
the finished document's ``message`` (a line, a whole traceback or box), field values it
needs (``when``), a field it needs (``has``) or must not have (``lacks``), and where the rank the evidence is *about* is
(``rank``: a capture of the pattern, or a field of the document). Rules look only at
documents of level warning or above, unless the rule says ``any_level`` (launcher lines
that stay info, such as Open MPI's box): most lines are never searched. The first rule that
matches wins; a document no rule matches is no evidence. The failure model that reads these
fields is hvdlog.analyses.failures (docs/failure-model.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from hvdlog.documents import get_field
from hvdlog.fields import EVIDENCE_KINDS, EVIDENCE_SOURCES
from hvdlog.parse.families import kept
from hvdlog.parse.messages import MESSAGES_FILE, read_table
from hvdlog.parse.patterns import CompiledPattern, PatternError, any_of, compile_pattern

__all__ = ["KIND", "RANK", "SOURCE", "EvidenceRule", "classify", "evidence_fields", "evidence_rules"]

KIND: Final = "hvdlog.evidence.kind"
RANK: Final = "hvdlog.evidence.rank"
SOURCE: Final = "hvdlog.evidence.source"
#: The levels every rule looks at; a rule with ``any_level`` also looks at info and below.
_SEVERE: Final = frozenset({"warning", "error", "critical"})


@dataclass(frozen=True, slots=True)
class EvidenceRule:
    """One row of the table's ``evidence`` list."""

    kind: str
    source: str
    pattern: CompiledPattern | None
    when: tuple[tuple[str, tuple[Any, ...]], ...]
    has: str | None
    rank: str | None
    #: False (the default): only documents at warning or above; True: any level (launcher lines kept as info).
    any_level: bool = False
    #: A field the document must not have: a launcher's verdict is the launcher's line, never a rank's
    #: print of one (``lacks: rank``; a rank printing ``Process 2 exit with status code 137.`` blames nobody).
    lacks: str | None = None

    def fields_of(self, doc: Mapping[str, Any]) -> dict[str, Any] | None:
        """The evidence fields for ``doc`` (flat or nested), or None when the rule does not apply."""
        return self.match(doc, _Fields(doc))

    def match(self, doc: Mapping[str, Any], read: Mapping[str, Any]) -> dict[str, Any] | None:
        """:meth:`fields_of` with ``doc``'s fields read through ``read`` (dotted name -> value,
        None when absent), which one document's rules share: each field is looked up once."""
        if not self.any_level and read["log.level"] not in _SEVERE:
            return None
        if self.has is not None and read[self.has] is None:
            return None
        if self.lacks is not None and read[self.lacks] is not None:
            return None
        for name, values in self.when:
            if read[name] not in values:
                return None
        captured: dict[str, Any] = {}
        if self.pattern is not None:
            message = doc.get("message")
            found = self.pattern.search(message) if isinstance(message, str) else None
            if found is None:
                return None
            captured = found
        fields: dict[str, Any] = {KIND: self.kind, SOURCE: self.source}
        if self.rank is not None:
            rank = captured.get(self.rank, read[self.rank])
            if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0:
                fields[RANK] = rank
        return fields


class _Fields(dict[str, Any]):
    """One document's dotted fields, each read once, on first use."""

    __slots__ = ("_doc",)

    def __init__(self, doc: Mapping[str, Any]) -> None:
        super().__init__()
        self._doc = doc

    def __missing__(self, name: str) -> Any:
        value = self[name] = get_field(self._doc, name)
        return value


def _rule(row: Mapping[str, Any], path: Path) -> EvidenceRule:
    kind, source = row.get("kind"), row.get("source")
    if kind not in EVIDENCE_KINDS or source not in EVIDENCE_SOURCES:
        raise PatternError(f"{path}: evidence rule {dict(row)!r}: kind must be one of {EVIDENCE_KINDS}, source one of {EVIDENCE_SOURCES}")
    if not ({"pattern", "when", "has"} & set(row)):
        raise PatternError(f"{path}: evidence rule {dict(row)!r} has no condition (pattern, when or has)")
    name = row.get("pattern")
    when = tuple((field, tuple(values)) for field, values in row.get("when", {}).items())
    pattern = compile_pattern(name) if name else None
    return EvidenceRule(kind, source, pattern, when, row.get("has"), row.get("rank"), bool(row.get("any_level", False)), row.get("lacks"))


@cache
def evidence_rules(path: Path = MESSAGES_FILE) -> tuple[EvidenceRule, ...]:
    """The table's evidence rules, compiled (cached)."""
    return tuple(_rule(row, Path(path)) for row in kept(read_table(path).get("evidence", ())))


@cache
def _any_level_rules(path: Path = MESSAGES_FILE) -> tuple[EvidenceRule, ...]:
    return tuple(rule for rule in evidence_rules(path) if rule.any_level)


@cache
def _any_level_gate(path: Path = MESSAGES_FILE) -> re.Pattern[str] | None:
    """One regex that finds a message any any-level rule's pattern finds (captures dropped):
    an info line -- nearly every line -- is searched once, not once per rule. None when a
    rule has no pattern or the patterns' flags differ (each rule is then tried)."""
    rules = _any_level_rules(path)
    patterns = [rule.pattern.regex for rule in rules if rule.pattern is not None]
    if len(patterns) != len(rules) or len({pattern.flags for pattern in patterns}) > 1 or any("(?P=" in p.pattern for p in patterns):
        return None
    return any_of((pattern.pattern for pattern in patterns), patterns[0].flags) if patterns else None


def evidence_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence fields the first matching rule gives ``doc`` (empty: no evidence)."""
    read = _Fields(doc)
    if read["log.level"] in _SEVERE:
        rules = evidence_rules()
    else:
        gate, message = _any_level_gate(), doc.get("message")
        if gate is not None and isinstance(message, str) and gate.search(message) is None:
            return {}
        rules = _any_level_rules()
    for rule in rules:
        fields = rule.match(doc, read)
        if fields is not None:
            return fields
    return {}


def classify(flat: dict[str, Any]) -> dict[str, Any]:
    """``flat`` (dotted keys) with its evidence fields added (when a rule matches)."""
    flat.update(evidence_fields(flat))
    return flat

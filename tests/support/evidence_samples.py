"""The evidence rules' own examples (hvdlog/parse/assets/messages.json, each ``evidence`` row's
``samples``: finished documents it must classify before any earlier rule, and ``misses``:
near-miss documents it must not match), as cases that hvdlog's rules (hvdlog/parse/evidence_rules.py)
and the ruby filter's (logstash/pipeline/horovod_native/evidence_rules.rb) answer alike.

An example is a document as hvdlog parse leaves it, in dotted fields; a sample's
``hvdlog.evidence.rank`` is the rank the rule must give it (absent: none), so a rule that reads
the wrong capture or field fails too. Evidence fields are never an input of the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from hvdlog.parse.evidence_rules import KIND, RANK, SOURCE, evidence_fields, evidence_rules
from hvdlog.parse.messages import MESSAGES_FILE, read_table

__all__ = ["EvidenceCase", "cases", "python_answer", "unexampled", "wrong_answers"]


class EvidenceCase(NamedTuple):
    """One example of one evidence row."""

    row: int
    kind: str
    source: str
    doc: dict[str, Any]  # the document's dotted fields, without the expected rank
    rank: int | None  # a sample's expected evidence rank
    sample: bool


def _rows(path: Path) -> list[dict[str, Any]]:
    return list(read_table(path).get("evidence", ()))


def cases(path: Path = MESSAGES_FILE) -> list[EvidenceCase]:
    """Every sample and miss of every evidence row, in table order."""
    found = []
    for index, row in enumerate(_rows(path)):
        for sample, key in ((True, "samples"), (False, "misses")):
            for item in row.get(key, []):
                if not isinstance(item, dict) or not isinstance(item.get("message"), str):
                    raise ValueError(f"evidence row {index} ({row['kind']}): an example is a document with a message, not {item!r:.80}")
                if any(name in item for name in (KIND, SOURCE)) or (not sample and RANK in item):
                    raise ValueError(f"evidence row {index} ({row['kind']}): an example gives no evidence fields but a sample's {RANK}")
                doc = {name: value for name, value in item.items() if name != RANK}
                found.append(EvidenceCase(index, row["kind"], row["source"], doc, item.get(RANK), sample))
    return found


def unexampled(path: Path = MESSAGES_FILE) -> list[str]:
    """The rows without a sample or without a near-miss, one sentence each (every rule has a
    condition, so a near-miss always exists)."""
    problems = []
    for index, row in enumerate(_rows(path)):
        for key, what in (("samples", "what the rule must classify"), ("misses", "what the rule must not match")):
            if not row.get(key):
                problems.append(f"evidence row {index} ({row['kind']}, {row.get('pattern') or row.get('when') or row.get('has')}): no {key} ({what})")
    return problems


def python_answer(case: EvidenceCase) -> dict[str, Any]:
    """How hvdlog's rules take a case: the first rule that matches (``first``), whether its own
    rule does (``own``), and the evidence fields ``evidence_fields`` gives the document."""
    rules = evidence_rules()
    first = next((index for index, rule in enumerate(rules) if rule.fields_of(case.doc) is not None), None)
    return {"first": first, "own": rules[case.row].fields_of(case.doc) is not None, "fields": evidence_fields(case.doc)}


def _shown(message: str) -> str:
    """A message's first line that is not a box's rule line, cut to 70 characters."""
    return next((line for line in message.splitlines() if line.strip(" -=")), message)[:70]


def wrong_answers(all_cases: Sequence[EvidenceCase], answers: Sequence[dict[str, Any]], engine: str) -> list[str]:
    """The cases an engine answered wrong, each as a sentence naming the row."""
    assert len(answers) == len(all_cases) > 0
    wrong = []
    for case, answer in zip(all_cases, answers, strict=True):
        said = f"{engine}: evidence row {case.row} ({case.kind}) {'sample' if case.sample else 'near-miss'} {_shown(case.doc['message'])!r}"
        if not case.sample:
            if answer["own"]:
                wrong.append(f"{said} matches it")
            continue
        if answer["first"] != case.row:
            wrong.append(f"{said} is taken by row {answer['first']}, not its own")
            continue
        expected = {KIND: case.kind, SOURCE: case.source} | ({RANK: case.rank} if case.rank is not None else {})
        if answer["fields"] != expected:
            wrong.append(f"{said} gets {answer['fields']}, not {expected}")
    return wrong

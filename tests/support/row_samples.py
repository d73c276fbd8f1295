"""The message table's own examples (hvdlog/parse/assets/messages.json: each row's ``samples``,
lines it must match before any earlier row, and ``misses``, near-misses it must not match), as
cases that the Python rows and the ruby filter's rows answer alike (lnav's format-file check)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from hvdlog.parse.messages import read_table

__all__ = ["SampleCase", "cases", "wrong_answers"]


class SampleCase(NamedTuple):
    """One line of a row: a sample (``first`` = the row's index) or a miss (``first`` = None:
    the row must not match; another row may)."""

    row: int
    pattern: str
    line: str
    given: dict[str, Any]
    sample: bool


def cases() -> list[SampleCase]:
    """Every sample and miss of every row, in table order."""
    found = []
    for index, row in enumerate(read_table()["messages"]):
        for item in row.get("samples", []):
            line, given = (item, {}) if isinstance(item, str) else (item["line"], item.get("given", {}))
            found.append(SampleCase(index, row["pattern"], line, given, True))
        found.extend(SampleCase(index, row["pattern"], line, {}, False) for line in row.get("misses", []))
    return found


def wrong_answers(answers: Sequence[tuple[int | None, bool]]) -> list[str]:
    """For each case, (the first row that takes the line, whether the case's own row matches it):
    the cases answered wrong, each as a sentence naming the row."""
    wrong = []
    for case, (first, own) in zip(cases(), answers, strict=True):
        if case.sample and first != case.row:
            wrong.append(f"{case.pattern}: sample {case.line!r} is taken by row {first}, not its own row {case.row}")
        if not case.sample and own:
            wrong.append(f"{case.pattern}: near-miss {case.line!r} matches it")
    return wrong

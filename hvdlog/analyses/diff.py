"""What changed in a bad run: the message templates that are new in it, or much more frequent, than in a good run.

Both runs' lines become templates (:mod:`hvdlog.analyses.templates`, with both jobs' host
names as ``<HOST>``), so a line that differs only in numbers, paths or hosts is never new.
A template is **new** when the good run never printed it, **more frequent** when its share of
the bad run's events is at least :data:`RATIO` times its share of the good run's and it
occurs :data:`MIN_EXTRA` more times. Ranked: the template of the bad run's first failure
(:mod:`hvdlog.analyses.failures`' culprit line) first, then by level (critical first), new
before more frequent, and first time (untimed lines keep their read order, which can put a
traceback after the launcher's lines it caused: hence the failure model's word first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.analyses.summary import one_line
from hvdlog.analyses.templates import canonical
from hvdlog.documents import Document, get_field, sort_key
from hvdlog.fields import LEVELS

__all__ = ["MIN_EXTRA", "RATIO", "Changed", "diff", "script_stem"]

RATIO: Final = 4.0
MIN_EXTRA: Final = 3
_SUFFIX: Final = re.compile(r"[-_.]\d[\w.-]*$")


def script_stem(job: str) -> str:
    """``train`` of ``train-20261129-1547`` (hvdlog's default job id is ``<script stem>-<date>-<id>``)."""
    return _SUFFIX.sub("", job) or job


@dataclass
class Changed:
    """One template that is new or more frequent in the bad run."""

    template: str
    level: str
    count: int
    good_count: int
    new: bool
    first: Any = None
    first_step: int | None = None
    ranks: list[int] = field(default_factory=list)
    example: str = ""
    #: The template of the bad run's first failure (its culprit's line).
    first_failure: bool = False

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


@dataclass
class _Tally:
    count: int = 0
    level: int = 0
    first: Document | None = None
    #: Position of the first occurrence in time order (untimed lines keep their read order).
    order: int = 0
    ranks: set[int] = field(default_factory=set)


def _level(doc: Document) -> int:
    level = get_field(doc, "log.level")
    return LEVELS.index(level) if level in LEVELS else LEVELS.index("info")


def _tally(docs: Iterable[Document], hosts: frozenset[str]) -> tuple[dict[str, _Tally], int]:
    tallies: dict[str, _Tally] = {}
    total = 0
    for doc in sorted(docs, key=sort_key):
        total += 1
        tally = tallies.setdefault(canonical(one_line(doc), hosts).text, _Tally())
        tally.count += 1
        tally.level = max(tally.level, _level(doc))
        if tally.first is None:
            tally.first, tally.order = doc, total
        if isinstance(rank := doc.get("rank"), int):
            tally.ranks.add(rank)
    return tallies, total


def _culprit_template(docs: list[Document], hosts: frozenset[str]) -> str | None:
    """The template of the first failure's culprit line, when the failure model names one."""
    from hvdlog.analyses.failures import first_failure

    reports = first_failure(docs)
    if not reports or reports[0].culprit is None or not reports[0].primary:
        return None
    return canonical(reports[0].culprit.get("message"), hosts).text


def diff(bad: list[Document], good: list[Document]) -> list[Changed]:
    """The templates new in ``bad`` or much more frequent there than in ``good``, ranked."""
    hosts = frozenset(str(name) for doc in (*bad, *good) if (name := get_field(doc, "host.name")))
    in_bad, bad_total = _tally(bad, hosts)
    in_good, good_total = _tally(good, hosts)
    changed = []
    for text, tally in in_bad.items():
        before = in_good.get(text)
        count_good = before.count if before else 0
        if count_good and not (tally.count / max(bad_total, 1) >= RATIO * count_good / max(good_total, 1)
                               and tally.count >= count_good + MIN_EXTRA):
            continue
        first = tally.first or {}
        step = first.get("step")
        changed.append(Changed(text, LEVELS[tally.level], tally.count, count_good, not count_good, first.get("@timestamp"),
                               step if isinstance(step, int) else None, sorted(tally.ranks), one_line(first)))
    culprit = _culprit_template(bad, hosts)
    for item in changed:
        item.first_failure = item.template == culprit
    changed.sort(key=lambda item: (not item.first_failure, -LEVELS.index(item.level), not item.new, in_bad[item.template].order))
    return changed

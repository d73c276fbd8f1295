"""Rule families: the format each row of the message table belongs to, and a switch that turns one off.

A row of hvdlog/parse/assets/messages.json (a message or an evidence rule) may name its
``family`` (``signal``, ``openmpi``, ``horovodrun``, ``exception``, ...). Switching a family
off (``HVDLOG_WITHOUT_FAMILIES=signal,openmpi``, or :func:`without_families` in a test) drops
its rows, so a log in that format reads as one in a format hvdlog does not know: the
leave-one-family-out test shows that the safety net, not the specific rules, keeps the failure
visible (issue 41). Nothing else sets it; a user never needs to.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

__all__ = ["FAMILIES_ENV", "kept", "switched_off", "without_families"]

FAMILIES_ENV: Final = "HVDLOG_WITHOUT_FAMILIES"


def switched_off() -> frozenset[str]:
    """The families switched off (none, unless the test hook says so)."""
    return frozenset(name.strip() for name in os.environ.get(FAMILIES_ENV, "").split(",") if name.strip())


def kept(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` without those of a family switched off."""
    off = switched_off()
    return [row for row in rows if row.get("family") not in off]


def _clear_caches() -> None:
    # the tables are compiled once and cached: a switch must reach every cache built from them
    from hvdlog.parse import evidence_rules, messages  # they import this module

    messages.load_messages.cache_clear()
    evidence_rules.evidence_rules.cache_clear()
    evidence_rules._any_level_rules.cache_clear()
    evidence_rules._any_level_gate.cache_clear()


@contextmanager
def without_families(*names: str) -> Iterator[None]:
    """The test hook: parse and analyse with the rows of ``names`` switched off."""
    before = os.environ.get(FAMILIES_ENV)
    os.environ[FAMILIES_ENV] = ",".join(names)
    _clear_caches()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(FAMILIES_ENV, None)
        else:
            os.environ[FAMILIES_ENV] = before
        _clear_caches()

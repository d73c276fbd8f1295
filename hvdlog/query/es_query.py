"""Translate a :class:`~hvdlog.query.spec.Filter` into an Elasticsearch bool query.

The query must select a *superset* of what :meth:`Filter.matches` accepts (the source then
re-checks each hit), and be tight enough to be fast. Everything but PATTERN translates
exactly. PATTERN is a substring of an analysed ``text`` field, which Elasticsearch only
knows as lower-cased tokens, so each ASCII word run of the pattern becomes a clause that any
message containing the pattern must satisfy: a ``term`` for a run that stands alone between
spaces inside the pattern (the standard tokenizer always emits it as one token), otherwise
a ``wildcard *run*`` (the token that contains the run). Regular expressions get no clause.
"""

from __future__ import annotations

import re
from typing import Any, Final

from hvdlog.fields import LEVELS
from hvdlog.query.spec import PATTERN_FIELDS, Condition, Filter, RankSet

__all__ = ["SORT", "pattern_clauses", "to_query"]

#: Sort of every search: the order :func:`hvdlog.documents.sort_key` defines.
SORT: Final = [
    {"@timestamp": {"order": "asc", "missing": "_first", "unmapped_type": "date"}},
    {"rank": {"order": "asc", "missing": "_first", "unmapped_type": "integer"}},
]

_WORD_RUN: Final = re.compile(r"[A-Za-z0-9_]+")
#: Longer runs may be cut by the tokenizer (max_token_length 255): leave them to the re-check.
_MAX_RUN: Final = 200


def _level_clause(minimum: str) -> dict[str, Any]:
    """``log.level`` at least ``minimum``; unknown or missing levels count as info."""
    wanted = list(LEVELS[LEVELS.index(minimum) :])
    clause: dict[str, Any] = {"terms": {"log.level": wanted}}
    if "info" not in wanted:
        return clause
    unknown = {"bool": {"must_not": [{"terms": {"log.level": list(LEVELS)}}]}}
    return {"bool": {"should": [clause, unknown], "minimum_should_match": 1}}


def pattern_clauses(pattern: str, field: str) -> list[dict[str, Any]]:
    """Clauses on one text field that every value containing ``pattern`` satisfies."""
    clauses: list[dict[str, Any]] = []
    for match in _WORD_RUN.finditer(pattern):
        run = match.group()
        if len(run) > _MAX_RUN:
            continue
        before = pattern[match.start() - 1] if match.start() > 0 else ""
        after = pattern[match.end()] if match.end() < len(pattern) else ""
        if before.isspace() and after.isspace() and run.isalnum():
            clauses.append({"term": {field: run.lower()}})
        else:
            clauses.append({"wildcard": {field: {"value": f"*{run.lower()}*", "case_insensitive": True}}})
    return clauses


def _rank_clause(ranks: RankSet | frozenset[int]) -> dict[str, Any]:
    """Single ranks as one ``terms``, wider intervals as ``range``s: the query stays as small as the flag."""
    intervals = ranks.intervals if isinstance(ranks, RankSet) else RankSet((rank, rank) for rank in ranks).intervals
    singles = [low for low, high in intervals if low == high]
    clauses: list[dict[str, Any]] = [{"range": {"rank": {"gte": low, "lte": high}}} for low, high in intervals if low != high]
    if singles:
        clauses.append({"terms": {"rank": singles}})
    if len(clauses) == 1:
        return clauses[0]
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _condition_clause(condition: Condition) -> dict[str, Any]:
    if condition.min_level is not None:
        return _level_clause(condition.min_level)
    if not condition.values:
        return {"exists": {"field": condition.field}}
    return {"terms": {condition.field: list(condition.values)}}


def to_query(spec: Filter) -> dict[str, Any]:
    """The bool query for ``spec`` (a superset of its matches; exact except for PATTERN)."""
    must: list[dict[str, Any]] = []
    if spec.ranks is not None:
        must.append(_rank_clause(spec.ranks))
    if spec.min_level is not None:
        must.append(_level_clause(spec.min_level))
    if spec.jobs:
        must.append({"terms": {"job": list(spec.jobs)}})
    if spec.hosts:
        must.append({"terms": {"host.name": list(spec.hosts)}})
    if spec.datasets:
        must.append({"terms": {"event.dataset": list(spec.datasets)}})
    must.extend({"term": {"tags": tag}} for tag in spec.tags)
    if spec.since is not None or spec.until is not None:
        bounds: dict[str, Any] = {"format": "epoch_millis"}
        if spec.since is not None:
            bounds["gte"] = spec.since_millis
        if spec.until is not None:
            bounds["lte"] = spec.until_millis
        must.append({"range": {"@timestamp": bounds}})
    if spec.steps is not None:
        low, high = spec.steps
        step_bounds = {key: value for key, value in (("gte", low), ("lte", high)) if value is not None}
        must.append({"range": {"step": step_bounds}} if step_bounds else {"exists": {"field": "step"}})
    if spec.pattern is not None and not spec.regex:
        per_field = [{"bool": {"filter": pattern_clauses(spec.pattern, name)}} for name in PATTERN_FIELDS]
        if all(clause["bool"]["filter"] for clause in per_field):
            must.append({"bool": {"should": per_field, "minimum_should_match": 1}})
    if spec.any_of:
        must.append({"bool": {"should": [_condition_clause(c) for c in spec.any_of], "minimum_should_match": 1}})
    return {"bool": {"filter": must}} if must else {"match_all": {}}

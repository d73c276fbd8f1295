"""Kibana alerting rules for hvdlog's data: errors by rank, stall events, ranks missing from a collective.

Each rule is an Elasticsearch query rule (``rule_type_id: .es-query``, query DSL) created by
``hvdlog install --kibana`` through Kibana's alerting API: ``POST /api/alerting/rule/<id>``
with a fixed id (so a re-run finds it), and ``PUT /api/alerting/rule/<id>`` to update it when
it exists (409 on create). No action is attached: the connector (Slack, e-mail, a webhook) is the
operator's, added in Kibana (docs/deploy.md). Fields of the bodies are the documented ones:
``name``, ``rule_type_id``, ``consumer``, ``schedule``, ``params``, ``tags``, ``enabled``,
``actions`` on create; update takes neither ``rule_type_id``, ``consumer`` nor ``enabled``.

Kibana runs the query within ``[now - timeWindow, now]`` on ``timeField`` and, with
``groupBy: top``, one alert per value of ``termField`` whose count passes the threshold.
What Kibana cannot express, a rank that logs *nothing at all* while the others go on, is
``hvdlog watch``'s: a query rule only counts matching documents, it cannot compare each
rank's last event with now. The third rule catches what the logs do say about a rank gone
quiet: Horovod's stall inspector naming it missing (MPI builds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from hvdlog.elastic.templates import INDEX_PATTERN

__all__ = ["RULES", "UPDATE_FIELDS", "Rule", "create_body", "install_rules", "update_body"]

#: What an update (``PUT``) may carry: the create body without ``rule_type_id``, ``consumer``, ``enabled``.
UPDATE_FIELDS: Final = frozenset({"actions", "name", "notify_when", "params", "schedule", "tags", "throttle"})

_STALL_REPORT: Final = {"bool": {"should": [{"exists": {"field": "horovod.stall.source"}},
                                            {"exists": {"field": "horovod.stall.missing_ranks"}}], "minimum_should_match": 1}}


@dataclass(frozen=True)
class Rule:
    """One ES query rule: a query, the field its alerts are grouped by, a window and a schedule."""

    id: str
    name: str
    query: dict[str, Any]
    term_field: str
    window_minutes: int = 5
    interval: str = "1m"

    def params(self) -> dict[str, Any]:
        """The rule type's parameters (``esQuery`` is a JSON string, as the API wants it)."""
        return {
            "searchType": "esQuery",
            "esQuery": json.dumps({"query": self.query}),
            "index": [INDEX_PATTERN],
            "timeField": "@timestamp",
            "size": 10,
            "aggType": "count",
            "groupBy": "top",
            "termField": self.term_field,
            "termSize": 100,
            "threshold": [0],
            "thresholdComparator": ">",
            "timeWindowSize": self.window_minutes,
            "timeWindowUnit": "m",
            "excludeHitsFromPreviousRun": False,  # not available with a grouping field
        }


RULES: Final = (
    Rule(
        "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e51", "hvdlog: errors by rank",
        {"bool": {
            "should": [{"terms": {"log.level": ["error", "critical"]}}, {"terms": {"event.action": ["uncaught_exception", "signal"]}}],
            "minimum_should_match": 1,
            "must_not": [_STALL_REPORT],  # Horovod's "Will shutdown" is the stall rule's
        }},
        "rank",
    ),
    Rule(
        "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e52", "hvdlog: stall events",
        {"bool": {"filter": [_STALL_REPORT], "must_not": [{"term": {"event.action": "stall_resolved"}}]}},
        "job",
    ),
    Rule(
        "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e53", "hvdlog: silent ranks (missing from a collective)",
        {"bool": {"filter": [{"exists": {"field": "horovod.stall.missing_ranks"}}]}},
        "horovod.stall.missing_ranks",
    ),
)


def create_body(rule: Rule) -> dict[str, Any]:
    """The body of ``POST /api/alerting/rule/<id>``: enabled, no action (the connector is the operator's)."""
    return {
        "name": rule.name,
        "rule_type_id": ".es-query",
        "consumer": "stackAlerts",
        "schedule": {"interval": rule.interval},
        "params": rule.params(),
        "tags": ["hvdlog"],
        "enabled": True,
        "actions": [],
    }


def update_body(rule: Rule) -> dict[str, Any]:
    """The body of ``PUT /api/alerting/rule/<id>``: the create body without what cannot change."""
    return {key: value for key, value in create_body(rule).items() if key in UPDATE_FIELDS}


def install_rules(client: Any) -> list[tuple[str, str]]:
    """Create or update every rule through a :class:`~hvdlog.elastic.kibana_api.KibanaClient`; (name, outcome) each."""
    from hvdlog.elastic.install import SetupError

    outcomes = []
    for rule in RULES:
        status, body = client.send_json("POST", f"/api/alerting/rule/{rule.id}", create_body(rule))
        outcome = "created"
        if status == 409:
            status, body = client.send_json("PUT", f"/api/alerting/rule/{rule.id}", update_body(rule))
            outcome = "updated"
        if status != 200:
            raise SetupError(f"Kibana refused the alerting rule {rule.name!r} (HTTP {status}: {str(body)[:300]}).")
        outcomes.append((rule.name, outcome))
    return outcomes

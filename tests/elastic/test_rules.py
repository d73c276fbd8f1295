"""The Kibana alerting rules: request bodies against the documented API, each rule's query for real on Elasticsearch.

Kibana cannot run here. So the bodies are checked against the fields Kibana's alerting API
documents (its OpenAPI schemas in elastic/kibana, x-pack/plugins/alerting/docs/openapi/
components/schemas/: ``create_es_query_rule_request.yaml``, ``update_rule_request.yaml``,
``params_es_query_dsl_rule.yaml``, ``thresholdcomparator.yaml``, ``timewindowunit.yaml``,
``consumer.yaml``), and each rule's query runs on the real Elasticsearch the way the rule type
runs it: the query DSL inside a filter with the time window on ``timeField``, grouped by a
terms aggregation on ``termField``. The expected documents come from plain predicates over the
corpus, not from the queries.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from support.training_corpus import JOB_DEMO, JOB_OTHER, STRAGGLER, index_corpus

from hvdlog.documents import Document, get_field
from hvdlog.elastic.rules import RULES, UPDATE_FIELDS, Rule, create_body, update_body
from hvdlog.elastic.templates import INDEX_PATTERN

NAMESPACE = "rulestest"

#: create_es_query_rule_request.yaml: properties, and the required ones.
CREATE_FIELDS = {"actions", "consumer", "enabled", "name", "notify_when", "params", "rule_type_id", "schedule", "tags", "throttle"}
CREATE_REQUIRED = {"consumer", "name", "params", "rule_type_id", "schedule"}
#: update_rule_request.yaml.
DOCUMENTED_UPDATE = {"actions", "name", "notify_when", "params", "schedule", "tags", "throttle"}
#: params_es_query_dsl_rule.yaml: properties, and the required ones.
PARAMS = {"aggField", "aggType", "esQuery", "excludeHitsFromPreviousRun", "groupBy", "index", "searchType", "size", "termField",
          "termSize", "threshold", "thresholdComparator", "timeField", "timeWindowSize", "timeWindowUnit"}
PARAMS_REQUIRED = {"esQuery", "index", "threshold", "thresholdComparator", "timeField", "timeWindowSize", "timeWindowUnit"}
COMPARATORS = {">", ">=", "<", "<=", "between", "notBetween"}
UNITS = {"s", "m", "h", "d"}
CONSUMERS = {"apm", "alerts", "discover", "infrastructure", "logs", "ml", "monitoring", "siem", "slo", "stackAlerts", "uptime"}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
class TestBodies:
    def test_create_body_has_only_documented_fields(self, rule: Rule) -> None:
        """POST /api/alerting/rule/<id>: documented fields only, the required ones present, an .es-query rule with no action."""
        body = create_body(rule)
        assert CREATE_REQUIRED <= set(body) <= CREATE_FIELDS
        assert body["rule_type_id"] == ".es-query" and body["consumer"] in CONSUMERS and body["actions"] == []
        assert set(body["schedule"]) == {"interval"} and body["schedule"]["interval"][-1] in UNITS
        assert uuid.UUID(rule.id).version == 4  # the path id must be a UUID v1 or v4

    def test_params_are_the_dsl_query_rule_params(self, rule: Rule) -> None:
        """params: the documented DSL query rule parameters; esQuery a JSON string with just a query."""
        params = create_body(rule)["params"]
        assert PARAMS_REQUIRED <= set(params) <= PARAMS
        assert params["searchType"] == "esQuery" and params["thresholdComparator"] in COMPARATORS and params["timeWindowUnit"] in UNITS
        assert params["groupBy"] in ("all", "top") and params["aggType"] == "count" and isinstance(params["threshold"], list)
        assert params["excludeHitsFromPreviousRun"] is False  # the docs: not available with a grouping field
        assert set(json.loads(params["esQuery"])) == {"query"}

    def test_update_body(self, rule: Rule) -> None:
        """PUT /api/alerting/rule/<id>: what update documents, nothing it refuses (rule_type_id, consumer, enabled)."""
        body = update_body(rule)
        assert set(body) <= DOCUMENTED_UPDATE == UPDATE_FIELDS and body["params"] == create_body(rule)["params"]


def _is_stall_report(doc: Document) -> bool:
    return get_field(doc, "horovod.stall.source") is not None or get_field(doc, "horovod.stall.missing_ranks") is not None


#: rule name -> (the documents it must find, the group of each).
EXPECTED: dict[str, tuple[Callable[[Document], bool], Callable[[Document], list[Any]]]] = {
    "hvdlog: errors by rank": (
        lambda d: (get_field(d, "log.level") in ("error", "critical") or get_field(d, "event.action") in ("uncaught_exception", "signal"))
        and not _is_stall_report(d),
        lambda d: [d["rank"]],
    ),
    "hvdlog: stall events": (lambda d: _is_stall_report(d) and get_field(d, "event.action") != "stall_resolved", lambda d: [d["job"]]),
    "hvdlog: silent ranks (missing from a collective)": (
        lambda d: get_field(d, "horovod.stall.missing_ranks") is not None, lambda d: list(get_field(d, "horovod.stall.missing_ranks")),
    ),
}


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(es_url: str) -> dict[str, Document]:
    from elasticsearch import Elasticsearch

    with Elasticsearch(es_url, request_timeout=60) as client:
        return index_corpus(client, NAMESPACE)


def _run_like_kibana(es_url: str, rule: Rule, start: str, end: str) -> tuple[set[str], dict[Any, int]]:
    """The rule's search as the .es-query rule type builds it: its query, the time window, the terms grouping."""
    from elasticsearch import Elasticsearch

    params = rule.params()
    window = {"range": {params["timeField"]: {"gte": start, "lte": end, "format": "strict_date_optional_time"}}}
    body = {"bool": {"filter": [json.loads(params["esQuery"])["query"], window]}}
    aggs = {"groupAgg": {"terms": {"field": params["termField"], "size": params["termSize"]}}}
    index = params["index"][0][: -len("*")] + NAMESPACE  # this module's namespace only
    assert params["index"] == [INDEX_PATTERN]
    with Elasticsearch(es_url, request_timeout=60) as es:
        found = es.search(index=index, query=body, aggs=aggs, size=10_000, track_total_hits=True).body
    ids = {hit["_id"] for hit in found["hits"]["hits"]}
    groups = {bucket["key"]: bucket["doc_count"] for bucket in found["aggregations"]["groupAgg"]["buckets"]}
    return ids, groups


@pytest.mark.elasticsearch
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_query_finds_exactly_the_expected_documents(indexed: dict[str, Document], es_url: str, rule: Rule) -> None:
    """Over the corpus' time span: the rule's hits are exactly the documents its predicate picks, grouped the same way."""
    predicate, group = EXPECTED[rule.name]
    stamps = sorted(doc["@timestamp"] for doc in indexed.values())
    ids, groups = _run_like_kibana(es_url, rule, stamps[0], stamps[-1])
    expected = {doc_id for doc_id, doc in indexed.items() if predicate(doc)}
    assert expected and ids == expected, (sorted(ids - expected)[:5], sorted(expected - ids)[:5])
    counts: dict[Any, int] = {}
    for doc_id in expected:
        for key in group(indexed[doc_id]):
            counts[key] = counts.get(key, 0) + 1
    assert groups == counts


@pytest.mark.elasticsearch
def test_groups_name_the_ranks_and_jobs_an_operator_expects(indexed: dict[str, Document], es_url: str) -> None:
    """Errors on every rank of the demo job and rank 1 of the other; stalls in the demo job only; rank 4 missing."""
    stamps = sorted(doc["@timestamp"] for doc in indexed.values())
    by_name = {rule.name: _run_like_kibana(es_url, rule, stamps[0], stamps[-1])[1] for rule in RULES}
    assert set(by_name["hvdlog: errors by rank"]) == set(range(6))
    assert set(by_name["hvdlog: stall events"]) == {JOB_DEMO} and JOB_OTHER not in by_name["hvdlog: stall events"]
    assert set(by_name["hvdlog: silent ranks (missing from a collective)"]) == {STRAGGLER}


@pytest.mark.elasticsearch
def test_time_window_excludes_what_is_outside(indexed: dict[str, Document], es_url: str) -> None:
    """The window matters: the other job's error (a day earlier) is outside a window on the demo job's hour."""
    demo = sorted(doc["@timestamp"] for doc in indexed.values() if doc["job"] == JOB_DEMO)
    errors = next(rule for rule in RULES if rule.name == "hvdlog: errors by rank")
    ids, _ = _run_like_kibana(es_url, errors, demo[0], demo[-1])
    assert ids and all(indexed[doc_id]["job"] == JOB_DEMO for doc_id in ids)

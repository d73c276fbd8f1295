"""Kibana saved objects: the committed NDJSON is fresh and well-formed, and every query returns the right events.

No Kibana runs here, so the objects are checked two ways: their structure against the
shapes Kibana 8.19 imports (references, ids, stringified ``*JSON`` attributes), and their
queries, translated mechanically into the requests Kibana sends, against the real
Elasticsearch on a multi-rank corpus; the expected answers are computed in Python.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.kibana_to_es import lens_request, lens_rows, options_list_filter, search_request
from support.training_corpus import JOB_DEMO, JOB_OTHER, STRAGGLER, index_corpus

from hvdlog.documents import Document, get_field
from hvdlog.elastic import kibana, views
from hvdlog.elastic.generate import KIBANA_FILE, generated_files
from hvdlog.elastic.templates import INDEX_PATTERN
from hvdlog.fields import FIELDS_BY_NAME, level_at_least

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "kibanatest"
#: Attributes Kibana 8.19's saved-search schema (model version 5) accepts; anything else is rejected.
SEARCH_ATTRIBUTES = {
    "title", "description", "columns", "sort", "grid", "hideChart", "isTextBasedQuery", "kibanaSavedObjectMeta",
    "usesAdHocDataView", "timeRestore", "timeRange", "refreshInterval", "rowHeight", "headerRowHeight", "rowsPerPage",
    "sampleSize", "breakdownField", "viewMode", "hideAggregatedPreview", "visContext", "density", "hits", "version",
}
EXPECTED_IDS = [
    ("index-pattern", "hvdlog-logs"),
    ("search", "hvdlog-errors-by-rank"),
    ("search", "hvdlog-stall-warnings"),
    ("search", "hvdlog-elastic-resets"),
    ("search", "hvdlog-horovod-debug-by-rank"),
    ("search", "hvdlog-job-timeline"),
    ("search", "hvdlog-latest-errors"),
    ("search", "hvdlog-failures"),
    ("search", "hvdlog-rejected-events"),
    ("lens", "hvdlog-events-by-level"),
    ("lens", "hvdlog-errors-by-rank-chart"),
    ("lens", "hvdlog-last-step-per-rank"),
    ("lens", "hvdlog-who-made-the-collective-wait"),
    ("lens", "hvdlog-step-time-per-rank"),
    ("lens", "hvdlog-resources-per-rank"),
    ("lens", "hvdlog-failures-by-host"),
    ("dashboard", "hvdlog-horovod-training"),
]


def _committed() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (REPO / KIBANA_FILE).read_text().splitlines()]


def _by_id() -> dict[str, dict[str, Any]]:
    return {obj["id"]: obj for obj in _committed()}


def _dashboard() -> dict[str, Any]:
    return _by_id()[kibana.object_id(views.DASHBOARD.slug)]


def _controls() -> dict[str, Any]:
    return json.loads(_dashboard()["attributes"]["controlGroupInput"]["panelsJSON"])


class TestNdjson:
    def test_committed_file_is_fresh(self) -> None:
        """The committed NDJSON is byte-for-byte what the generator writes (else: python -m hvdlog.elastic.generate)."""
        assert (REPO / KIBANA_FILE).read_text() == generated_files()[KIBANA_FILE], "kibana/hvdlog.ndjson is stale: run python -m hvdlog.elastic.generate"

    def test_one_canonical_object_per_line(self) -> None:
        """Each line is one JSON object in canonical form; no blank lines, no export summary line."""
        lines = (REPO / KIBANA_FILE).read_text().splitlines()
        assert lines and all(line.strip() for line in lines)
        for line in lines:
            obj = json.loads(line)
            assert isinstance(obj, dict) and kibana.dumps(obj) == line
            assert "exportedCount" not in obj

    def test_ids_are_stable(self) -> None:
        """The objects and their ids are exactly the published ones, unique, in dependency order."""
        assert [(obj["type"], obj["id"]) for obj in _committed()] == EXPECTED_IDS
        assert kibana.DATA_VIEW_ID == "hvdlog-logs"

    def test_versions_import_on_819(self) -> None:
        """Every object carries core and type migration versions that Kibana 8.19 knows."""
        for obj in _committed():
            assert obj["coreMigrationVersion"] == "8.8.0"
            assert obj["typeMigrationVersion"] == kibana.MIGRATION_VERSIONS[obj["type"]]
            assert obj["managed"] is False

    def test_every_reference_resolves_and_is_used(self) -> None:
        """Each reference points to an object of that type in the file, and each name is one the attributes use."""
        objects = _committed()
        present = {(obj["type"], obj["id"]) for obj in objects}
        for obj in objects:
            names = [ref["name"] for ref in obj["references"]]
            assert len(names) == len(set(names)), obj["id"]
            for ref in obj["references"]:
                assert (ref["type"], ref["id"]) in present, (obj["id"], ref)
            assert set(names) == _used_reference_names(obj), obj["id"]

    def test_json_attributes_are_strings(self) -> None:
        """Every ``*JSON`` attribute is a string holding valid JSON, as the import schema requires."""
        for obj in _committed():
            for path, value in _walk(obj["attributes"]):
                if path.endswith("JSON"):
                    assert isinstance(value, str), (obj["id"], path)
                    json.loads(value)

    def test_search_attributes_match_schema(self) -> None:
        """Saved searches use only attributes the strict 8.19 schema accepts, with a title and source."""
        for obj in _committed():
            if obj["type"] == "search":
                attributes = obj["attributes"]
                assert set(attributes) <= SEARCH_ATTRIBUTES, set(attributes) - SEARCH_ATTRIBUTES
                assert attributes["title"] and isinstance(attributes["kibanaSavedObjectMeta"]["searchSourceJSON"], str)

    def test_data_view(self) -> None:
        """The data view covers every hvdlog data stream and uses @timestamp."""
        attributes = _by_id()[kibana.DATA_VIEW_ID]["attributes"]
        assert attributes["title"] == INDEX_PATTERN == "logs-horovod.*-*"
        assert attributes["timeFieldName"] == "@timestamp"

    def test_every_field_is_in_the_contract(self) -> None:
        """Columns, sorts, Lens fields, controls and query fields are all declared in hvdlog.fields."""
        named = set()
        for obj in _committed():
            attributes = obj["attributes"]
            named |= set(attributes.get("columns", [])) | {field for field, _ in attributes.get("sort", [])}
            for path, value in _walk(attributes):
                if path.endswith(("sourceField", "sortField", "fieldName")) and value != "___records___":
                    named.add(value)
                if path.endswith("query") and isinstance(value, str):
                    named |= set(re.findall(r"(?:_exists_:)?([A-Za-z_@][\w.@]*)\s*:", value)) - {"_exists_"}
        assert named and named <= set(FIELDS_BY_NAME), named - set(FIELDS_BY_NAME)

    def test_dashboard_layout_and_controls(self) -> None:
        """Panels sit on the 48-column grid without overlap; the controls are rank and job on aggregatable fields."""
        panels = json.loads(_dashboard()["attributes"]["panelsJSON"])
        cells: set[tuple[int, int]] = set()
        for panel in panels:
            grid = panel["gridData"]
            assert grid["i"] == panel["panelIndex"] and grid["x"] + grid["w"] <= 48
            mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
            assert not cells & mine, panel["panelIndex"]
            cells |= mine
        controls = _controls()
        assert sorted(c["explicitInput"]["fieldName"] for c in controls.values()) == ["job", "rank"]
        assert sorted(c["order"] for c in controls.values()) == list(range(len(controls)))
        for control in controls.values():
            assert control["explicitInput"]["dataViewId"] == kibana.DATA_VIEW_ID
            assert FIELDS_BY_NAME[control["explicitInput"]["fieldName"]].type in ("keyword", "integer", "long")


def _walk(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (dotted path, value) in nested attributes, JSON strings decoded along the way."""
    if isinstance(value, str) and path.endswith("JSON"):
        return [(path, value), *_walk(json.loads(value), path + ".")]
    if isinstance(value, dict):
        return [pair for key, sub in value.items() for pair in _walk(sub, f"{path}{key}" if not path or path.endswith(".") else f"{path}.{key}")]
    if isinstance(value, list):
        return [pair for sub in value for pair in _walk(sub, path)]
    return [(path, value)]


def _used_reference_names(obj: dict[str, Any]) -> set[str]:
    """The reference names an object's attributes point to, by Kibana's naming rules."""
    attributes = obj["attributes"]
    if obj["type"] == "search":
        return {json.loads(attributes["kibanaSavedObjectMeta"]["searchSourceJSON"])["indexRefName"]}
    if obj["type"] == "lens":
        return {f"indexpattern-datasource-layer-{layer}" for layer in attributes["state"]["datasourceStates"]["formBased"]["layers"]}
    if obj["type"] == "dashboard":
        panels = {f"{p['panelIndex']}:{p['panelRefName']}" for p in json.loads(attributes["panelsJSON"])}
        return panels | {f"controlGroup_{cid}:optionsListDataView" for cid in _controls()}
    return set()


# --- every query against the real Elasticsearch ---------------------------------------

#: Dashboard control selections to try: none, one job, one job and two ranks (the straggler included).
SELECTIONS = [
    {},
    {"job": [JOB_DEMO]},
    {"job": [JOB_DEMO], "rank": [1, STRAGGLER]},
    {"job": [JOB_OTHER], "rank": [1]},
]


def _control_filters(selection: dict[str, list[Any]]) -> list[dict[str, Any]]:
    fields = {c["explicitInput"]["fieldName"] for c in _controls().values()}
    assert set(selection) <= fields
    return [options_list_filter(field, values) for field, values in selection.items()]


def _selected(doc: Document, selection: dict[str, list[Any]]) -> bool:
    return all(get_field(doc, field) in values for field, values in selection.items())


def _is_error(doc: Document) -> bool:
    return level_at_least(get_field(doc, "log.level"), "error")


def _own_failure(doc: Document) -> bool:
    """A rank's own uncaught exception: not the HorovodInternalError every other rank raises after it."""
    return (get_field(doc, "event.action") == "uncaught_exception" and not str(get_field(doc, "error.type")).endswith("HorovodInternalError")
            and "Horovod has been shut down" not in str(doc.get("message")))


#: Independent Python statements of what each saved search means, and its order.
SEARCH_EXPECTATIONS = {
    "errors-by-rank": (_is_error, lambda d: (d["rank"], d["@timestamp"])),
    "stall-warnings": (
        lambda d: get_field(d, "horovod.stall.source") is not None and get_field(d, "event.action") != "stall_resolved",
        lambda d: _negated_time(d["@timestamp"]),
    ),
    "horovod-debug-by-rank": (
        lambda d: get_field(d, "event.dataset") == "horovod.core" and get_field(d, "log.level") in ("trace", "debug"),
        lambda d: (d["rank"], d["@timestamp"]),
    ),
    "job-timeline": (lambda d: True, lambda d: d["@timestamp"]),
    "latest-errors": (_is_error, lambda d: _negated_time(d["@timestamp"])),
    "failures": (_own_failure, lambda d: _negated_time(d["@timestamp"])),
}


def _negated_time(stamp: str) -> float:
    return -datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _epoch_ms(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(es_url: str) -> dict[str, Document]:
    """The corpus, indexed through our templates into this module's namespace."""
    from elasticsearch import Elasticsearch

    client = Elasticsearch(es_url, request_timeout=60)
    try:
        return index_corpus(client, NAMESPACE)
    finally:
        client.close()


def _search(es: Any, body: dict[str, Any]) -> dict[str, Any]:
    # The data view's pattern, narrowed to this module's namespace so other tests' streams do not mix in.
    index = INDEX_PATTERN[: -len("*")] + NAMESPACE
    return es.search(index=index, **body).body


@pytest.mark.elasticsearch
class TestQueriesOnCorpus:
    def test_corpus_has_every_case(self, indexed: dict[str, Document]) -> None:
        """The corpus holds what the views are about, so no expectation below is vacuous."""
        for slug, (predicate, _) in SEARCH_EXPECTATIONS.items():
            for selection in SELECTIONS[:3]:
                assert any(predicate(d) and _selected(d, selection) for d in indexed.values()), (slug, selection)

    @pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "no-selection")
    @pytest.mark.parametrize("slug", list(SEARCH_EXPECTATIONS))
    def test_saved_search(self, es: Any, indexed: dict[str, Document], slug: str, selection: dict[str, list[Any]]) -> None:
        """The saved search's query, with the controls' filters, returns exactly the expected events in its order."""
        predicate, order = SEARCH_EXPECTATIONS[slug]
        body = search_request(_by_id()[kibana.object_id(slug)], _control_filters(selection))
        hits = _search(es, body)["hits"]["hits"]
        expected = sorted((i for i, d in indexed.items() if predicate(d) and _selected(d, selection)), key=lambda i: order(indexed[i]))
        assert [hit["_id"] for hit in hits] == expected

    @pytest.mark.parametrize("selection", SELECTIONS[:3], ids=["no-selection", "job", "job-ranks"])
    def test_events_by_level(self, es: Any, indexed: dict[str, Document], selection: dict[str, list[Any]]) -> None:
        """Events by level over time: one bar segment per (second, level) with its count."""
        lens = _by_id()["hvdlog-events-by-level"]
        rows = lens_rows(lens, _search(es, lens_request(lens, _control_filters(selection), date_interval="1s")))
        got = Counter({(row["@timestamp"], row["Level"]): row["Events"] for row in rows})
        expected = Counter(
            (int(_epoch_ms(d["@timestamp"]) // 1000 * 1000), get_field(d, "log.level")) for d in indexed.values() if _selected(d, selection)
        )
        assert got == expected

    @pytest.mark.parametrize("selection", SELECTIONS, ids=["no-selection", "job", "job-ranks", "other-job"])
    def test_errors_by_rank_chart(self, es: Any, indexed: dict[str, Document], selection: dict[str, list[Any]]) -> None:
        """Errors by rank: the number of error-or-worse events per rank."""
        lens = _by_id()["hvdlog-errors-by-rank-chart"]
        rows = lens_rows(lens, _search(es, lens_request(lens, _control_filters(selection))))
        expected = Counter(d["rank"] for d in indexed.values() if _is_error(d) and _selected(d, selection))
        assert {row["Rank"]: row["Errors"] for row in rows} == dict(expected)
        assert [row["Errors"] for row in rows] == sorted((row["Errors"] for row in rows), reverse=True)

    @pytest.mark.parametrize("selection", SELECTIONS[1:], ids=["job", "job-ranks", "other-job"])
    def test_last_step_per_rank(self, es: Any, indexed: dict[str, Document], selection: dict[str, list[Any]]) -> None:
        """The straggler view: per rank, the step of its latest event that has one, and that event's time."""
        lens = _by_id()["hvdlog-last-step-per-rank"]
        rows = lens_rows(lens, _search(es, lens_request(lens, _control_filters(selection))))
        expected: dict[int, tuple[Any, float]] = {}
        for doc in sorted(indexed.values(), key=lambda d: d["@timestamp"]):
            if "step" in doc and _selected(doc, selection):
                expected[doc["rank"]] = (doc["step"], _epoch_ms(doc["@timestamp"]))
        assert {row["Rank"]: (row["Last step"], row["Last event"]) for row in rows} == expected
        assert [row["Rank"] for row in rows] == sorted(expected)
        if selection.get("job") == [JOB_DEMO]:
            steps = {rank: step for rank, (step, _) in expected.items()}
            assert min(steps, key=steps.get) == STRAGGLER, steps

    @pytest.mark.parametrize("selection", SELECTIONS, ids=["no-selection", "job", "job-ranks", "other-job"])
    def test_failures_by_host(self, es: Any, indexed: dict[str, Document], selection: dict[str, list[Any]]) -> None:
        """Failures by host: per host, the ranks' own uncaught exceptions (not the collateral HorovodInternalError) and the latest one."""
        lens = _by_id()["hvdlog-failures-by-host"]
        rows = lens_rows(lens, _search(es, lens_request(lens, _control_filters(selection))))
        expected: dict[str, tuple[int, float]] = {}
        for doc in indexed.values():
            if _own_failure(doc) and _selected(doc, selection):
                host = get_field(doc, "host.name")
                count, last = expected.get(host, (0, 0.0))
                expected[host] = (count + 1, max(last, _epoch_ms(doc["@timestamp"])))
        assert {row["Host"]: (row["Failures"], row["Last failure"]) for row in rows} == expected
        if not selection or selection.get("job") == [JOB_DEMO]:
            assert set(expected) == {"node2"}  # the straggler's host; rank 0's shutdown on node1 is not counted
        assert any(get_field(d, "error.type", "").endswith("HorovodInternalError") for d in indexed.values())

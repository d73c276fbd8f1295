"""Kibana saved objects: both committed shapes are fresh and well-formed, and every query returns the right events.

No Kibana runs here, so the objects are checked two ways: their structure against what
Kibana's own source says each version imports (migration versions it knows, the attribute
schemas of saved searches and dashboards, references, ids, stringified ``*JSON`` attributes),
and their queries, translated mechanically into the requests Kibana sends, against the real
Elasticsearch on a multi-rank corpus; the expected answers are computed in Python.
The Kibana facts below are data copied from elastic/kibana's source (file named beside each),
never a running imitation of Kibana.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.kibana_to_es import lens_request, lens_rows, options_list_filter, search_request
from support.training_corpus import JOB_DEMO, JOB_OTHER, STRAGGLER, index_corpus

from hvdlog.documents import Document, get_field
from hvdlog.elastic import kibana, views
from hvdlog.elastic.generate import KIBANA_FILES, generated_files
from hvdlog.elastic.kibana_versions import KIBANA_8, KIBANA_9, TARGETS, KibanaTarget, target_for
from hvdlog.elastic.templates import INDEX_PATTERN
from hvdlog.fields import FIELDS_BY_NAME, level_at_least

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "kibanatest"
SHAPES = pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"kibana{t.name}")

# --- facts from Kibana's source ------------------------------------------------------------
#: saved_search/server/saved_objects/schema.ts: SCHEMA_SEARCH_BASE .. SCHEMA_SEARCH_MODEL_VERSION_5
#: (strict objects: an unknown attribute fails the import).
SEARCH_V5_ATTRIBUTES = frozenset({
    "title", "description", "columns", "sort", "grid", "rowHeight", "rowsPerPage", "hideChart", "breakdownField",
    "kibanaSavedObjectMeta", "isTextBasedQuery", "usesAdHocDataView", "timeRestore", "timeRange", "refreshInterval",
    "viewMode", "hideAggregatedPreview", "hits", "version", "sampleSize", "headerRowHeight", "visContext", "density",
})
#: SCHEMA_SEARCH_MODEL_VERSION_6: v5 plus `tabs`, each {id, label, attributes: v5 without title and description}.
SEARCH_V6_ATTRIBUTES = SEARCH_V5_ATTRIBUTES | {"tabs"}
TAB_ATTRIBUTES = SEARCH_V5_ATTRIBUTES - {"title", "description"}
#: dashboard_saved_object/schema/v1/v1.ts: dashboardAttributesSchema, `unknowns: 'forbid'` (v2, v3 only add to it).
DASHBOARD_V1_ATTRIBUTES = frozenset({
    "title", "description", "kibanaSavedObjectMeta", "timeRestore", "timeFrom", "timeTo", "refreshInterval",
    "controlGroupInput", "panelsJSON", "optionsJSON", "hits", "version",
})
#: v1 controlGroupInputSchema plus v2's showApplySelections.
CONTROL_GROUP_ATTRIBUTES = frozenset({"panelsJSON", "controlStyle", "chainingSystem", "ignoreParentSettingsJSON", "showApplySelections"})
#: The newest typeMigrationVersion each Kibana release knows, per type: an object stamped above it
#: is refused ("belongs to a more recent version of Kibana", document_migrator.ts). Model version N
#: is "10.N.0". Sources: data_views.ts and index_pattern_migrations.ts (legacy up to 7.11.0, conversion
#: 8.0.0, no model versions); lens saved_object_migrations.ts and saved_objects.ts (legacy up to 8.9.0; model version 1 only after
#: 9.2's Lens API rework, PR #229534, so not counted); dashboard_saved_object.ts (v2 showApplySelections:
#: PR #174714, 8.14; v3 sections: PR #222450, 8.19 and 9.1); search.ts (v5 is 8.19's newest, v6 Discover
#: tabs: PRs #229897/#227159, 9.2).
NEWEST_KNOWN = {
    "8.19": {"index-pattern": "8.0.0", "search": "10.5.0", "lens": "8.9.0", "dashboard": "10.3.0"},
    "9.0": {"index-pattern": "8.0.0", "search": "10.5.0", "lens": "8.9.0", "dashboard": "10.2.0"},
    "9.1": {"index-pattern": "8.0.0", "search": "10.5.0", "lens": "8.9.0", "dashboard": "10.3.0"},
    "9.2": {"index-pattern": "8.0.0", "search": "10.6.0", "lens": "8.9.0", "dashboard": "10.3.0"},
}
#: document_migrator/migrations/index.ts: the only core transform, in 8.19 and 9.x alike.
CORE_MIGRATION_VERSION = "8.8.0"
#: extract_tabs.ts: DEFAULT_TAB_UUID_NAMESPACE, Kibana's namespace for a backfilled tab's id.
TAB_UUID_NAMESPACE = uuid.UUID("617f8ea7-754a-4a75-86bf-58c4b2f99690")

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


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _committed(target: KibanaTarget = KIBANA_8) -> list[dict[str, Any]]:
    return kibana.read_objects((REPO / target.file).read_text())


def _by_id(target: KibanaTarget = KIBANA_8) -> dict[str, dict[str, Any]]:
    return {obj["id"]: obj for obj in _committed(target)}


def _dashboard(target: KibanaTarget = KIBANA_8) -> dict[str, Any]:
    return _by_id(target)[kibana.object_id(views.DASHBOARD.slug)]


def _controls(target: KibanaTarget = KIBANA_8) -> dict[str, Any]:
    return json.loads(_dashboard(target)["attributes"]["controlGroupInput"]["panelsJSON"])


class TestNdjson:
    def test_committed_files_are_fresh(self) -> None:
        """Both committed shapes and the table that picks one are byte-for-byte what the generator writes."""
        generated = generated_files()
        assert set(KIBANA_FILES) == {KIBANA_8.file, KIBANA_9.file}
        for path in (*KIBANA_FILES, kibana.SHAPES_FILE):
            assert (REPO / path).read_text() == generated[path], f"{path} is stale: run python -m hvdlog.elastic.generate"

    @SHAPES
    def test_first_line_says_generated(self, target: KibanaTarget) -> None:
        """The first line is the export summary Kibana's import drops, naming the generator and the Kibana versions."""
        first, *rest = (REPO / target.file).read_text().splitlines()
        header = json.loads(first)
        assert header["exportedCount"] == len(rest) == len(_committed(target))
        assert "generated by python -m hvdlog.elastic.generate" in header["hvdlog"] and target.imports_into in header["hvdlog"]
        assert (REPO / kibana.SHAPES_FILE).read_text().startswith("# generated by python -m hvdlog.elastic.generate")

    @SHAPES
    def test_one_canonical_object_per_line(self, target: KibanaTarget) -> None:
        """Each line is one JSON object in canonical form; no blank lines, one summary line, first."""
        lines = (REPO / target.file).read_text().splitlines()
        assert lines and all(line.strip() for line in lines)
        for number, line in enumerate(lines):
            obj = json.loads(line)
            assert isinstance(obj, dict) and kibana.dumps(obj) == line
            assert ("exportedCount" in obj) == (number == 0)

    @SHAPES
    def test_ids_are_stable(self, target: KibanaTarget) -> None:
        """The objects and their ids are exactly the published ones, unique, in dependency order, in every shape."""
        assert [(obj["type"], obj["id"]) for obj in _committed(target)] == EXPECTED_IDS
        assert len({obj["id"] for obj in _committed(target)}) == len(EXPECTED_IDS)
        assert kibana.DATA_VIEW_ID == "hvdlog-logs"

    @SHAPES
    def test_versions_known_to_every_kibana_it_is_sent_to(self, target: KibanaTarget) -> None:
        """Every stamp is at most what each Kibana release that gets this shape knows, and a model version where the type has them."""
        receivers = [release for release in NEWEST_KNOWN if target_for(release + ".0") is target]
        assert receivers, target.name
        for obj in _committed(target):
            assert obj["coreMigrationVersion"] == CORE_MIGRATION_VERSION and obj["managed"] is False
            stamp = obj["typeMigrationVersion"]
            assert stamp == target.type_versions[obj["type"]]
            for release in receivers:
                assert _version(stamp) <= _version(NEWEST_KNOWN[release][obj["type"]]), (obj["id"], stamp, release)
            if obj["type"] in ("search", "dashboard"):  # model-version types: no legacy migration re-runs on import
                assert _version(stamp) >= (10, 0, 0), obj["id"]

    def test_kibana_versions_pick_their_shape(self) -> None:
        """8.19, 9.0 and 9.1 get the 8.19 shape (9.0 knows no 8.19-only stamp in it); 9.2 and later 9.x get 9.2's; others none."""
        assert [target_for(v).name for v in ("8.19.0", "8.19.7", "9.0.0", "9.1.5", "9.2.0", "9.2.0-SNAPSHOT", "9.5.1")] == ["8", "8", "8", "8", "9", "9", "9"]
        for refused in ("7.17.29", "8.18.4", "10.0.0", "", "x.y"):
            with pytest.raises(ValueError, match="is not supported"):
                target_for(refused)

    def test_shapes_table_matches_targets(self) -> None:
        """kibana/shapes.txt, read by setup/setup.sh, lists each target's range and file, oldest first."""
        rows = [line.split() for line in (REPO / kibana.SHAPES_FILE).read_text().splitlines() if not line.startswith("#")]
        assert rows == [[f"{t.first[0]}.{t.first[1]}", str(t.last_major), Path(t.file).name] for t in TARGETS]

    @SHAPES
    def test_every_reference_resolves_and_is_used(self, target: KibanaTarget) -> None:
        """Each reference points to an object of that type in the file, and each name is one the attributes use."""
        objects = _committed(target)
        present = {(obj["type"], obj["id"]) for obj in objects}
        for obj in objects:
            names = [ref["name"] for ref in obj["references"]]
            assert len(names) == len(set(names)), obj["id"]
            for ref in obj["references"]:
                assert (ref["type"], ref["id"]) in present, (obj["id"], ref)
            assert set(names) == _used_reference_names(obj, target), obj["id"]

    @SHAPES
    def test_json_attributes_are_strings(self, target: KibanaTarget) -> None:
        """Every ``*JSON`` attribute is a string holding valid JSON, as the import schema requires."""
        for obj in _committed(target):
            for path, value in _walk(obj["attributes"]):
                if path.endswith("JSON"):
                    assert isinstance(value, str), (obj["id"], path)
                    json.loads(value)

    @SHAPES
    def test_search_attributes_match_schema(self, target: KibanaTarget) -> None:
        """Saved searches use only attributes their stamped model version accepts; 9.2's carry one tab as Kibana's backfill writes it."""
        allowed = {"10.5.0": SEARCH_V5_ATTRIBUTES, "10.6.0": SEARCH_V6_ATTRIBUTES}[target.type_versions["search"]]
        for obj in _committed(target):
            if obj["type"] != "search":
                continue
            attributes = obj["attributes"]
            assert set(attributes) <= allowed, set(attributes) - allowed
            assert attributes["title"] and isinstance(attributes["kibanaSavedObjectMeta"]["searchSourceJSON"], str)
            if "tabs" not in allowed:
                continue
            (tab,) = attributes["tabs"]
            assert tab["id"] == str(uuid.uuid5(TAB_UUID_NAMESPACE, obj["id"])) and tab["label"] == attributes["title"]
            assert set(tab["attributes"]) <= TAB_ATTRIBUTES
            assert tab["attributes"] == {k: v for k, v in attributes.items() if k not in {"title", "description", "hits", "version", "tabs"}}

    @SHAPES
    def test_dashboard_attributes_match_schema(self, target: KibanaTarget) -> None:
        """The dashboard uses only the attributes of Kibana's strict dashboard schema, controls in controlGroupInput."""
        attributes = _dashboard(target)["attributes"]
        assert set(attributes) <= DASHBOARD_V1_ATTRIBUTES, set(attributes) - DASHBOARD_V1_ATTRIBUTES
        assert set(attributes["controlGroupInput"]) <= CONTROL_GROUP_ATTRIBUTES

    def test_shapes_differ_only_where_a_version_says(self) -> None:
        """Apart from the stamps, the 9.2 shape adds exactly the searches' tabs: every other attribute is the same."""
        eight, nine = _by_id(KIBANA_8), _by_id(KIBANA_9)
        assert list(eight) == list(nine)
        for oid, obj in nine.items():
            attributes = {k: v for k, v in obj["attributes"].items() if k != "tabs"}
            assert attributes == eight[oid]["attributes"] and obj["references"] == eight[oid]["references"], oid
            assert ("tabs" in obj["attributes"]) == (obj["type"] == "search"), oid

    def test_new_views_get_both_shapes(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A saved search added to views.py comes out in both shapes with no per-version code (the transforms go by type)."""
        extra = views.SavedSearch("extra-view", "Extra view", "A view added later.", "rank:1", ("rank", "message"))
        monkeypatch.setattr(kibana, "SEARCHES", (*views.SEARCHES, extra))
        for target in TARGETS:
            added = next(obj for obj in kibana.saved_objects(target) if obj["id"] == "hvdlog-extra-view")
            assert added["typeMigrationVersion"] == target.type_versions["search"]
            assert ("tabs" in added["attributes"]) == (target is KIBANA_9)

    @SHAPES
    def test_data_view(self, target: KibanaTarget) -> None:
        """The data view covers every hvdlog data stream and uses @timestamp."""
        attributes = _by_id(target)[kibana.DATA_VIEW_ID]["attributes"]
        assert attributes["title"] == INDEX_PATTERN == "logs-horovod.*-*"
        assert attributes["timeFieldName"] == "@timestamp"

    @SHAPES
    def test_every_field_is_in_the_contract(self, target: KibanaTarget) -> None:
        """Columns, sorts, Lens fields, controls and query fields (tabs included) are all declared in hvdlog.fields."""
        named = set()
        for obj in _committed(target):
            for attributes in (obj["attributes"], *(tab["attributes"] for tab in obj["attributes"].get("tabs", []))):
                named |= set(attributes.get("columns", [])) | {field for field, _ in attributes.get("sort", [])}
                for path, value in _walk(attributes):
                    if path.endswith(("sourceField", "sortField", "fieldName")) and value != "___records___":
                        named.add(value)
                    if path.endswith("query") and isinstance(value, str):
                        named |= set(re.findall(r"(?:_exists_:)?([A-Za-z_@][\w.@]*)\s*:", value)) - {"_exists_"}
        assert named and named <= set(FIELDS_BY_NAME), named - set(FIELDS_BY_NAME)

    @SHAPES
    def test_dashboard_layout_and_controls(self, target: KibanaTarget) -> None:
        """Panels sit on the 48-column grid without overlap; the controls are rank and job on aggregatable fields."""
        panels = json.loads(_dashboard(target)["attributes"]["panelsJSON"])
        cells: set[tuple[int, int]] = set()
        for panel in panels:
            grid = panel["gridData"]
            assert grid["i"] == panel["panelIndex"] and grid["x"] + grid["w"] <= 48
            mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
            assert not cells & mine, panel["panelIndex"]
            cells |= mine
        controls = _controls(target)
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


def _used_reference_names(obj: dict[str, Any], target: KibanaTarget) -> set[str]:
    """The reference names an object's attributes point to, by Kibana's naming rules (a tab's data view too)."""
    attributes = obj["attributes"]
    if obj["type"] == "search":
        sources = [attributes, *(tab["attributes"] for tab in attributes.get("tabs", []))]
        return {json.loads(a["kibanaSavedObjectMeta"]["searchSourceJSON"])["indexRefName"] for a in sources}
    if obj["type"] == "lens":
        return {f"indexpattern-datasource-layer-{layer}" for layer in attributes["state"]["datasourceStates"]["formBased"]["layers"]}
    if obj["type"] == "dashboard":
        panels = {f"{p['panelIndex']}:{p['panelRefName']}" for p in json.loads(attributes["panelsJSON"])}
        return panels | {f"controlGroup_{cid}:optionsListDataView" for cid in _controls(target)}
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

    @pytest.mark.parametrize("shape", ["kibana8", "kibana9-tab"])
    @pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "no-selection")
    @pytest.mark.parametrize("slug", list(SEARCH_EXPECTATIONS))
    def test_saved_search(self, es: Any, indexed: dict[str, Document], slug: str, selection: dict[str, list[Any]], shape: str) -> None:
        """The saved search's query (in 9.2's shape: its tab's), with the controls' filters, returns exactly the expected events in its order."""
        predicate, order = SEARCH_EXPECTATIONS[slug]
        if shape == "kibana8":
            saved = _by_id(KIBANA_8)[kibana.object_id(slug)]
        else:
            (tab,) = _by_id(KIBANA_9)[kibana.object_id(slug)]["attributes"]["tabs"]
            saved = {"attributes": tab["attributes"]}
        body = search_request(saved, _control_filters(selection))
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

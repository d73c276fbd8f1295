"""Kibana 8.19 saved objects (data view, saved searches, Lens charts, dashboard) as code.

The tables :data:`SEARCHES`, :data:`CHARTS` and :data:`DASHBOARD` are the readable
definition; :func:`saved_objects` turns them into the shapes Kibana's import API takes
(``*JSON`` attributes as strings, references by name, stable ``hvdlog-<slug>`` ids) and
:func:`to_ndjson` into the committed ``kibana/hvdlog.ndjson``. Queries are Lucene, not
KQL, so the tests can run every one of them as an Elasticsearch ``query_string``
unchanged. Every field named here must be in :mod:`hvdlog.fields` (a test checks).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from hvdlog.elastic.templates import INDEX_PATTERN
from hvdlog.fields import FIELDS, LEVELS, level_at_least

__all__ = [
    "CHARTS",
    "DASHBOARD",
    "DATA_VIEW_ID",
    "MIGRATION_VERSIONS",
    "SEARCHES",
    "Chart",
    "Control",
    "Count",
    "Dashboard",
    "DateHistogram",
    "LastValue",
    "Max",
    "Panel",
    "SavedSearch",
    "Terms",
    "dumps",
    "level_query",
    "object_id",
    "saved_objects",
    "to_ndjson",
]

DATA_VIEW_ID: Final = "hvdlog-logs"
#: The last core transform; must not exceed the Kibana version that imports the file.
CORE_MIGRATION_VERSION: Final = "8.8.0"
#: Per type: versions Kibana 8.19 knows, at or above each type's last legacy migration,
#: so only no-op model-version steps run on import (never copy these from a 9.x export).
MIGRATION_VERSIONS: Final = {"index-pattern": "8.0.0", "search": "10.5.0", "lens": "8.9.0", "dashboard": "10.2.0"}
_LAYER: Final = "L1"
_SEARCH_INDEX_REF: Final = "kibanaSavedObjectMeta.searchSourceJSON.index"


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): stable bytes for diffs and the staleness test."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def object_id(slug: str) -> str:
    """Every object's id is ``hvdlog-<slug>``: re-imports replace objects in place."""
    return f"hvdlog-{slug}"


def level_query(minimum: str) -> str:
    """Lucene clause matching ``log.level`` at ``minimum`` or more severe, from the contract's LEVELS."""
    levels = [level for level in LEVELS if level_at_least(level, minimum)]
    return f"log.level:({' OR '.join(levels)})"


# --- readable definitions -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SavedSearch:
    """A Discover session: a Lucene query, the columns shown and the sort."""

    slug: str
    title: str
    description: str
    query: str
    columns: tuple[str, ...]
    sort: tuple[tuple[str, Literal["asc", "desc"]], ...] = (("@timestamp", "desc"),)


@dataclass(frozen=True, slots=True)
class DateHistogram:
    """Bucket by time (Lens picks the interval from the time range)."""

    field: str = "@timestamp"
    label: str = "@timestamp"


@dataclass(frozen=True, slots=True)
class Terms:
    """Bucket by the values of a field; ``order`` by count (desc) or by key (asc)."""

    field: str
    label: str
    size: int = 10
    order: Literal["count", "key"] = "count"


@dataclass(frozen=True, slots=True)
class Count:
    """Number of documents."""

    label: str = "Events"


@dataclass(frozen=True, slots=True)
class Max:
    """Largest value of a field."""

    field: str
    label: str


@dataclass(frozen=True, slots=True)
class LastValue:
    """Value of a field in the latest document that has it (Lens ``last_value``)."""

    field: str
    label: str
    sort_field: str = "@timestamp"


Bucket = DateHistogram | Terms
Metric = Count | Max | LastValue


@dataclass(frozen=True, slots=True)
class Chart:
    """A Lens chart with one layer: buckets (x axis then split, or table rows) and metrics."""

    slug: str
    title: str
    description: str
    kind: Literal["bar_stacked", "bar", "table"]
    buckets: tuple[Bucket, ...]
    metrics: tuple[Metric, ...]
    query: str = ""
    #: For tables: (column index, direction) of the default sort, indexes over buckets + metrics.
    table_sort: tuple[int, Literal["asc", "desc"]] | None = None


@dataclass(frozen=True, slots=True)
class Control:
    """An options-list control on a dashboard: pick values of one aggregatable field."""

    field: str
    title: str
    sort: tuple[Literal["_key", "_count"], Literal["asc", "desc"]] = ("_key", "asc")


@dataclass(frozen=True, slots=True)
class Panel:
    """A by-reference panel: a chart or saved search slug at a place on the 48-column grid."""

    slug: str
    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True, slots=True)
class Dashboard:
    """A dashboard: controls across the top, then panels."""

    slug: str
    title: str
    description: str
    controls: tuple[Control, ...]
    panels: tuple[Panel, ...]
    time_from: str = "now-24h"
    refresh_ms: int = 30_000


SEARCHES: Final = (
    SavedSearch(
        "errors-by-rank",
        "Errors by rank",
        "Events at level error or above, rank by rank: which rank failed, at which step, and how.",
        level_query("error"),
        ("rank", "host.name", "step", "message"),
        (("rank", "asc"), ("@timestamp", "asc")),
    ),
    SavedSearch(
        "stall-warnings",
        "Stall warnings",
        "Stalls reported by Horovod's stall inspector (with the missing ranks) and by hvdlog's watchdog in each rank"
        " (which also works under Gloo, where Horovod 0.28.1 reports none). Resolved notices are left out.",
        "_exists_:horovod.stall.source AND NOT event.action:stall_resolved",
        (
            "rank",
            "host.name",
            "horovod.stall.source",
            "horovod.stall.missing_ranks",
            "horovod.stall.seconds",
            "horovod.stall.operation",
            "horovod.stall.tensors",
            "message",
        ),
    ),
    SavedSearch(
        "horovod-debug-by-rank",
        "Horovod DEBUG by rank",
        "Trace and debug lines of Horovod's C++ core (HOROVOD_LOG_LEVEL=debug), rank by rank in time order.",
        'event.dataset:"horovod.core" AND log.level:(trace OR debug)',
        ("rank", "log.level", "log.origin.file.name", "log.origin.file.line", "message"),
        (("rank", "asc"), ("@timestamp", "asc")),
    ),
    SavedSearch(
        "job-timeline",
        "Job timeline",
        "Every event of a job, all ranks and sources, oldest first. Pick the job with a `job` filter"
        " or with the Job control of the Horovod training dashboard.",
        "",
        ("job", "rank", "host.name", "event.dataset", "log.level", "step", "message"),
        (("@timestamp", "asc"),),
    ),
    SavedSearch(
        "latest-errors",
        "Latest errors",
        "Events at level error or above, newest first, with the exception type.",
        level_query("error"),
        ("rank", "host.name", "step", "error.type", "message"),
    ),
)

CHARTS: Final = (
    Chart(
        "events-by-level",
        "Events by level over time",
        "How many events each level produced over time, all ranks.",
        "bar_stacked",
        (DateHistogram(), Terms("log.level", "Level", size=len(LEVELS))),
        (Count(),),
    ),
    Chart(
        "errors-by-rank-chart",
        "Errors by rank",
        "Number of events at level error or above per rank.",
        "bar",
        (Terms("rank", "Rank", size=100),),
        (Count("Errors"),),
        query=level_query("error"),
    ),
    Chart(
        "last-step-per-rank",
        "Last step per rank",
        "The straggler view: the latest step each rank logged and when; the lowest step is at the top.",
        "table",
        (Terms("rank", "Rank", size=1000, order="key"),),
        (LastValue("step", "Last step"), Max("@timestamp", "Last event")),
        query="_exists_:step",
        table_sort=(1, "asc"),
    ),
)

DASHBOARD: Final = Dashboard(
    "horovod-training",
    "Horovod training",
    "One training job at a glance: levels over time, errors and stalls by rank, the straggler view."
    " Pick a job and ranks with the controls.",
    (Control("job", "Job", ("_key", "desc")), Control("rank", "Rank", ("_key", "asc"))),
    (
        Panel("events-by-level", 0, 0, 32, 12),
        Panel("errors-by-rank-chart", 32, 0, 16, 12),
        Panel("last-step-per-rank", 0, 12, 16, 16),
        Panel("stall-warnings", 16, 12, 32, 16),
        Panel("latest-errors", 0, 28, 48, 16),
    ),
)


# --- rendering into Kibana's saved-object shapes --------------------------------------


def _saved_object(type_: str, slug: str, attributes: dict[str, Any], references: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "type": type_,
        "id": object_id(slug),
        "attributes": attributes,
        "references": references,
        "coreMigrationVersion": CORE_MIGRATION_VERSION,
        "typeMigrationVersion": MIGRATION_VERSIONS[type_],
        "managed": False,
    }


def _data_view_ref(name: str) -> dict[str, str]:
    return {"name": name, "type": "index-pattern", "id": DATA_VIEW_ID}


def _data_view() -> dict[str, Any]:
    """Over every data stream of every namespace; integer fields shown without thousands separators."""
    whole_numbers = {f.name: {"id": "number", "params": {"pattern": "0"}} for f in FIELDS if f.type in ("integer", "long") and f.origin == "hvdlog"}
    return _saved_object(
        "index-pattern",
        "logs",
        {
            "title": INDEX_PATTERN,
            "name": "Horovod logs",
            "timeFieldName": "@timestamp",
            "allowNoIndex": True,
            "fieldFormatMap": dumps(whole_numbers),
            "fieldAttrs": "{}",
            "runtimeFieldMap": "{}",
            "sourceFilters": "[]",
            "fields": "[]",
        },
        [],
    )


def _search(search: SavedSearch) -> dict[str, Any]:
    source = {"query": {"query": search.query, "language": "lucene"}, "filter": [], "indexRefName": _SEARCH_INDEX_REF}
    return _saved_object(
        "search",
        search.slug,
        {
            "title": search.title,
            "description": search.description,
            "columns": list(search.columns),
            "sort": [list(pair) for pair in search.sort],
            "grid": {},
            "hideChart": False,
            "isTextBasedQuery": False,
            "kibanaSavedObjectMeta": {"searchSourceJSON": dumps(source)},
        },
        [_data_view_ref(_SEARCH_INDEX_REF)],
    )


def _column(part: Bucket | Metric, order_by: str) -> dict[str, Any]:
    """One Lens column, in the shape 8.x exports write; ``order_by`` is the metric a terms bucket ranks by."""
    bucketed = isinstance(part, (DateHistogram, Terms))
    field = "___records___" if isinstance(part, Count) else part.field
    data_type = "number" if isinstance(part, Count) else _data_type(field)
    column: dict[str, Any] = {
        "label": part.label,
        "customLabel": True,
        "dataType": data_type,
        "sourceField": field,
        "isBucketed": bucketed,
        "scale": "interval" if data_type == "date" else "ordinal" if bucketed else "ratio",
    }
    if isinstance(part, DateHistogram):
        column.update(operationType="date_histogram", params={"interval": "auto", "includeEmptyRows": True, "dropPartials": False})
    elif isinstance(part, Terms):
        by_key = part.order == "key"
        order = {"type": "alphabetical", "fallback": False} if by_key else {"type": "column", "columnId": order_by}
        column.update(operationType="terms", params={
            "size": part.size, "orderBy": order, "orderDirection": "asc" if by_key else "desc",
            "otherBucket": False, "missingBucket": False, "parentFormat": {"id": "terms"},
        })
    elif isinstance(part, LastValue):
        # Lens takes the value from the latest document that has the field.
        column.update(operationType="last_value", filter={"query": f"{field}: *", "language": "kuery"},
                      params={"sortField": part.sort_field, "showArrayValues": False})
    else:
        column.update(operationType="count" if isinstance(part, Count) else "max", params={"emptyAsNull": True})
    return column


def _data_type(name: str) -> str:
    """Lens data type of a contract field."""
    type_ = next(f.type for f in FIELDS if f.name == name)
    return {"keyword": "string", "date": "date", "boolean": "boolean"}.get(type_, "number")


def _lens(chart: Chart) -> dict[str, Any]:
    ids = [f"col{index}" for index in range(len(chart.buckets) + len(chart.metrics))]
    bucket_ids, metric_ids = ids[: len(chart.buckets)], ids[len(chart.buckets):]
    columns = {cid: _column(part, metric_ids[0]) for cid, part in zip(ids, (*chart.buckets, *chart.metrics))}
    if chart.kind == "table":
        visualization: dict[str, Any] = {"layerId": _LAYER, "layerType": "data", "columns": [{"columnId": cid} for cid in ids]}
        if chart.table_sort is not None:
            visualization["sorting"] = {"columnId": ids[chart.table_sort[0]], "direction": chart.table_sort[1]}
        vis_type = "lnsDatatable"
    else:
        layer: dict[str, Any] = {"layerId": _LAYER, "layerType": "data", "seriesType": chart.kind,
                                 "xAccessor": bucket_ids[0], "accessors": metric_ids}
        if len(bucket_ids) > 1:
            layer["splitAccessor"] = bucket_ids[1]
        visualization = {"preferredSeriesType": chart.kind, "legend": {"isVisible": True, "position": "right"},
                         "valueLabels": "hide", "layers": [layer]}
        vis_type = "lnsXY"
    # Lens lists bucket columns first, and a split bucket before the x axis.
    order = [*reversed(bucket_ids)] if chart.kind != "table" else bucket_ids
    state = {
        "datasourceStates": {"formBased": {"layers": {_LAYER: {"columns": columns, "columnOrder": [*order, *metric_ids], "incompleteColumns": {}}}}},
        "visualization": visualization,
        "query": {"query": chart.query, "language": "lucene"},
        "filters": [],
        "internalReferences": [],
        "adHocDataViews": {},
    }
    attributes = {"title": chart.title, "description": chart.description, "visualizationType": vis_type, "state": state}
    return _saved_object("lens", chart.slug, attributes, [_data_view_ref(f"indexpattern-datasource-layer-{_LAYER}")])


def _dashboard(board: Dashboard, types: dict[str, str]) -> dict[str, Any]:
    panels, references = [], []
    for panel in board.panels:
        index = panel.slug
        panels.append({"type": types[panel.slug], "panelIndex": index, "panelRefName": f"panel_{index}", "embeddableConfig": {},
                       "gridData": {"x": panel.x, "y": panel.y, "w": panel.w, "h": panel.h, "i": index}})
        references.append({"name": f"{index}:panel_{index}", "type": types[panel.slug], "id": object_id(panel.slug)})
    controls = {}
    for order, control in enumerate(board.controls):
        cid = f"control-{control.field.replace('.', '-')}"
        explicit = {"id": cid, "fieldName": control.field, "title": control.title, "dataViewId": DATA_VIEW_ID,
                    "selectedOptions": [], "sort": {"by": control.sort[0], "direction": control.sort[1]}, "enhancements": {}}
        controls[cid] = {"type": "optionsListControl", "order": order, "grow": True, "width": "medium", "explicitInput": explicit}
        references.append(_data_view_ref(f"controlGroup_{cid}:optionsListDataView"))
    ignore_parent = {"ignoreFilters": False, "ignoreQuery": False, "ignoreTimerange": False, "ignoreValidations": False}
    attributes = {
        "title": board.title,
        "description": board.description,
        "timeRestore": True,
        "timeFrom": board.time_from,
        "timeTo": "now",
        "refreshInterval": {"pause": False, "value": board.refresh_ms},
        "optionsJSON": dumps({"useMargins": True, "syncColors": False, "syncCursor": True, "syncTooltips": False, "hidePanelTitles": False}),
        "panelsJSON": dumps(panels),
        "kibanaSavedObjectMeta": {"searchSourceJSON": dumps({"query": {"query": "", "language": "lucene"}, "filter": []})},
        "controlGroupInput": {
            "controlStyle": "oneLine",
            "chainingSystem": "HIERARCHICAL",
            "showApplySelections": False,
            "ignoreParentSettingsJSON": dumps(ignore_parent),
            "panelsJSON": dumps(controls),
        },
    }
    return _saved_object("dashboard", board.slug, attributes, references)


def saved_objects() -> list[dict[str, Any]]:
    """Every object, referenced objects before the objects that use them."""
    types = {**{s.slug: "search" for s in SEARCHES}, **{c.slug: "lens" for c in CHARTS}}
    return [_data_view(), *map(_search, SEARCHES), *map(_lens, CHARTS), _dashboard(DASHBOARD, types)]


def to_ndjson(objects: list[dict[str, Any]] | None = None) -> str:
    """One canonical JSON object per line, as ``POST /api/saved_objects/_import`` reads it."""
    return "".join(dumps(obj) + "\n" for obj in (saved_objects() if objects is None else objects))

"""Render the views of :mod:`hvdlog.elastic.views` as Kibana 8.19 saved objects (NDJSON).

:func:`saved_objects` produces the shapes Kibana's import API takes (``*JSON`` attributes as
strings, references by name, stable ``hvdlog-<slug>`` ids, migration versions 8.19 knows)
and :func:`to_ndjson` the committed ``kibana/hvdlog.ndjson``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from hvdlog.elastic.templates import INDEX_PATTERN
from hvdlog.elastic.views import (
    CHARTS,
    DASHBOARD,
    SEARCHES,
    Average,
    Bucket,
    Chart,
    Count,
    Dashboard,
    DateHistogram,
    LastValue,
    Metric,
    SavedSearch,
    Sum,
    Terms,
)
from hvdlog.fields import FIELDS

__all__ = [
    "DATA_VIEW_ID",
    "MIGRATION_VERSIONS",
    "dumps",
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
        operation = {Count: "count", Sum: "sum", Average: "average"}.get(type(part), "max")
        column.update(operationType=operation, params={"emptyAsNull": True})
    return column


def _data_type(name: str) -> str:
    """Lens data type of a contract field."""
    type_ = next(f.type for f in FIELDS if f.name == name)
    return {"keyword": "string", "date": "date", "boolean": "boolean"}.get(type_, "number")


def _lens(chart: Chart) -> dict[str, Any]:
    ids = [f"col{index}" for index in range(len(chart.buckets) + len(chart.metrics))]
    bucket_ids, metric_ids = ids[: len(chart.buckets)], ids[len(chart.buckets):]
    columns = {cid: _column(part, metric_ids[0]) for cid, part in zip(ids, (*chart.buckets, *chart.metrics), strict=True)}
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

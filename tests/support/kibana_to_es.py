"""Translate our Kibana saved objects into the Elasticsearch requests Kibana itself would send.

Kept mechanical and small on purpose, for exactly the shapes hvdlog generates: Lucene
queries become ``query_string`` with ``analyze_wildcard`` (Kibana's default
``query:queryString:options``), filters contribute their ``query`` (negated ones go to
``must_not``, disabled ones are dropped), an options-list control selection becomes
the phrase/phrases filter Kibana builds for it, and a Lens layer becomes nested bucket
aggregations with its metrics at the leaves. Anything else raises, so a new shape in the
generator cannot pass untranslated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from hvdlog.documents import get_field

__all__ = ["lens_request", "lens_rows", "options_list_filter", "search_request"]

_KUERY_EXISTS = re.compile(r"^\s*([\w.@]+)\s*:\s*\*\s*$")


def options_list_filter(field: str, values: list[Any]) -> dict[str, Any]:
    """The filter an options-list control adds: ``match_phrase`` for one value, ``should`` of them for several."""
    if len(values) == 1:
        return {"query": {"match_phrase": {field: values[0]}}, "meta": {"key": field, "type": "phrase", "negate": False, "disabled": False}}
    should = [{"match_phrase": {field: value}} for value in values]
    return {"query": {"bool": {"should": should, "minimum_should_match": 1}}, "meta": {"key": field, "type": "phrases", "negate": False, "disabled": False}}


def _query(query: dict[str, Any]) -> dict[str, Any]:
    if query["language"] == "lucene":
        text = query["query"].strip()
        return {"query_string": {"query": text, "analyze_wildcard": True}} if text else {"match_all": {}}
    match = _KUERY_EXISTS.match(query["query"]) if query["language"] == "kuery" else None
    if match:
        return {"exists": {"field": match.group(1)}}
    raise ValueError(f"no translation for query {query!r}")


def _bool(query: dict[str, Any], filters: list[dict[str, Any]]) -> dict[str, Any]:
    active = [f for f in filters if not f.get("meta", {}).get("disabled")]
    return {
        "bool": {
            "must": [_query(query)],
            "filter": [f["query"] for f in active if not f.get("meta", {}).get("negate")],
            "must_not": [f["query"] for f in active if f.get("meta", {}).get("negate")],
        }
    }


def search_request(saved_search: dict[str, Any], controls: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The search body of a saved search (query, its filters, the control filters, its sort)."""
    attributes = saved_search["attributes"]
    source = json.loads(attributes["kibanaSavedObjectMeta"]["searchSourceJSON"])
    sort = [{field: {"order": direction}} for field, direction in attributes["sort"]]
    return {"query": _bool(source["query"], [*source.get("filter", []), *controls]), "sort": sort, "size": 1000}


#: Lens metric operation -> the Elasticsearch aggregation that computes it (one ``value``).
_VALUE_METRICS = {"max": "max", "sum": "sum", "average": "avg"}


def _layer(lens: dict[str, Any]) -> dict[str, Any]:
    layers = lens["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]
    if len(layers) != 1:
        raise ValueError("only single-layer Lens charts are translated")
    return next(iter(layers.values()))


def _bucket_agg(column: dict[str, Any], columns: dict[str, Any], date_interval: str) -> dict[str, Any]:
    operation, field, params = column["operationType"], column["sourceField"], column["params"]
    if operation == "date_histogram":
        # Kibana turns interval "auto" into a fixed interval from the time range; the test pins one.
        return {"date_histogram": {"field": field, "fixed_interval": date_interval, "min_doc_count": 1}}
    if operation == "terms":
        order_by = params["orderBy"]
        if order_by["type"] == "alphabetical":
            order = {"_key": params["orderDirection"]}
        elif columns[order_by["columnId"]]["operationType"] == "count":
            order = {"_count": params["orderDirection"]}
        else:
            raise ValueError(f"no translation for terms order {order_by!r}")
        return {"terms": {"field": field, "size": params["size"], "order": order}}
    raise ValueError(f"no translation for bucket operation {operation!r}")


def _metric_agg(column: dict[str, Any]) -> dict[str, Any] | None:
    operation, field = column["operationType"], column["sourceField"]
    if operation == "count":
        return None
    if operation in _VALUE_METRICS:
        return {_VALUE_METRICS[operation]: {"field": field}}
    if operation == "last_value":
        top = {"top_hits": {"size": 1, "sort": [{column["params"]["sortField"]: {"order": "desc"}}], "_source": {"includes": [field]}}}
        return {"filter": _query(column["filter"]), "aggs": {"last": top}}
    raise ValueError(f"no translation for metric operation {operation!r}")


def _split(layer: dict[str, Any]) -> tuple[list[str], list[str]]:
    columns = layer["columns"]
    buckets = [cid for cid in layer["columnOrder"] if columns[cid]["isBucketed"]]
    return buckets, [cid for cid in layer["columnOrder"] if not columns[cid]["isBucketed"]]


def lens_request(lens: dict[str, Any], controls: Sequence[dict[str, Any]] = (), date_interval: str = "1s") -> dict[str, Any]:
    """The aggregation request of a one-layer Lens chart: buckets nested in column order, metrics inside."""
    state, layer = lens["attributes"]["state"], _layer(lens)
    columns = layer["columns"]
    buckets, metrics = _split(layer)
    aggs: dict[str, Any] = {cid: agg for cid in metrics if (agg := _metric_agg(columns[cid])) is not None}
    for cid in reversed(buckets):
        node = _bucket_agg(columns[cid], columns, date_interval)
        if aggs:
            node["aggs"] = aggs
        aggs = {cid: node}
    return {"size": 0, "query": _bool(state["query"], [*state["filters"], *controls]), "aggs": aggs}


def lens_rows(lens: dict[str, Any], response: dict[str, Any]) -> list[dict[str, Any]]:
    """Flatten the aggregation response into one row per leaf bucket, keyed by column label."""
    layer = _layer(lens)
    columns = layer["columns"]
    buckets, metrics = _split(layer)

    def leaf(bucket: dict[str, Any], cid: str) -> Any:
        column = columns[cid]
        if column["operationType"] == "count":
            return bucket["doc_count"]
        if column["operationType"] in _VALUE_METRICS:
            return bucket[cid]["value"]
        hits = bucket[cid]["last"]["hits"]["hits"]
        return get_field(hits[0]["_source"], column["sourceField"]) if hits else None

    def walk(node: dict[str, Any], depth: int, row: dict[str, Any]) -> list[dict[str, Any]]:
        if depth == len(buckets):
            return [{**row, **{columns[cid]["label"]: leaf(node, cid) for cid in metrics}}]
        cid = buckets[depth]
        rows = []
        for bucket in node[cid]["buckets"]:
            rows += walk(bucket, depth + 1, {**row, columns[cid]["label"]: bucket["key"]})
        return rows

    return walk(response["aggregations"], 0, {})

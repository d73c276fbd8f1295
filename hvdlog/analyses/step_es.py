"""``stragglers --es``: Elasticsearch does the counting; what comes back grows with ranks, not events.

One composite aggregation over (job, epoch, rank) of the step events gives, per rank, what a
:class:`~hvdlog.analyses.stragglers.Tally` keeps: the count, the highest step, the first event
(time, then step) and the last (time, host) through ``top_hits``, and the ``samples_per_sec``
histogram in the Tally's own bins (3 significant digits: per decade of the values, found
first with a ``stats`` aggregation, a ``histogram`` of interval ``10**(d - 2)``; no script, so
it works where painless is not installed). A second composite gives the largest ``size``
per (job, epoch). Pages of
buckets follow ``after_key``, so any number of ranks is read in bounded responses.

When the filter cannot be said exactly as a query (a regular-expression or case-insensitive
PATTERN; documents without a ``job``, whose job comes from their file path; an index that
does not map ``horovod.elastic.epoch``, so incarnations cannot be told apart), the documents
are read instead (:meth:`~hvdlog.query.es.ElasticsearchSource.search`), so the answer is
always the one the files give.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Final

from hvdlog.analyses.stragglers import EPOCH_FIELD, STEP_EVENTS, RankTrack, Tally, decade
from hvdlog.documents import get_field, timestamp_millis
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.es_query import to_query
from hvdlog.query.spec import MAX_JOB_SIZE, Filter

__all__ = ["exact", "step_tally"]

#: Buckets (ranks) per page of the composite aggregation.
PAGE: Final = 1000
#: Newest step events fetched per rank: ties within a millisecond are decided on their microseconds.
LAST_TIES: Final = 10


def exact(spec: Filter) -> bool:
    """Whether the query for ``spec`` selects exactly what :meth:`Filter.matches` does."""
    return spec.pattern is None


def _keys(with_rank: bool) -> list[dict[str, Any]]:
    sources: list[dict[str, Any]] = [
        {"job": {"terms": {"field": "job", "missing_bucket": True}}},
        {"epoch": {"terms": {"field": EPOCH_FIELD, "missing_bucket": True}}},
    ]
    return [*sources, {"rank": {"terms": {"field": "rank"}}}] if with_rank else sources


def _decades(source: ElasticsearchSource, query: dict[str, Any]) -> list[int]:
    """The decades the positive samples/s values of the query fall in."""
    positive = {"bool": {"filter": [query, {"range": {"samples_per_sec": {"gt": 0}}}]}}
    stats = source.aggregate(positive, {"sps": {"stats": {"field": "samples_per_sec"}}})["sps"]
    if not stats.get("count") or stats.get("min") is None or not math.isfinite(stats["max"]):
        return []
    return list(range(decade(stats["min"]), decade(stats["max"]) + 1))


def _bins(decades: list[int]) -> dict[str, Any]:
    return {
        f"sps_{index}": {"filter": {"range": {"samples_per_sec": {"gte": 10.0**power, "lt": 10.0 ** (power + 1)}}},
                      "aggs": {"h": {"histogram": {"field": "samples_per_sec", "interval": 10.0 ** (power - 2), "min_doc_count": 1}}}}
        for index, power in enumerate(decades)
    }


def _rank_aggs(decades: list[int]) -> dict[str, Any]:
    return {
        "max_step": {"max": {"field": "step"}},
        "first": {"top_hits": {"size": 1, "sort": [{"@timestamp": {"order": "asc"}}, {"step": {"order": "asc"}}],
                               "_source": ["@timestamp", "step"]}},
        # several: Elasticsearch sorts by the millisecond, and the newest is chosen among ties as the files do (RankTrack.newer)
        "last": {"top_hits": {"size": LAST_TIES, "sort": [{"@timestamp": {"order": "desc"}}], "_source": ["@timestamp", "host.name", "host"]}},
        **_bins(decades),
    }


def _buckets(source: ElasticsearchSource, query: dict[str, Any], with_rank: bool, aggs: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every bucket of the composite aggregation, page by page."""
    after: dict[str, Any] | None = None
    while True:
        composite: dict[str, Any] = {"size": PAGE, "sources": _keys(with_rank)}
        if after is not None:
            composite["after"] = after
        result = source.aggregate(query, {"keys": {"composite": composite, "aggs": aggs}})["keys"]
        yield from result["buckets"]
        after = result.get("after_key")
        if len(result["buckets"]) < PAGE or after is None:  # a short page is the last: no request for an empty one
            return


def _track(bucket: dict[str, Any]) -> RankTrack:
    track = RankTrack(events=bucket["doc_count"])
    track.last_step = int(bucket["max_step"]["value"]) if bucket["max_step"]["value"] is not None else None
    first = bucket["first"]["hits"]["hits"]
    last = bucket["last"]["hits"]["hits"]
    if first and (millis := timestamp_millis(first[0]["_source"].get("@timestamp"))) is not None:
        track.first_ms, track.first_step = millis, first[0]["_source"].get("step")
    newest: dict[str, Any] | None = None
    for hit in last:
        millis, stamp = timestamp_millis(hit["_source"].get("@timestamp")), hit["_source"].get("@timestamp")
        if millis is not None and track.newer(millis, stamp if isinstance(stamp, str) else None):
            track.last_ms, track.last_seen, newest = millis, stamp if isinstance(stamp, str) else track.last_seen, hit["_source"]
    if newest is not None:
        host = get_field(newest, "host.name")
        track.host = host if isinstance(host, str) else None
    track.samples = {float(item["key"]): item["doc_count"] for name, part in bucket.items() if name.startswith("sps_")
                     for item in part["h"]["buckets"]}
    return track


def step_tally(source: ElasticsearchSource, spec: Filter) -> Tally | None:
    """The tally of the step events ``spec`` selects, counted by Elasticsearch; None when only
    reading the documents gives the files' answer (see the module's docstring)."""
    if not exact(spec) or not source.aggregatable(EPOCH_FIELD):
        return None
    tally = Tally()
    steps = to_query(replace(spec, any_of=STEP_EVENTS))
    query = {"bool": {"filter": [steps, {"exists": {"field": "rank"}}]}}
    for bucket in _buckets(source, query, True, _rank_aggs(_decades(source, query))):
        job, epoch, rank = bucket["key"]["job"], bucket["key"]["epoch"], bucket["key"]["rank"]
        if job is None:
            return None  # a job named by file paths only: the documents decide
        tally.tracks[(str(job), int(epoch or 0), int(rank))] = _track(bucket)
    sized = {"bool": {"filter": [to_query(spec), {"range": {"size": {"gt": 0, "lte": MAX_JOB_SIZE}}}]}}
    for bucket in _buckets(source, sized, False, {"size": {"max": {"field": "size"}}}):
        job, epoch = bucket["key"]["job"], bucket["key"]["epoch"]
        if job is not None and bucket["size"]["value"] is not None:
            tally.sizes[(str(job), int(epoch or 0))] = int(bucket["size"]["value"])
    return tally

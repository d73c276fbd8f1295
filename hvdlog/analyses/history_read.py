"""One :class:`~hvdlog.analyses.history.JobRecord` per job, from a log root or from Elasticsearch.

Both read the same little per job, so ``history`` gives the same answers over both:

* where its ranks ran (host -> number of ranks): the layout's paths, or a terms aggregation
  on ``host.name`` with the cardinality of ``rank``;
* its span and last step: the first and last lines of each events file, or min/max
  aggregations;
* its first :data:`EVIDENCE_PER_JOB` failure-evidence events by time (the first-failure
  model's input, ``FAILURE_EVENTS``, without exit records of status 0: every finished rank
  writes one), or a ``top_hits`` of the same filter per job.

Over Elasticsearch the server aggregates (composite pages of :data:`PAGE` jobs): what crosses
the network is one bucket per job (its name), plus, for the jobs with failure evidence, that
capped evidence and one bucket per host (ranks, span, last step); never the events. The other
jobs are only counted: nothing else of them enters the answers. Over files, hosts are read for every job (the paths
say them for free); only failed jobs' hosts enter the answers.
The fingerprint is not a stored field: it is computed here from the evidence, as
``first-failure`` does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson

from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.history import JobRecord
from hvdlog.analyses.last_words import CHAIN_KINDS
from hvdlog.analyses.report import iso
from hvdlog.documents import Document, get_field, sort_key, timestamp_millis
from hvdlog.layout import parse_path, walk
from hvdlog.parse.evidence_rules import KIND
from hvdlog.query.spec import Filter

__all__ = ["EVIDENCE_PER_JOB", "PAGE", "from_elasticsearch", "from_roots", "history_aggregations", "record_of"]

#: Failure-evidence events per job the model reads (the first ones by time; a chain of failures
#: is decided in its first events, and the bound keeps Elasticsearch's answer small).
EVIDENCE_PER_JOB: Final = 50
#: Jobs per composite-aggregation page.
PAGE: Final = 1000
_TAIL: Final = 16384


def record_of(job: str, hosts: dict[str, int], first_ms: int | None, last_ms: int | None, last_step: int | None,
              evidence: Iterable[Document]) -> JobRecord:
    """A job's record from its facts and failure evidence (capped and ordered here, the same for every source)."""
    # NCCL's WARN chains are a failure only by a rank's last words, which history does not read: they take no place
    docs = sorted((doc for doc in evidence if get_field(doc, "process.exit_code") != 0 and get_field(doc, KIND) not in CHAIN_KINDS),
                  key=sort_key)[:EVIDENCE_PER_JOB]
    record = JobRecord(job, iso(first_ms), iso(last_ms), dict(sorted(hosts.items())), last_step)
    reports = first_failure(docs) if docs else []
    if reports and not reports[0].recovered:
        report = reports[0]
        record.failed = True
        record.fingerprint = report.fingerprint
        record.cause = report.cause
        if report.culprit is not None:
            record.culprit_host = report.culprit.get("host")
            record.culprit_rank = report.culprit.get("rank")
    return record


def _edges(path: Path) -> Iterator[Document]:
    """The first line and the last lines of an events file, as documents (unreadable: none)."""
    try:
        with open(path, "rb") as handle:
            lines = [handle.readline()]
            start = max(handle.tell(), os.fstat(handle.fileno()).st_size - _TAIL)
            handle.seek(start)
            tail = handle.read().split(b"\n")
    except OSError:
        return
    for line in lines + (tail[1:] if start > len(lines[0]) else tail):
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            yield doc


def _job_files(roots: Iterable[str], warn: Callable[[str], None]) -> dict[str, list[Path]]:
    jobs: dict[str, list[Path]] = {}
    for root in roots:
        for path in walk([root], warn):
            found = parse_path(path)
            relative = path.relative_to(root).parts if path.is_relative_to(root) else ()
            job = found.job if found is not None else relative[0] if len(relative) > 1 else Path(root).name
            jobs.setdefault(job, []).append(path)
    return jobs


def from_roots(roots: Iterable[str], warn: Callable[[str], None], since: datetime | None = None) -> list[JobRecord]:
    """Every job under the roots (hvdlog's layout ``<root>/<job>/<host>/rank-N.jsonl``; other files: the first folder is the job)."""
    from hvdlog.query.files import FileSource

    records = []
    for job, paths in _job_files(roots, warn).items():
        ranks: dict[str, set[int]] = {}
        millis: list[int] = []
        steps: list[int] = []
        for path in paths:
            if (found := parse_path(path)) is not None and found.rank is not None:
                ranks.setdefault(found.host, set()).add(found.rank)
            if path.name.endswith(".jsonl"):
                for doc in _edges(path):
                    if (at := timestamp_millis(doc.get("@timestamp"))) is not None:
                        millis.append(at)
                    if isinstance(step := doc.get("step"), int) and not isinstance(step, bool):
                        steps.append(step)
        if since is not None and millis and max(millis) < since.timestamp() * 1000:
            continue
        evidence = FileSource(paths, warn=lambda _m: None).search(Filter(any_of=FAILURE_EVENTS))
        hosts = {host: len(found) for host, found in ranks.items()}
        records.append(record_of(job, hosts, min(millis, default=None), max(millis, default=None), max(steps, default=None), evidence))
    return records


def _pages(source: Any, query: dict[str, Any], sources: list[dict[str, Any]], aggs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every bucket of a composite aggregation, :data:`PAGE` per request."""
    buckets: list[dict[str, Any]] = []
    after = None
    while True:
        composite: dict[str, Any] = {"size": PAGE, "sources": sources}
        if after is not None:
            composite["after"] = after
        answer = source.aggregate(query, {"page": {"composite": composite, **({"aggs": aggs} if aggs else {})}})["page"]
        buckets += answer["buckets"]
        after = answer.get("after_key")
        if len(answer["buckets"]) < PAGE or after is None:
            return buckets


_BY_JOB: Final[list[dict[str, Any]]] = [{"job": {"terms": {"field": "job"}}}]
#: Job and host; a document without ``host.name`` still counts in its job's span.
_BY_JOB_HOST: Final[list[dict[str, Any]]] = [*_BY_JOB, {"host": {"terms": {"field": "host.name", "missing_bucket": True}}}]


def history_aggregations() -> dict[str, dict[str, Any]]:
    """The aggregations, by what they read: the failure evidence of the jobs that have any (the
    first :data:`EVIDENCE_PER_JOB` by time); and, for those jobs only, their span, last step and
    how many ranks ran on each host. Every other job is only counted (a composite of its name)."""
    from hvdlog.query.es_query import to_query

    return {
        "evidence": {"first": {"top_hits": {"size": EVIDENCE_PER_JOB, "sort": [{"@timestamp": "asc"}]}}},
        "evidence_query": {"bool": {"filter": [to_query(Filter(any_of=FAILURE_EVENTS))],
                                    "must_not": [{"term": {"process.exit_code": 0}}, {"terms": {KIND: sorted(CHAIN_KINDS)}}]}},
        "hosts": {"ranks": {"cardinality": {"field": "rank"}}, "first": {"min": {"field": "@timestamp"}},
                  "last": {"max": {"field": "@timestamp"}}, "last_step": {"max": {"field": "step"}}},
    }


def _number(bucket: dict[str, Any], name: str) -> int | None:
    value = bucket[name].get("value")
    return int(value) if value is not None else None


def _extreme(values: Iterable[int | None], pick: Callable[[list[int]], int]) -> int | None:
    present = [value for value in values if value is not None]
    return pick(present) if present else None


def _facts(source: Any, jobs: list[str]) -> dict[str, tuple[dict[str, int], int | None, int | None, int | None]]:
    """Per job: ranks per host, first and last time, last step (one bucket per job and host, :data:`PAGE` jobs a query)."""
    buckets: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(jobs), PAGE):
        query = {"terms": {"job": jobs[start:start + PAGE]}}
        for bucket in _pages(source, query, _BY_JOB_HOST, history_aggregations()["hosts"]):
            buckets.setdefault(str(bucket["key"]["job"]), []).append(bucket)
    facts = {}
    for job, found in buckets.items():
        hosts = {str(bucket["key"]["host"]): int(bucket["ranks"]["value"]) for bucket in found
                 if bucket["key"]["host"] is not None and bucket["ranks"]["value"]}
        facts[job] = (hosts, _extreme((_number(bucket, "first") for bucket in found), min),
                      _extreme((_number(bucket, "last") for bucket in found), max),
                      _extreme((_number(bucket, "last_step") for bucket in found), max))
    return facts


def from_elasticsearch(source: Any, since: datetime | None = None) -> list[JobRecord]:
    """Every job in the index (``source``: an :class:`~hvdlog.query.es.ElasticsearchSource`).

    Three composite aggregations, paged by :data:`PAGE` jobs: the names of every job (with
    ``since``: of those with an event at or after it, i.e. whose newest event is); the failure
    evidence of the jobs that have any; and their hosts, spans and last steps. A job without
    evidence costs one bucket of its name; history needs nothing else of it.
    """
    aggs = history_aggregations()
    scope: dict[str, Any] = {"match_all": {}} if since is None else {
        "range": {"@timestamp": {"gte": math.ceil(since.timestamp() * 1000), "format": "epoch_millis"}}}
    names = {str(bucket["key"]["job"]) for bucket in _pages(source, scope, _BY_JOB, {})}
    evidence = {str(bucket["key"]["job"]): [hit["_source"] for hit in bucket["first"]["hits"]["hits"]]
                for bucket in _pages(source, aggs["evidence_query"], _BY_JOB, aggs["evidence"]) if str(bucket["key"]["job"]) in names}
    facts = _facts(source, sorted(evidence))
    records = [record_of(job, *facts.get(job, ({}, None, None, None)), evidence[job]) for job in sorted(evidence)]
    return records + [JobRecord(job) for job in sorted(names - set(evidence))]

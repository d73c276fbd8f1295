"""`history --es` scales with jobs, not events: what crosses the network is bounded by the jobs (and the
failed jobs' hosts and capped evidence), measured against a baseline in the same test rather than a
wall-clock limit, which a loaded machine would break (the 10,000-job timing is bench/bench_history_es.py's)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from support.seeded_jobs import BASE, CODE_BUG, ECC, ONE_OFFS, job_documents

from hvdlog.analyses.history import History, analyse
from hvdlog.analyses.history_read import from_elasticsearch
from hvdlog.documents import expand
from hvdlog.query.es import ElasticsearchSource

pytestmark = pytest.mark.elasticsearch

HOSTS = [f"gpu{index:02d}" for index in range(24)]
BAD = HOSTS[5]
#: Failed jobs: an ECC error on the bad host, the code bug, the one-offs.
PLAN = [("ecc", ECC)] * 5 + [("bug", CODE_BUG)] * 3 + [("one-off", failure) for failure in ONE_OFFS[:3]] + [("ok", None)] * 9


def _jobs(steps: int, finished: int = 0) -> list[dict[str, Any]]:
    """The planted jobs, each rank logging ``steps`` steps, then ``finished`` more jobs that end well."""
    rng = random.Random(44)
    docs: list[dict[str, Any]] = []
    plan = [*PLAN, *[("ok", None)] * finished]
    for index, (kind, failure) in enumerate(plan):
        hosts = [*random.Random(index).sample([host for host in HOSTS if host != BAD], 7), BAD]
        culprit = 7 if kind == "ecc" else index % 7
        filled = None if failure is None else (failure[0], failure[1].format(a=index % 8, b=index * 37, c=index + 1), failure[2])
        start = BASE + timedelta(minutes=index)
        docs += [expand(doc) for doc in job_documents(f"job-{index:04d}", start, hosts, filled, culprit, steps, rng, steps=steps)]
    return docs


def _index(es: Any, name: str, docs: list[dict[str, Any]]) -> None:
    from elasticsearch.helpers import bulk

    from hvdlog.elastic.templates import mappings

    es.options(ignore_status=404).indices.delete(index=name)
    es.indices.create(index=name, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    ok, errors = bulk(es, ({"_index": name, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
    assert not errors and ok == len(docs), errors[:3]


def _history(es_url: str, index: str) -> tuple[History, ElasticsearchSource]:
    source = ElasticsearchSource(es_url, index=index, timeout=60)
    return analyse(from_elasticsearch(source)), source


def _shape(found: History) -> tuple[Any, ...]:
    """What history found, without the times and steps that differ between the two runs."""
    return (found.jobs, found.failed, [(entry["fingerprint"]["id"], entry["jobs"], entry["hosts"]) for entry in found.recurring],
            sorted(entry["jobs"][0] for entry in found.one_off), [entry["host"] for entry in found.suspect_hosts])


def test_transfer_grows_with_jobs_not_with_events(es_url: str) -> None:
    """Eight times the events: the same answers from the same bytes; 400 more finished jobs: a small bucket each."""
    from elasticsearch import Elasticsearch

    names = {"few": "hvdlog-history-scale-few", "many": "hvdlog-history-scale-many", "more": "hvdlog-history-scale-more"}
    es = Elasticsearch(es_url, request_timeout=120)
    try:
        few, many = _jobs(steps=2), _jobs(steps=40)
        more = _jobs(steps=2, finished=400)
        assert len(many) > 8 * len(few)
        for key, docs in (("few", few), ("many", many), ("more", more)):
            _index(es, names[key], docs)
        base, base_source = _history(es_url, names["few"])
        assert base.failed == 11 and [entry["host"] for entry in base.suspect_hosts] == [BAD]
        events, events_source = _history(es_url, names["many"])
        assert _shape(events) == _shape(base)
        assert events_source.requests == base_source.requests
        assert events_source.bytes_received <= base_source.bytes_received * 1.05, (events_source.bytes_received, base_source.bytes_received)
        jobs, jobs_source = _history(es_url, names["more"])
        assert jobs.jobs == base.jobs + 400 and _shape(jobs)[1:] == _shape(base)[1:]
        per_job = (jobs_source.bytes_received - base_source.bytes_received) / 400
        assert per_job < 100, f"{per_job:.0f} bytes per finished job: more than its name"
    finally:
        for name in names.values():
            es.options(ignore_status=404).indices.delete(index=name)
        es.close()

"""`stragglers --es`: Elasticsearch counts (composite aggregation), and the rows equal the files' rows.

Plain step events (several jobs, an elastic job with two incarnations, a rank without
samples/s, a size larger than the ranks seen) are written as per-rank files and indexed into
the real Elasticsearch of the harness through the contract's mapping; both sources must give
the same rows, with fewer bytes than the documents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from hvdlog.analyses.resources import RESOURCE_EVENTS
from hvdlog.analyses.step_es import step_tally
from hvdlog.analyses.stragglers import STEP_EVENTS, stragglers
from hvdlog.cli.main import cli
from hvdlog.elastic.templates import mappings
from hvdlog.parse import parse_paths
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.spec import Filter

pytestmark = pytest.mark.elasticsearch

INDEX = "hvdlog-stragglers-agg"


def _line(job: str, rank: int, step: int, size: int, sps: float | None, epoch: int | None) -> bytes:
    event: dict[str, Any] = {
        "@timestamp": f"2026-12-01T10:{step // 60:02d}:{step % 60:02d}.{(rank * 137) % 1000:03d}250Z", "log.level": "info",
        "message": "train step", "rank": rank, "size": size, "host.name": f"node{rank // 2}", "job": job, "step": step,
    }
    if sps is not None:
        event["samples_per_sec"] = sps
    if epoch is not None:
        event["horovod.elastic.epoch"] = epoch
    return orjson.dumps(event)


def _write(root: Path) -> None:
    """Three jobs: one slow rank of 5; an elastic job that lost a rank; a job whose rank 3 logs no samples/s."""
    plans = {
        "slow": [(rank, 5, None, 1.0 if rank != 3 else 0.3) for rank in range(5)],
        "elastic": [(rank, 4, 0, 1.0) for rank in range(4)] + [(rank, 3, 1, 1.0) for rank in range(3)],
        "nosamples": [(rank, 6, None, 1.0 if rank != 3 else None) for rank in range(4)],
    }
    for job, ranks in plans.items():
        for rank, size, epoch, speed in ranks:
            folder = root / job / f"node{rank // 2}"
            folder.mkdir(parents=True, exist_ok=True)
            start = 1 if not epoch else 40
            lines = [_line(job, rank, step, size, None if speed is None else round(900 * speed + (step * 7 + rank) % 31, 1), epoch)
                     for step in range(start, start + 30)]
            with open(folder / f"rank-{rank}.jsonl", "ab") as handle:
                handle.write(b"\n".join(lines) + b"\n")


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch

    root = tmp_path_factory.mktemp("agg")
    _write(root)
    es = Elasticsearch(request.getfixturevalue("es_url"), request_timeout=60)
    es.options(ignore_status=404).indices.delete(index=INDEX)
    # The contract's epoch field (CONTRACT.md: integer), mapped here until the templates carry it.
    mapping = mappings()
    mapping["properties"].setdefault("horovod", {"properties": {}})["properties"].setdefault("elastic", {"properties": {}})[
        "properties"]["epoch"] = {"type": "integer"}
    es.indices.create(index=INDEX, mappings=mapping, settings={"number_of_shards": 2, "number_of_replicas": 0})
    docs = list(parse_paths([str(path) for path in sorted(root.rglob("*.jsonl"))]))
    ok, errors = bulk(es, ({"_index": INDEX, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
    assert not errors and ok == len(docs)
    yield root
    es.indices.delete(index=INDEX)
    es.close()


def _rows(*args: str) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["stragglers", "--json", "--no-timeline", *args], catch_exceptions=False)
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines()]


FLAGS = [(), ("--job", "elastic"), ("--rank", "0-2"), ("--host", "node1"), ("--epoch", "0"), ("--since", "2026-12-01T10:00:10Z")]


@pytest.mark.parametrize("flags", FLAGS, ids=str)
def test_same_rows_from_files_and_from_the_aggregation(indexed: Path, es_url: str, flags: tuple[str, ...]) -> None:
    from_files = _rows(*flags, str(indexed))
    from_es = _rows(*flags, "--es", es_url, "--index", INDEX)
    assert from_files == from_es
    assert from_files[1]


def test_the_answers_are_the_made_ones(indexed: Path, es_url: str) -> None:
    code, rows = _rows("--es", es_url, "--index", INDEX)
    assert code == 0
    flagged = {(row["job"], row["rank"]) for row in rows if row["outlier"]}
    assert ("slow", 3) in flagged and not any(job == "elastic" for job, _ in flagged)
    assert {row["epoch"] for row in rows if row["job"] == "elastic"} == {1}
    assert {row["rank"] for row in rows if row["job"] == "nosamples"} == set(range(6))  # size 6: ranks 4, 5 silent


def _without_epoch(mapping: dict[str, Any]) -> dict[str, Any]:
    """The contract's mapping as an index made before the elastic fields were: no horovod.elastic.epoch."""
    plain = json.loads(json.dumps(mapping))
    del plain["properties"]["horovod"]["properties"]["elastic"]["properties"]["epoch"]
    return plain


def test_without_the_epoch_in_the_mapping_the_documents_decide(indexed: Path, es_url: str) -> None:
    """An index that does not map horovod.elastic.epoch (one made by an older template; dynamic
    mapping is off) cannot separate incarnations: no aggregation, same answer from the documents."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch

    es = Elasticsearch(es_url, request_timeout=60)
    es.options(ignore_status=404).indices.delete(index=f"{INDEX}-plain")
    es.indices.create(index=f"{INDEX}-plain", mappings=_without_epoch(mappings()), settings={"number_of_shards": 1, "number_of_replicas": 0})
    docs = parse_paths([str(path) for path in sorted(indexed.rglob("*.jsonl"))])
    bulk(es, ({"_index": f"{INDEX}-plain", "_source": doc} for doc in docs), refresh="wait_for")
    try:
        assert step_tally(ElasticsearchSource(es_url, index=f"{INDEX}-plain"), Filter(any_of=STEP_EVENTS)) is None
        assert _rows("--es", es_url, "--index", f"{INDEX}-plain") == _rows(str(indexed))
    finally:
        es.indices.delete(index=f"{INDEX}-plain")
        es.close()


def test_transfer_grows_with_ranks_not_events(indexed: Path, es_url: str) -> None:
    """The aggregation's answer is a few hundred bytes per rank, far below the documents' size."""
    source = ElasticsearchSource(es_url, index=INDEX)
    spec = Filter(any_of=STEP_EVENTS + RESOURCE_EVENTS)
    tally = step_tally(source, spec)
    assert tally is not None and len(tally.tracks) == 5 + 4 + 3 + 4
    counted, requests = source.bytes_received, source.requests
    documents = sum(len(orjson.dumps(doc)) for doc in source.search(spec))
    assert counted < documents / 2, (counted, documents)
    # reading the documents is counted too: every page's answer holds at least the documents
    assert source.bytes_received - counted >= documents and source.requests > requests, (source.bytes_received, counted, documents)
    assert [row.to_json() for row in stragglers(tally)]  # rows build from the counted tally

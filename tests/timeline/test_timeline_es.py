"""Timeline documents in a real Elasticsearch: the golden export, the Kibana views' queries, `stragglers --es`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.kibana_to_es import lens_request, lens_rows

from hvdlog.documents import expand
from hvdlog.elastic import kibana
from hvdlog.elastic.kibana_versions import KIBANA_8
from hvdlog.timeline.analysis import analyse_files
from hvdlog.timeline_format.documents import documents
from hvdlog.timeline_format.records import negotiations_and_runs

HERE = Path(__file__).resolve().parents[1]
CAPTURE = HERE / "timeline" / "gloo-straggler-rank1-nocache.json"
GOLDEN = HERE / "corpus" / "horovod.timeline" / "gloo-straggler-rank1-nocache.json-expected.json"
NAMESPACE = "timelinetest"
JOB = "tl-demo"
#: The golden holds the first documents (enough to show every shape: cached-free negotiations, broadcasts, runs).
GOLDEN_COUNT = 24


def exported() -> list[dict[str, Any]]:
    return [expand(doc) for doc in documents(negotiations_and_runs([CAPTURE]), JOB, "vm")]


def test_golden_export(request: pytest.FixtureRequest) -> None:
    """The export of the real capture is the golden (regenerate with --regenerate-goldens, review the diff)."""
    docs = json.loads(json.dumps(exported()[:GOLDEN_COUNT]))
    if request.config.getoption("--regenerate-goldens"):
        GOLDEN.write_text(json.dumps({"expected": docs}, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    assert docs == json.loads(GOLDEN.read_text())["expected"]
    assert {d["event"]["action"] for d in docs} == {"negotiation", "operation"}


def _app_docs() -> list[dict[str, Any]]:
    """Plain step events of the same job: rank 1 slower per step."""
    docs = []
    for rank in (0, 1):
        for step in range(1, 11):
            docs.append(expand({
                "@timestamp": f"2026-11-30T14:43:{10 + step:02d}.{rank * 1000:06d}Z", "message": "train step", "log.level": "info",
                "event.dataset": "horovod.app", "job": JOB, "rank": rank, "local_rank": rank, "size": 2, "host.name": "vm",
                "step": step, "samples_per_sec": 900.0 if rank else 2400.0, "step_seconds": 0.13 + 0.01 * rank + 0.001 * step,
            }))
            docs.append(expand({
                "@timestamp": f"2026-11-30T14:43:{10 + step:02d}.{rank * 1000 + 500:06d}Z", "message": "resources", "log.level": "info",
                "event.dataset": "horovod.app", "event.action": "resources", "job": JOB, "rank": rank, "host.name": "vm",
                "resources.process.cpu_percent": 95.0 + rank * step, "resources.process.rss_bytes": 10**9 + rank * 10**6 + step,
                "resources.host.memory_used_percent": 40.0 + step, "resources.gpu.status": "unavailable: nvidia-ml-py is not installed",
            }))
    return docs


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(es_url: str) -> list[dict[str, Any]]:
    """Our templates installed; the timeline export and the step events indexed in their streams."""
    from elasticsearch import Elasticsearch, helpers
    from hvdlog.elastic.install import ElasticsearchInstaller
    from hvdlog.elastic.templates import data_stream_name

    client = Elasticsearch(es_url, request_timeout=60)
    try:
        list(ElasticsearchInstaller(client, "test").install(NAMESPACE))
        docs = exported() + _app_docs()
        actions = [{"_op_type": "create", "_index": data_stream_name(d["event"]["dataset"], NAMESPACE), "_source": d} for d in docs]
        created, errors = helpers.bulk(client, actions, raise_on_error=False, refresh="wait_for")
        assert not errors and created == len(docs), errors[:3]
        mapping = client.indices.get_mapping(index=data_stream_name("horovod.timeline", NAMESPACE)).body
        assert "timeline" in json.dumps(mapping)
        return docs
    finally:
        client.close()


def _lens(slug: str) -> dict[str, Any]:
    objects = kibana.saved_objects(KIBANA_8)
    return next(obj for obj in objects if obj["id"] == kibana.object_id(slug))


def _second(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()) * 1000


@pytest.mark.elasticsearch
class TestOnElasticsearch:
    def test_who_made_the_collective_wait(self, es: Any, indexed: list[dict[str, Any]]) -> None:
        """The view's query sums the wait per second and per last-ready rank, exactly as the documents say."""
        lens = _lens("who-made-the-collective-wait")
        response = es.search(index=f"logs-horovod.*-{NAMESPACE}", **lens_request(lens)).body
        got = {(row["@timestamp"], row["Last ready rank"]): row["Wait caused (s)"] for row in lens_rows(lens, response)}
        expected: dict[tuple[int, int], float] = defaultdict(float)
        for doc in indexed:
            timeline = doc.get("horovod", {}).get("timeline", {})
            if "last_rank" in timeline:
                expected[(_second(doc["@timestamp"]), timeline["last_rank"])] += timeline["wait_seconds"]
        assert got.keys() == expected.keys() and all(got[k] == pytest.approx(v) for k, v in expected.items())
        assert max(expected.items(), key=lambda kv: kv[1])[0][1] == 1, "rank 1, the straggler, caused the most wait"

    def test_step_time_per_rank(self, es: Any, indexed: list[dict[str, Any]]) -> None:
        """The view's query averages step_seconds per second and per rank."""
        lens = _lens("step-time-per-rank")
        response = es.search(index=f"logs-horovod.*-{NAMESPACE}", **lens_request(lens)).body
        got = {(row["@timestamp"], row["Rank"]): row["Step time (s)"] for row in lens_rows(lens, response)}
        sums: dict[tuple[int, int], list[float]] = defaultdict(list)
        for doc in indexed:
            if "step_seconds" in doc:
                sums[(_second(doc["@timestamp"]), doc["rank"])].append(doc["step_seconds"])
        assert got.keys() == sums.keys() and all(got[k] == pytest.approx(sum(v) / len(v)) for k, v in sums.items())

    def test_resources_per_rank(self, es: Any, indexed: list[dict[str, Any]]) -> None:
        """The table's query gives per rank the mean CPU %, the largest RSS, the mean host memory; no GPU figures here."""
        lens = _lens("resources-per-rank")
        response = es.search(index=f"logs-horovod.*-{NAMESPACE}", **lens_request(lens)).body
        rows = {row["Rank"]: row for row in lens_rows(lens, response)}
        for rank in (0, 1):
            mine = [d["resources"] for d in indexed if d.get("event", {}).get("action") == "resources" and d["rank"] == rank]
            assert rows[rank]["CPU % (mean)"] == pytest.approx(sum(r["process"]["cpu_percent"] for r in mine) / len(mine))
            assert rows[rank]["RSS bytes (max)"] == max(r["process"]["rss_bytes"] for r in mine)
            assert rows[rank]["Host memory % (mean)"] == pytest.approx(sum(r["host"]["memory_used_percent"] for r in mine) / len(mine))
            assert rows[rank]["GPU % (mean)"] is None
        assert sorted(rows) == [0, 1]

    def test_stragglers_from_elasticsearch(self, es_url: str, indexed: list[dict[str, Any]]) -> None:
        """`hvdlog stragglers --es` names rank 1 with timeline evidence, with the figures the file gives."""
        result = subprocess.run(
            [str(Path(sys.executable).with_name("hvdlog")), "stragglers", "--json", "--es", es_url, "--index", f"logs-horovod.*-{NAMESPACE}", "--job", JOB],
            capture_output=True, text=True, check=False, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        rows = {row["rank"]: row for row in map(orjson.loads, result.stdout.splitlines())}
        assert rows[1]["outlier"] and "timeline" in rows[1]["evidence"] and rows[1]["timeline"]["named"]
        assert not rows[0]["timeline"]["named"]
        assert rows[1]["resources"]["samples"] == 10 and rows[1]["resources"]["rss_bytes_max"] == 10**9 + 10**6 + 10
        from_file = analyse_files([CAPTURE])
        for rank in (0, 1):
            expected = from_file.rank(rank).to_json()  # type: ignore[union-attr]
            assert {k: rows[rank]["timeline"][k] for k in expected} == pytest.approx(expected, abs=2e-6)


def test_stored_documents_keep_every_phase() -> None:
    """The documents Elasticsearch stores give the same time per phase as the file (communication and memcpy too)."""
    from hvdlog.timeline.analysis import summarise
    from hvdlog.timeline_format.documents import records_from_documents

    whole = analyse_files([CAPTURE])
    shipped = summarise(records_from_documents(exported()))
    assert {"communication", "memcpy", "negotiation"} <= set(whole.phases)
    assert shipped.phases == pytest.approx(whole.phases, abs=1e-3)


@pytest.mark.elasticsearch
def test_timeline_over_elasticsearch_shows_the_phases(es_url: str, indexed: list[dict[str, Any]]) -> None:
    """`hvdlog timeline --es` prints the phases the files show."""
    result = subprocess.run(
        [sys.executable, "-m", "hvdlog", "timeline", "--json", "--es", es_url, "--index", f"logs-horovod.*-{NAMESPACE}", "--job", JOB],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    (doc,) = map(orjson.loads, result.stdout.splitlines())
    assert doc["timeline"]["phases"] == pytest.approx(analyse_files([CAPTURE]).to_json()["phases"], abs=1e-3)

"""Over Elasticsearch, the "nothing found" sentence is counted by the server (one aggregation), never
by reading every document back: a real server, a stall-free job indexed into it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvdlog.elastic.templates import mappings
from hvdlog.parse import parse_paths

pytestmark = pytest.mark.elasticsearch

INDEX = "hvdlog-nothing-found"


def test_stalls_over_elasticsearch_says_what_the_server_counted(es_url: str, tmp_path: Path) -> None:
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch

    for rank in range(2):
        path = tmp_path / "demo" / "node1" / f"rank-{rank}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"@timestamp": f"2026-11-30T14:00:{step:02d}.000000Z", "log.level": "info", "message": "train step",
                                            "rank": rank, "step": step, "size": 2, "job": "demo"}) + "\n" for step in range(20)))
    docs = list(parse_paths([str(tmp_path)], timezone="UTC"))
    with Elasticsearch(es_url, request_timeout=60) as es:
        if es.indices.exists(index=INDEX):
            es.indices.delete(index=INDEX)
        es.indices.create(index=INDEX, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
        ok, errors = bulk(es, ({"_index": INDEX, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
        assert not errors and ok == 40
    result = subprocess.run([sys.executable, "-m", "hvdlog", "stalls", "--es", es_url, "--index", INDEX], capture_output=True, text=True,
                            timeout=120, check=False, env={**os.environ, "TZ": "UTC"})
    assert result.returncode == 1 and result.stdout == "", result.stderr
    assert result.stderr.strip() == "hvdlog: no stall in 2 ranks, 20 steps of job demo", result.stderr

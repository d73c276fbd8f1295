"""The hang verdict: each class told apart at 1,024 synthetic ranks, a bounded roll-call, from files and Elasticsearch.

The jobs are written by tests/support/hang_jobs.py in the watchdog's own event shape; the
verdict is read through ``hvdlog stalls`` as a user runs it (a process of its own, so its CPU
time is its own)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.hang_jobs import CLASSES, write_hung_job

SIZE = 1024
CULPRIT = 17

#: class -> (verdict kind, confidence, culprits).
EXPECTED: dict[str, tuple[str, str, list[int]]] = {
    "culprit_outside": ("culprit_outside", "certain", [CULPRIT]),
    "divergence": ("divergence", "likely", [CULPRIT]),
    "dead_or_silent": ("dead_or_silent", "certain", [CULPRIT]),
    "silent": ("dead_or_silent", "likely", [CULPRIT]),
    "all_wedged": ("all_wedged", "likely", []),
    "capture_stuck": ("capture_stuck", "likely", [CULPRIT]),
}


@pytest.fixture(name="jobs", scope="module")
def fixture_jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hang")
    for kind in CLASSES:
        write_hung_job(root, kind, SIZE, CULPRIT)
    return root


def _stalls(*args: str) -> tuple[str, float, float]:
    """``hvdlog stalls ARGS`` in its own process: stdout, wall seconds, CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hvdlog", "stalls", "-j", "1", *args], capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"}, check=False, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr
    return done.stdout, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _verdict(stdout: str) -> dict[str, Any]:
    episodes = [json.loads(line) for line in stdout.splitlines()]
    assert len(episodes) == 1
    hang: dict[str, Any] = episodes[0]["hang"]
    return hang


@pytest.mark.parametrize("kind", CLASSES)
def test_each_class_is_told_apart_at_1024_ranks(jobs: Path, kind: str) -> None:
    """The class, its confidence and the culprit are those the job was made with, at 1,024 ranks."""
    stdout, wall, cpu = _stalls("--json", str(jobs / f"hang-{kind}"))
    hang = _verdict(stdout)
    assert (hang["kind"], hang["confidence"], hang["culprits"]) == EXPECTED[kind], hang["reasoning"]
    assert sum(len(group["ranks"]) for group in hang["groups"]) == SIZE
    # The bound is 2 s; on this shared machine wall time measures the load, CPU time the command.
    print(f"{kind}: wall {wall:.2f} s, cpu {cpu:.2f} s")
    assert cpu < 2.0


def test_the_roll_call_is_groups_not_ranks(jobs: Path) -> None:
    """At 1,024 ranks the text is a few lines: one per episode, its roll-call, its verdict (and what to look at next)."""
    stdout, _, _ = _stalls(str(jobs / "hang-culprit_outside"))
    lines = stdout.splitlines()
    assert len(lines) <= 4 and max(len(line) for line in lines) < 600
    assert "roll-call: 1,023 ranks (0-16,18-1023) in `_DistributedOptimizer.step > synchronize`; rank 17 in `__next__ (dataloader.py) at data.py:88`" in stdout
    assert "hang: culprit outside:" in stdout and "[certain]" in stdout


def test_all_wedged_says_what_to_pull_next(jobs: Path) -> None:
    """No CPU-side culprit: the verdict names NCCL's log, NCCL_DEBUG=INFO and GPU health."""
    stdout, _, _ = _stalls(str(jobs / "hang-all_wedged"))
    assert "hang: all wedged:" in stdout and "NCCL_DEBUG=INFO" in stdout and "nvidia-smi" in stdout


def _report(*args: str) -> dict[str, Any]:
    """``hvdlog report --json ARGS``: the one job's stall section."""
    done = subprocess.run([sys.executable, "-m", "hvdlog", "report", "--json", *args], capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"}, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    (doc,) = [json.loads(line) for line in done.stdout.splitlines()]
    stalls: dict[str, Any] = doc["stalls"]
    return stalls


@pytest.mark.parametrize("kind", CLASSES)
def test_report_says_the_hang_class(tmp_path: Path, kind: str) -> None:
    """`hvdlog report` gives the longest stall's verdict (class, confidence, culprits) and says the class in its line (8 ranks)."""
    folder = write_hung_job(tmp_path, kind, 8, 5)
    stalls = _report(str(folder))
    expected, confidence, culprits = EXPECTED[kind]
    assert (stalls["hang"]["kind"], stalls["hang"]["confidence"], stalls["hang"]["culprits"]) == (expected, confidence, culprits and [5])
    assert f"hang: {expected.replace('_', ' ')} ({confidence})" in stalls["summary"], stalls["summary"]


@pytest.mark.elasticsearch
def test_same_verdicts_from_elasticsearch_at_1024_ranks(jobs: Path, es_url: str) -> None:
    """Indexed into the real Elasticsearch, every job gets the verdict the files give, within the same bound."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings
    from hvdlog.parse import parse_paths

    index = "hvdlog-hang-verdicts"
    es = Elasticsearch(es_url, request_timeout=120)
    es.options(ignore_status=404).indices.delete(index=index)
    es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    try:
        docs = list(parse_paths([str(path) for path in sorted(jobs.rglob("*.jsonl"))]))
        ok, errors = bulk(es, ({"_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False, chunk_size=5000)
        assert not errors and ok == len(docs)
        for kind in CLASSES:
            stdout, wall, cpu = _stalls("--json", "--es", es_url, "--index", index, "--job", f"hang-{kind}")
            files, _, _ = _stalls("--json", str(jobs / f"hang-{kind}"))
            assert _verdict(stdout) == _verdict(files)
            print(f"--es {kind}: wall {wall:.2f} s, cpu {cpu:.2f} s")
            assert cpu < 2.0
    finally:
        es.indices.delete(index=index)
        es.close()


@pytest.mark.elasticsearch
def test_report_gives_the_same_verdict_from_elasticsearch(tmp_path: Path, es_url: str) -> None:
    """`hvdlog report --es` gives each stall the verdict `report` gives from the files and `stalls` gives (8 ranks a class)."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings
    from hvdlog.parse import parse_paths

    for kind in CLASSES:
        write_hung_job(tmp_path, kind, 8, 5)
    index = "hvdlog-hang-report"
    es = Elasticsearch(es_url, request_timeout=120)
    es.options(ignore_status=404).indices.delete(index=index)
    es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    try:
        docs = list(parse_paths([str(path) for path in sorted(tmp_path.rglob("*.jsonl"))]))
        ok, errors = bulk(es, ({"_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
        assert not errors and ok == len(docs)
        for kind in CLASSES:
            from_es = _report("--es", es_url, "--index", index, "--job", f"hang-{kind}")
            files, _, _ = _stalls("--json", str(tmp_path / f"hang-{kind}"))
            assert from_es["hang"] == _report(str(tmp_path / f"hang-{kind}"))["hang"] == _verdict(files)
            assert from_es["hang"]["kind"] == EXPECTED[kind][0]
    finally:
        es.indices.delete(index=index)
        es.close()

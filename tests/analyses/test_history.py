"""`hvdlog history` on a seeded root of 40 jobs: it finds what was planted, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.seeded_jobs import BAD_HOST, seed_root

from hvdlog.analyses.history import JobRecord, analyse, tail_probability
from hvdlog.cli.main import cli


@pytest.fixture(name="seeded", scope="module")
def fixture_seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("seeded")
    return root, seed_root(root)


def history_json(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["history", "--json", *args])
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.output)
    return answer


def check_planted(answer: dict[str, Any], kinds: dict[str, list[str]]) -> None:
    """The planted failures, and nothing else."""
    assert answer["jobs"] == 40 and answer["failed"] == 16
    recurring = {entry["fingerprint"]["error_type"]: entry for entry in answer["recurring"]}
    assert set(recurring) == {"ValueError", "RuntimeError"}
    bug = recurring["ValueError"]
    assert sorted(bug["jobs"]) == sorted(kinds["bug"]) and bug["count"] == 4 and len(bug["hosts"]) == 4
    assert bug["fingerprint"]["message"] == "expected <N> samples in <PATH>, got <N>"
    assert bug["fingerprint"]["frame"] == "train.py:load_batch"
    ecc = recurring["RuntimeError"]
    assert sorted(ecc["jobs"]) == sorted(kinds["ecc"]) and ecc["hosts"] == [BAD_HOST]
    assert sorted(entry["jobs"][0] for entry in answer["one_off"]) == sorted(kinds["one-off"])
    (suspect,) = answer["suspect_hosts"]
    assert suspect["host"] == BAD_HOST and suspect["culprit_in"] == 6 and suspect["failed_jobs_on_host"] == 10
    assert suspect["confidence"] >= 0.99
    advice = answer["advice"]
    assert advice["job"] == kinds["ecc"][-1] and advice["action"] == f"drain host {BAD_HOST}"


def test_history_finds_the_bad_host_the_code_bug_and_the_one_offs(seeded: tuple[Path, dict[str, list[str]]]) -> None:
    root, kinds = seeded
    check_planted(history_json(str(root)), kinds)


def test_history_text_names_them(seeded: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = seeded
    result = CliRunner().invoke(cli, ["history", str(root)])
    assert result.exit_code == 0, result.output
    assert "recurring failures: 2" in result.output and "one-off failures: 6" in result.output
    assert f"suspect hosts: 1\n  {BAD_HOST}:" in result.output
    assert "advice for the newest failed job" in result.output and f"drain host {BAD_HOST}" in result.output


def test_since_leaves_older_jobs_out(seeded: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = seeded
    assert history_json("--since", "2026-11-02T12:00:00Z", str(root))["jobs"] == 4


def _record(job: str, host: str, mark: str | None, step: int, hosts: int = 8) -> JobRecord:
    fingerprint = {"id": mark, "error_type": "E", "message": mark, "frame": None} if mark else None
    return JobRecord(job, f"2026-01-01T00:{job[-2:]}:00.000Z", f"2026-01-01T00:{job[-2:]}:30.000Z",
                     {host: 1, **{f"h{i}": 1 for i in range(hosts - 1)}}, step, True, fingerprint, host, 0, f"{mark} on {host}")


def test_advice_stop_when_the_same_failure_makes_no_progress_and_retry_when_new() -> None:
    same = [_record(f"j{i:02d}", f"n{i}", "bug", 12) for i in range(3)]
    assert analyse(same).advice["action"] == "stop"  # type: ignore[index]
    progressed = [*same[:2], _record("j09", "n9", "bug", 40)]
    assert analyse(progressed).advice["action"] == "retry"  # type: ignore[index]
    assert analyse([*same[:2], _record("j09", "n9", "new", 12)]).advice["action"] == "retry"  # type: ignore[index]


def test_one_or_two_failures_never_make_a_host_suspect() -> None:
    """Below the minimum count nothing is suspect, however small the host's share."""
    records = [_record(f"j{i:02d}", "lonely", f"once{i}", 5, hosts=64) for i in range(2)]
    assert analyse(records).suspect_hosts == []
    records.append(_record("j05", "lonely", "once5", 5, hosts=64))
    assert [entry["host"] for entry in analyse(records).suspect_hosts] == ["lonely"]


def test_tail_probability_is_the_binomial_tail() -> None:
    assert tail_probability([0.5] * 4, 4) == pytest.approx(1 / 16)
    assert tail_probability([0.5] * 4, 2) == pytest.approx(11 / 16)
    assert tail_probability([0.125] * 10, 6) == pytest.approx(sum(
        __import__("math").comb(10, k) * 0.125**k * 0.875 ** (10 - k) for k in range(6, 11)))


@pytest.mark.elasticsearch
def test_history_over_elasticsearch_gives_the_files_answers(seeded: tuple[Path, dict[str, list[str]]], es_url: str) -> None:
    """The seeded jobs indexed through the contract's mapping: `history --es` answers as over the files."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings
    from hvdlog.parse import parse_paths

    root, kinds = seeded
    index = "hvdlog-history-seeded"
    es = Elasticsearch(es_url, request_timeout=60)
    # --timeout 120 on every --es call: a loaded 2-core machine once took more than the default 10 s to aggregate.
    try:
        es.options(ignore_status=404).indices.delete(index=index)
        es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 2, "number_of_replicas": 0})
        docs = list(parse_paths([str(path) for path in sorted(root.rglob("*.jsonl"))]))
        ok, errors = bulk(es, ({"_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
        assert not errors and ok == len(docs)
        over_es = history_json("--es", es_url, "--index", index, "--timeout", "120")
        check_planted(over_es, kinds)
        assert over_es == history_json(str(root))
        since = "2026-11-02T12:00:00Z"
        assert history_json("--es", es_url, "--index", index, "--timeout", "120", "--since", since) == history_json("--since", since, str(root))
        bad, good = kinds["bug"][0], kinds["ok"][-1]
        runner = CliRunner()
        files = runner.invoke(cli, ["diff", "--json", str(root / bad), str(root / good)])
        cluster = runner.invoke(cli, ["diff", "--json", "--es", es_url, "--index", index, "--timeout", "120", bad, good])
        assert files.exit_code == cluster.exit_code == 0, cluster.output
        assert json.loads(files.output)["templates"] == json.loads(cluster.output)["templates"]
        chosen = json.loads(runner.invoke(cli, ["diff", "--json", "--es", es_url, "--index", index, "--timeout", "120", bad]).output)
        assert chosen["good"] == max(kinds["ok"]) and "in the cluster" in chosen["good_chosen"]
    finally:
        es.options(ignore_status=404).indices.delete(index=index)
        es.close()

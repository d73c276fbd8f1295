"""``hvdlog import`` against the real servers of both majors: the files' documents in the
Logstash path's data streams, and the analyses over ``--es`` answering as over the files.

Corpora: the committed elastic job (tests/corpus/elastic, a SIGKILLed rank, two resets) and
a crash console and a stall console of the real-world corpus (every line timed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from support.elasticsearch import ElasticsearchServer, default_es_home

REPO = Path(__file__).resolve().parents[2]
HVDLOG = str(Path(sys.executable).with_name("hvdlog"))
ELASTIC_JOB = REPO / "tests" / "corpus" / "elastic"
CRASH = REPO / "tests" / "corpus" / "realworld" / "mpich-hydra-traceback"
STALL = REPO / "tests" / "corpus" / "realworld" / "v018-stalled-ranks-shutdown-mpich"
#: An NCCL WARN chain that ends rank 1's output: a failure only by the rank's last words, read from the source.
CHAIN = REPO / "tests" / "corpus" / "realworld" / "nccl-warn-chain-then-silence"


def crash_sources(es_url: str) -> tuple[list[str], list[str]]:
    """The crash console as files, and as imported into its namespace."""
    return [str(CRASH)], ["--es", es_url, "--index", "logs-horovod.*-importcrash"]


def hvdlog(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HVDLOG_ES_")}
    return subprocess.run([HVDLOG, *args], capture_output=True, text=True, env={**env, "TZ": "UTC"}, timeout=300, check=False)


def parsed(path: Path) -> list[dict[str, Any]]:
    run = hvdlog("parse", "--tz", "UTC", str(path))
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


def count(es: Any, namespace: str) -> int:
    es.indices.refresh(index=f"logs-horovod.*-{namespace}")
    return int(es.count(index=f"logs-horovod.*-{namespace}").body["count"])


@pytest.fixture(name="imported", scope="module")
def fixture_imported(es_url: str) -> dict[str, subprocess.CompletedProcess[str]]:
    """Templates installed, then both corpora imported, each into its own namespace."""
    runs = {}
    for namespace, path in (("importjob", ELASTIC_JOB), ("importcrash", CRASH), ("importstall", STALL), ("importchain", CHAIN)):
        install = hvdlog("install", "--es", es_url, "--namespace", namespace)
        assert install.returncode == 0, install.stderr
        runs[namespace] = hvdlog("import", "--es", es_url, "--namespace", namespace, "--tz", "UTC", str(path))
    return runs


@pytest.mark.elasticsearch
class TestImport:
    @pytest.mark.parametrize(("namespace", "path"), [("importjob", ELASTIC_JOB), ("importcrash", CRASH), ("importstall", STALL)])
    def test_every_parsed_document_lands_in_its_stream(self, es: Any, imported: dict[str, Any], namespace: str, path: Path) -> None:
        """As the Logstash path: logs-<dataset>-<namespace>, data_stream.* set, the document otherwise as parsed."""
        run = imported[namespace]
        docs = parsed(path)
        assert run.returncode == 0, run.stderr
        assert f"{len(docs)} indexed, 0 already there, 0 rejected" in run.stderr
        hits = es.search(index=f"logs-horovod.*-{namespace}", size=1000).body["hits"]["hits"]
        assert len(hits) == len(docs)
        stored = []
        for hit in hits:
            source = dict(hit["_source"])
            stream = source.pop("data_stream")
            if path != ELASTIC_JOB:  # a console names no job: import stores the one the readers over files give it
                assert source.pop("job") == str(path / "console.log"), source
            assert stream == {"type": "logs", "dataset": source["event"]["dataset"], "namespace": namespace}
            assert hit["_index"].startswith(f".ds-logs-{source['event']['dataset']}-{namespace}-")
            stored.append(json.dumps(source, sort_keys=True))
        timed = sorted(json.dumps(doc, sort_keys=True) for doc in docs if "@timestamp" in doc)
        assert [doc for doc in sorted(stored) if doc in timed] == timed

    def test_second_import_adds_nothing(self, es: Any, es_url: str, imported: dict[str, Any]) -> None:
        """Ids come from content: the same files again (under another spelling of the path) are all already there."""
        before = count(es, "importjob")
        again = hvdlog("import", "--es", es_url, "--namespace", "importjob", "--tz", "UTC", str(ELASTIC_JOB / "j1") + "/")
        assert again.returncode == 0, again.stderr
        assert f"0 indexed, {before} already there, 0 rejected" in again.stderr
        assert count(es, "importjob") == before

    @pytest.mark.parametrize("command", [["first-failure"], ["report", "--job", "j1"]])
    def test_elastic_job_answers_as_from_files(self, es_url: str, imported: dict[str, Any], command: list[str]) -> None:
        self._same(es_url, "importjob", ELASTIC_JOB, command)

    @pytest.mark.parametrize(("namespace", "path", "command"), [
        ("importcrash", CRASH, ["first-failure"]), ("importstall", STALL, ["stalls"]), ("importstall", STALL, ["first-failure"])])
    def test_consoles_answer_as_from_files(self, es_url: str, imported: dict[str, Any], namespace: str, path: Path, command: list[str]) -> None:
        """(A console names no job: every reader, and import, names it after its file.)"""
        self._same(es_url, namespace, path, command)

    def test_jobs_lists_the_same_job(self, es_url: str, imported: dict[str, Any]) -> None:
        """Same job, ranks, hosts, time span, status and verdict: the job model reads its times from events."""
        files, elastic = (self._json("jobs", *where) for where in (
            [str(ELASTIC_JOB)], ["--es", es_url, "--index", "logs-horovod.*-importjob"]))
        keys = ("job", "ranks", "hosts", "first", "last", "status", "verdict")
        assert [{key: row[key] for key in keys} for row in files] == [{key: row[key] for key in keys} for row in elastic]
        assert files and files[0]["job"] == "j1"

    def test_elastic_job_stalls_as_from_files(self, es_url: str, imported: dict[str, Any]) -> None:
        """No stall in the elastic job (a SIGKILL and resets, no hang): the same exit code, output and verdict from
        both sources; only the summary's note on what was read differs (files and bytes, or steps seen)."""
        runs = [hvdlog("stalls", "--tz", "UTC", "--job", "j1", *w) for w in ([str(ELASTIC_JOB)], ["--es", es_url, "--index", "logs-horovod.*-importjob"])]
        assert runs[0].returncode == runs[1].returncode and runs[0].stdout == runs[1].stdout, [run.stderr for run in runs]
        verdicts = [re.sub(r"(, \d+ steps)? of job j1.*", " of job j1", run.stderr.strip()) for run in runs]
        assert verdicts == ["hvdlog: no stall in 3 ranks of job j1"] * 2, [run.stderr for run in runs]

    def test_crash_console_stalls_as_from_files(self, es_url: str, imported: dict[str, Any]) -> None:
        """The crash console: no stall in the same 2 ranks from both sources."""
        runs = [hvdlog("stalls", "--tz", "UTC", *w) for w in crash_sources(es_url)]
        assert runs[0].returncode == runs[1].returncode and runs[0].stdout == runs[1].stdout, [run.stderr for run in runs]
        assert all("no stall in 2 ranks" in run.stderr for run in runs), [run.stderr for run in runs]

    def test_crash_console_report_as_from_files(self, es_url: str, imported: dict[str, Any]) -> None:
        """The crash console's report, --es without --job (the index holds one job): the same job, ranks,
        times, status, verdict and first failure as over the files."""
        files, elastic = (self._json("report", "--tz", "UTC", *w) for w in crash_sources(es_url))
        for answer in (*files, *elastic):
            answer.pop("more", None)  # the follow-up commands name their source
        for on_files, on_es in zip(files, elastic, strict=False):
            _untimed_alike(on_files, on_es)
        assert files and files == elastic
        assert files[0]["job"] == str(CRASH / "console.log")

    def test_report_over_several_jobs_asks_for_one(self, es_url: str, imported: dict[str, Any]) -> None:
        """Over an index that holds several jobs, `report --es` without --job says so in one sentence (exit 2)."""
        run = hvdlog("report", "--es", es_url, "--index", "logs-horovod.*-import*")
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip() == ("hvdlog: error: over Elasticsearch, the documents name several jobs: "
                                      "name one with --job J (`hvdlog jobs --es URL` lists them)")

    def test_a_ranks_last_words_as_from_files(self, es_url: str, imported: dict[str, Any]) -> None:
        """Rank 1's NCCL chain, then nothing: `first-failure`, `report` and `jobs` over Elasticsearch read the rank's
        last words as over the files and name rank 1 (hvdlog.analyses.last_words)."""
        where = [str(CHAIN)], ["--es", es_url, "--index", "logs-horovod.*-importchain"]
        self._same(es_url, "importchain", CHAIN, ["first-failure"])
        files, elastic = (self._json("report", "--tz", "UTC", *w) for w in where)
        for answer in (*files, *elastic):
            answer.pop("more", None)
        for on_files, on_es in zip(files, elastic, strict=False):
            _untimed_alike(on_files, on_es)
        assert files == elastic and files[0]["verdict"]["culprit"] == [1], files
        files, elastic = (self._json("jobs", *w) for w in where)
        keys = ("job", "ranks", "status", "verdict")
        assert [{key: row[key] for key in keys} for row in files] == [{key: row[key] for key in keys} for row in elastic]
        assert files[0]["status"]["state"] == "failed", files

    def test_a_timed_ranks_last_words_as_from_files(self, es_url: str, tmp_path: Path) -> None:
        """Rank 1's output behind the tee's arrival times, where a rank's last words are read from its chain's
        WARN on (hvdlog.analyses.last_words): an early WARN the rank went on from (300 steps, or one line without a
        time) is no failure, a chain that ends the output is, `possible`; over Elasticsearch as over the files."""
        t0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
        warn, unwind = "box:689:746 [1] graph/xml.cc:332 NCCL WARN Could not find real path", "box:689:746 [1] NCCL INFO graph/xml.cc:469 -> 2"
        chain = [(t0, warn), (t0 + timedelta(milliseconds=1), unwind)]
        steps = [(t0 + timedelta(seconds=1 + i), f"step {i} loss 0.5") for i in range(300)]
        jobs = {"wenton": chain + steps, "untimedon": [*chain, (None, "Epoch 2/3")],
                "chainends": steps + [(at + timedelta(seconds=400), text) for at, text in chain]}
        for job, lines in jobs.items():
            (tmp_path / job / "box").mkdir(parents=True)
            (tmp_path / job / "box" / "rank-1.stdout.log").write_text(
                "".join(f"{at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} {text}\n" if at else f"{text}\n" for at, text in lines))
        assert hvdlog("install", "--es", es_url, "--namespace", "importlastwords").returncode == 0
        run = hvdlog("import", "--es", es_url, "--namespace", "importlastwords", "--tz", "UTC", str(tmp_path))
        assert run.returncode == 0, run.stderr
        for job in jobs:
            files, elastic = (self._json("report", "--tz", "UTC", *where) for where in (
                [str(tmp_path / job)], ["--job", job, "--es", es_url, "--index", "logs-horovod.*-importlastwords"]))
            for answer in (*files, *elastic):
                answer.pop("more", None)
            assert files == elastic, job
            failure = files[0]["first_failure"]
            if job == "chainends":
                assert files[0]["verdict"]["culprit"] == [1] and failure["confidence"] == "possible", failure
                assert "NCCL's error chain is the rank's last output" in failure["reasoning"], failure
            else:
                assert files[0]["verdict"]["culprit"] == [] and failure is None, (job, failure)
        # what the server gave: from the chain's WARN on (its time), up to the first line that goes on (302 each, read whole)
        from hvdlog.analyses.failures import FAILURE_EVENTS
        from hvdlog.analyses.last_words import find_last_words
        from hvdlog.query.es import ElasticsearchSource
        from hvdlog.query.spec import Filter

        source = ElasticsearchSource(es_url, index="logs-horovod.*-importlastwords", timeout=60)
        taken: list[int] = []

        def counted(spec: Filter) -> Iterator[dict[str, Any]]:
            taken.append(0)
            for doc in source.search(spec):
                taken[-1] += 1
                yield doc

        for job, read, blamed in (("wenton", 3, False), ("untimedon", 3, False), ("chainends", 2, True)):
            taken.clear()
            words = find_last_words(counted, list(source.search(Filter(jobs=(job,), any_of=FAILURE_EVENTS))), Filter())
            assert bool(words) == blamed and taken == [read], (job, taken)

    def test_crash_console_jobs_as_from_files(self, es_url: str, imported: dict[str, Any]) -> None:
        """The crash console in `jobs`: one row from both sources, with the same name, ranks, times, status and verdict."""
        files, elastic = (self._json("jobs", *w) for w in crash_sources(es_url))
        keys = ("job", "ranks", "hosts", "first", "last", "status", "verdict")
        assert len(files) == len(elastic) == 1
        assert {key: files[0][key] for key in keys} == {key: elastic[0][key] for key in keys}

    def _json(self, *args: str) -> list[Any]:
        run = hvdlog(*args[:1], "--json", *args[1:])
        assert run.returncode in (0, 1), run.stderr
        return [json.loads(line) for line in run.stdout.splitlines()]

    def _same(self, es_url: str, namespace: str, path: Path, command: list[str]) -> None:
        runs = [hvdlog(*command, "--json", "--tz", "UTC", *where) for where in (
            [str(path)], ["--es", es_url, "--index", f"logs-horovod.*-{namespace}"])]
        assert runs[0].returncode == runs[1].returncode, (runs[0].stderr, runs[1].stderr)
        files, elastic = ([json.loads(line) for line in run.stdout.splitlines()] for run in runs)
        for answer in (*files, *elastic):
            answer.pop("more", None)  # the follow-up commands name their source (paths or --es)
        for on_files, on_es in zip(files, elastic, strict=False):  # unequal lengths fail below
            _untimed_alike(on_files, on_es)
        assert files and files == elastic


def _untimed_alike(on_files: dict[str, Any], on_es: dict[str, Any]) -> None:
    """A culprit line without a time of its own has none over files; in Elasticsearch it carries the
    import time (a data stream needs ``@timestamp``; Logstash gives its receipt time): checked, then
    set alike so the rest of the answer is compared whole."""
    for outer, key in (("culprit", "@timestamp"), ("job_culprit", "at")):
        mine, theirs = on_files.get(outer), on_es.get(outer)
        if isinstance(mine, dict) and isinstance(theirs, dict) and mine.get(key) is None and theirs.get(key) is not None:
            assert isinstance(theirs[key], str) and theirs[key].endswith("Z"), theirs
            theirs[key] = None


@pytest.mark.elasticsearch
def test_refused_without_templates(es_major: str, tmp_path: Path) -> None:
    """A server with no hvdlog templates: one sentence naming `hvdlog install`, and nothing written."""
    with ElasticsearchServer(default_es_home(es_major), heap="256m") as server:
        run = hvdlog("import", "--es", server.url, str(CRASH))
        assert run.returncode == 2
        assert run.stderr.strip() == f"hvdlog: error: Elasticsearch at {server.url} has no hvdlog templates: run `hvdlog install --es {server.url}` first"
        from elasticsearch import Elasticsearch

        with Elasticsearch(server.url) as es:
            assert es.indices.get(index="logs-*", expand_wildcards="all").body == {}

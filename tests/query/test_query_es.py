"""Files and the real Elasticsearch give the same answers to the same flags, on one real corpus.

The corpus (real horovodrun runs) is parsed by hvdlog.parse and indexed as is; every command
is then run twice, on the files and with --es, and the outputs compared. Native lines without
a time of their own cannot enter a data stream (it requires @timestamp), so the full corpus
goes into a plain index with the contract's mappings, and the data-stream path (the default
index pattern) is checked with the timestamped JSON events.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.query_corpus import FAULTS, REPO, STRAGGLER, Corpus, corpus, start

from hvdlog.cli.main import cli
from hvdlog.documents import sort_key
from hvdlog.elastic.templates import COMPONENT_MAPPINGS, COMPONENT_SETTINGS, component_templates, index_template, mappings
from hvdlog.parse import parse_paths
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.files import FileSource, discover
from hvdlog.query.spec import Filter

pytestmark = [pytest.mark.elasticsearch, pytest.mark.horovod]

INDEX = "hvdlog-query-corpus"


def _bulk(es: Any, index: str, docs: list[dict[str, Any]], op: str = "index") -> None:
    from elasticsearch.helpers import bulk

    ok, errors = bulk(es, ({"_op_type": op, "_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
    assert not errors and ok == len(docs), errors[:3]


@pytest.fixture(name="indexed", scope="module")
def fixture_indexed(request: pytest.FixtureRequest) -> Iterator[Corpus]:
    """The corpus, parsed and indexed into the real server (plain index + one data stream)."""
    from elasticsearch import Elasticsearch

    start()  # the jobs run while the server starts
    es_url = request.getfixturevalue("es_url")
    runs = corpus()
    es = Elasticsearch(es_url, request_timeout=60)
    files = [str(path) for path in discover([runs.logs, runs.output], lambda message: None)]
    docs = list(parse_paths(files, timezone="UTC"))
    es.indices.create(index=INDEX, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    _bulk(es, INDEX, docs)
    templates = component_templates()
    for name in (COMPONENT_MAPPINGS, COMPONENT_SETTINGS):
        es.cluster.put_component_template(name=name, **templates[name])
    es.indices.put_index_template(name="logs-horovod", **index_template())
    app = [doc for doc in docs if doc.get("@timestamp") and str(doc["log"]["file"]["path"]).endswith(".jsonl")]
    _bulk(es, "logs-horovod.app-querytest", app, op="create")
    yield runs
    es.indices.delete(index=INDEX)
    es.close()


def _run(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def _same(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> None:
    """Same events in the same (time, rank) order; ties may come in either order."""
    assert [sort_key(d) for d in left] == [sort_key(d) for d in right]
    canon = lambda docs: sorted(json.dumps(d, sort_keys=True) for d in docs)  # noqa: E731
    assert canon(left) == canon(right)


def _both(runs: Corpus, es_url: str, command: str, *args: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    code_files, from_files, err_files = _run(command, "--json", *args, str(runs.logs), str(runs.output))
    code_es, from_es, err_es = _run(command, "--json", *args, "--es", es_url, "--index", INDEX)
    assert code_files == code_es, (err_files, err_es)
    return from_files, from_es


GREP_CASES = [
    ("--level", "error"),
    ("--rank", "1"),
    ("--step", "2:4"),
    ("train step", "--job", STRAGGLER),
    ("-i", "INJECTED"),
    ("-E", r"no progress for \d+ s"),
    ("Horovod has been shut down",),
    ("_DistributedOptimizer.step",),
    ("fault on rank",),
    ("--host", "{host}", "--level", "warning", "--rank", "0,1"),
    ("-n", "5", "--rank", "0"),
    ("--job", FAULTS, "-e", ""),
    ("--dataset", "horovod.launcher", "--rank", "1"),
    ("--dataset", "horovod.launcher", "--dataset", "horovod.app", "--level", "error"),
]


@pytest.mark.parametrize("args", GREP_CASES, ids=[" ".join(case) for case in GREP_CASES])
def test_grep_same_events_from_files_and_elasticsearch(indexed: Corpus, es_url: str, args: tuple[str, ...]) -> None:
    """The same flags select the same documents, in the same order, from files and from Elasticsearch."""
    from_files, from_es = _both(indexed, es_url, "grep", *(arg.format(host=indexed.host) for arg in args))
    assert from_files, "the case must select something to prove anything"
    _same(from_files, from_es)


def test_time_window_same_from_both(indexed: Corpus, es_url: str) -> None:
    """--since/--until around the crash (millisecond bounds) agree."""
    _, crash, _ = _run("grep", "--json", "--job", FAULTS, "--level", "critical", str(indexed.logs))
    first = crash[0]["@timestamp"]
    from_files, from_es = _both(indexed, es_url, "grep", "--since", first, "--until", crash[-1]["@timestamp"])
    assert len(from_files) >= 2
    _same(from_files, from_es)


@pytest.mark.parametrize("command", ["stalls", "stragglers", "first-failure"])
def test_analyses_same_from_files_and_elasticsearch(indexed: Corpus, es_url: str, command: str) -> None:
    """stalls, stragglers and first-failure answer the same from both sources."""
    from_files, from_es = _both(indexed, es_url, command)
    assert from_files
    assert from_files == from_es


#: (first page, page size, slices): tiny pages, so the paging and merging logic runs many times.
PAGINGS = [(7, 7, 2), (5, 7, 1), (3, 11, 3), (2000, 10_000, 2)]


@pytest.mark.parametrize(("first_page", "page_size", "slices"), PAGINGS, ids=[f"first{f}-page{p}-slices{n}" for f, p, n in PAGINGS])
def test_pagination_keeps_every_document(indexed: Corpus, es_url: str, first_page: int, page_size: int, slices: int) -> None:
    """Small pages through a point in time, read in parallel slices and merged, return every
    document once, in order: the same as the files, and for every selection the same order
    (ties included) as one unsliced read."""
    files = FileSource([indexed.logs, indexed.output])
    for spec in (Filter(), Filter(min_level="warning"), Filter(ranks=frozenset({1})), Filter(min_level="debug", ranks=frozenset({0}))):
        source = ElasticsearchSource(es_url, index=INDEX, first_page=first_page, page_size=page_size, slices=slices)
        from_files = list(files.search(spec))
        from_es = list(source.search(spec))
        assert from_files and (spec != Filter() or len(from_files) > 3 * page_size or page_size > 1000)
        _same(from_files, from_es)
        unsliced = list(ElasticsearchSource(es_url, index=INDEX, first_page=first_page, page_size=page_size, slices=1).search(spec))
        assert from_es == unsliced
        for last in (1, 8, 40):
            _same(list(files.search(spec, last=last)), list(source.search(spec, last=last)))


@pytest.mark.parametrize("slices", [1, 2])
@pytest.mark.parametrize("last", [None, 30])
def test_partial_pages_retried_from_where_they_stopped(
    indexed: Corpus, es_url: str, monkeypatch: pytest.MonkeyPatch, slices: int, last: int | None
) -> None:
    """A page that comes back partial (a node left) is not used: the read starts again in a new
    point in time after the last key given; nothing is lost or given twice, the order holds,
    also inside a run of documents with one key (the untimed lines share one)."""
    import hvdlog.query.es as es_module

    monkeypatch.setattr(es_module, "_RETRY_PAUSE_S", 0.0)
    warnings: list[str] = []
    source = ElasticsearchSource(es_url, index=INDEX, first_page=3, page_size=5, slices=slices, warn=warnings.append)
    real = source._page
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] in (2, 6, 7):
            raise es_module._PartialResultsError("1 of 2 shards failed while searching (test)")
        return real(*args, **kwargs)

    monkeypatch.setattr(source, "_page", flaky)
    spec = Filter()
    expected = list(FileSource([indexed.logs, indexed.output]).search(spec, last=last))
    found = list(source.search(spec, last=last))
    _same(expected, found)
    assert 1 <= len(warnings) <= 3 and "searching again" in warnings[0]


def test_stopping_early_ends_the_slice_readers(indexed: Corpus, es_url: str) -> None:
    """A consumer that stops after the first pages (a pager quit, ``head``) leaves no reader behind."""
    import itertools
    import threading
    import time

    source = ElasticsearchSource(es_url, index=INDEX, first_page=3, page_size=5, slices=3)
    stream = source.search(Filter())
    assert len(list(itertools.islice(stream, 20))) == 20
    stream.close()
    deadline = time.monotonic() + 10
    while any(thread.name.startswith("hvdlog es slice") for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "slice readers still running"
        time.sleep(0.05)


def test_responses_decoded_as_the_standard_json_would() -> None:
    """orjson decodes responses, as it decodes the lines of files; what it refuses (a lone
    surrogate) falls back to json. An integer beyond 64 bits reads as the files read it."""
    from hvdlog.elastic.connection import _fast_json
    from hvdlog.parse.jsonl import decode_event

    loads = _fast_json().loads
    for body in (b'{"a":1,"b":[1.5,"x"],"c":{"d":null}}', b'{"s":"\\ud800 lone"}'):
        assert loads(body) == json.loads(body)
    big = b'{"message":"m","big":123456789012345678901234567890}'
    assert loads(big)["big"] == decode_event(big, "x.jsonl")["big"]
    assert loads(b"") is None


def test_default_index_pattern_reads_the_data_stream(indexed: Corpus, es_url: str) -> None:
    """Without --index, grep reads logs-horovod.*-* data streams made by the contract's template."""
    jsonl = [str(path) for path in discover([indexed.logs], lambda message: None) if path.suffix == ".jsonl"]
    jobs = ("--job", FAULTS, "--job", STRAGGLER)  # other tests may write to the same data streams
    _, from_files, _ = _run("grep", "--json", "--level", "warning", *jobs, *jsonl)
    code, from_es, err = _run("grep", "--json", "--level", "warning", *jobs, "--es", es_url)
    assert code == 0, err
    _same(from_files, from_es)


def test_dataset_finds_rejected_events_in_files_and_elasticsearch(indexed: Corpus, es_url: str, tmp_path: Path) -> None:
    """``--dataset horovod.rejected`` selects the dead-letter pipeline's events (tests/corpus/horovod.rejected)
    in their data stream and in a file, and nothing else; ``--dataset horovod.app`` leaves them out."""
    from elasticsearch import Elasticsearch

    # A job name of this test's own: "j1", the corpus case's, is also the job of documents other tests index
    # into the shared data streams (the recorded elastic job), which --job j1 --es would rightly find.
    job_name = f"rejected-querytest-{os.getpid()}"
    rejected = [{**doc, "job": job_name} for doc in json.loads((REPO / "tests" / "corpus" / "horovod.rejected" / "dead-letter-expected.json").read_text())]
    es = Elasticsearch(es_url, request_timeout=60)
    _bulk(es, "logs-horovod.rejected-querytest", rejected, op="create")
    es.close()
    dead_letter = tmp_path / "dead-letter.jsonl"
    dead_letter.write_text("".join(json.dumps(doc) + "\n" for doc in rejected))
    jsonl = [str(path) for path in discover([indexed.logs], lambda message: None) if path.suffix == ".jsonl"]
    wanted = [(doc["message"], doc["error"]["type"]) for doc in rejected]
    seen = lambda docs: [(doc["message"], doc["error"]["type"]) for doc in docs]  # noqa: E731
    job = ("--job", job_name)  # other tests may write to the same data streams
    for source in ((str(dead_letter), *jsonl), ("--es", es_url)):
        code, found, err = _run("grep", "--json", "--dataset", "horovod.rejected", *job, *source)
        assert code == 0 and seen(found) == wanted, (source, err)
        code, found, err = _run("grep", "--json", "--dataset", "horovod.app", "--dataset", "horovod.rejected", *source)
        assert code == 0 and {doc["event"]["dataset"] for doc in found} == {"horovod.app", "horovod.rejected"}, (source, err)
        code, found, err = _run("grep", "--json", "--dataset", "horovod.app", *job, *source)
        assert code == 1 and not found, (source, found)


def test_follow_on_elasticsearch(indexed: Corpus, es_url: str) -> None:
    """grep -f --es prints an event indexed after it started."""
    import subprocess
    import sys
    import threading
    import time
    from datetime import datetime, timezone

    from elasticsearch import Elasticsearch

    in_tree = [sys.executable, "-c", "from hvdlog.cli.main import main; main()"]
    command = [*in_tree, "grep", "-f", "--interval", "0.3", "--json", "late es event", "--es", es_url, "--index", INDEX]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    created = None
    try:
        time.sleep(2.0)
        now = datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
        with Elasticsearch(es_url) as es:
            document = {"@timestamp": now, "message": "late es event", "rank": 5, "log": {"level": "info"}}
            created = es.index(index=INDEX, document=document, refresh=True)["_id"]
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(20)
        assert box and json.loads(box[0])["rank"] == 5, process.stderr
    finally:
        process.terminate()
        process.wait(timeout=10)
        if created is not None:  # the other tests compare this index with the files
            with Elasticsearch(es_url) as es:
                es.delete(index=INDEX, id=created, refresh=True)


def test_unknown_index_warns_and_finds_nothing(indexed: Corpus, es_url: str) -> None:
    """A mistyped --index is not silent: exit 1 and a warning naming it."""
    code, docs, err = _run("grep", "x", "--es", es_url, "--index", "no-such-index")
    assert (code, docs) == (1, []) and "no index matches 'no-such-index'" in err


MPI_CAPTURES = [REPO / "tests" / "corpus" / "horovod.core" / name for name in ("mpi-stall-console.log", "mpi-stall-shutdown-console.log")]


@pytest.mark.parametrize("command", ["stalls", "first-failure"])
def test_stall_inspector_same_from_files_and_elasticsearch(es_url: str, command: str) -> None:
    """Horovod's own stall inspector (real Open MPI captures): same episodes and blame from both sources."""
    from elasticsearch import Elasticsearch

    index = "hvdlog-query-mpi"
    with Elasticsearch(es_url, request_timeout=60) as es:
        if not es.indices.exists(index=index):
            es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
            _bulk(es, index, list(parse_paths([str(path) for path in MPI_CAPTURES], timezone="UTC")))
    code_files, from_files, err = _run(command, "--json", "--tz", "UTC", *map(str, MPI_CAPTURES))
    code_es, from_es, err_es = _run(command, "--json", "--es", es_url, "--index", index)
    assert (code_files, code_es) == (0, 0), (err, err_es)
    assert from_files == from_es and len(from_files) >= 1

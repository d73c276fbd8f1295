"""Every grok pattern, run by the real Elasticsearch grok engine on the corpus, gives the
captures hvdlog's Python translation gives, and the golden documents' parsed fields.

The engine is org.elasticsearch.grok from the test Elasticsearch's lib/ (Joni, the regex
engine of Logstash's grok too, with the logstash-patterns-core bank), driven by
tests/grok/GrokHarness.java. Not the ingest `_simulate` API: the test server has no
ingest-common module, so it has no grok processor (see test_simulate_api_is_absent).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from corpus.cases import cases
from corpus.tools_required import jdk_tool
from hvdlog.parse import decode_line
from hvdlog.parse.arrival import split_arrival
from hvdlog.parse.launcher import TagSplitter
from hvdlog.parse.patterns import PATTERN_FILE, compile_pattern, field_path, load_definitions

HARNESS = Path(__file__).resolve().parent / "grok" / "GrokHarness.java"
JARS = ("elasticsearch-grok-*.jar", "joni-*.jar", "jcodings-*.jar")

#: Patterns that are pieces of others; they match nearly anything, so coverage skips them.
BUILDING_BLOCKS = {
    "HOROVOD_INT", "HOROVOD_NUMBER", "HOROVOD_REST", "HOROVOD_BANG", "HOROVOD_STREAM", "HOROVOD_TENSOR",
    "HOROVOD_RANK_LIST", "HOROVOD_RANK_KIND", "HOROVOD_LAUNCHER_TIME", "HOROVOD_CORE_TIME", "HOROVOD_LEVEL_LETTER",
    "HOROVOD_SOURCE_FILE", "HOROVOD_EXCEPTION_TYPE", "HOROVOD_EXCEPTION_TYPE_CPP", "HOROVOD_PATH_PART",
    "HOROVOD_CORE_HEADER", "HOROVOD_RANK_PREFIX", "HOROVOD_OPENMPI_TAG", "HOROVOD_GLOO_TAG", "HOROVOD_MPICH_TAG",
    "HOROVOD_STALL_OP", "HVDLOG_ARRIVAL_TIME",
}


@pytest.fixture(name="grok_classpath", scope="module")
def fixture_grok_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The harness compiled against the test Elasticsearch's grok jars."""
    es_home = os.environ.get("HVDLOG_ES_HOME")
    if not es_home:
        pytest.fail("HVDLOG_ES_HOME is not set: run scripts/setup.sh (it fetches Elasticsearch)")
    jars = []
    for pattern in JARS:
        found = sorted(Path(es_home, "lib").glob(pattern))
        if not found:
            pytest.fail(f"{pattern} not found in {es_home}/lib: is HVDLOG_ES_HOME an Elasticsearch 8 home?")
        jars.append(str(found[0]))
    classes = tmp_path_factory.mktemp("grok-harness")
    subprocess.run([jdk_tool("javac"), "-d", str(classes), "-cp", os.pathsep.join(jars), str(HARNESS)], check=True)
    return os.pathsep.join([*jars, str(classes)])


def _texts() -> dict[str, set[str]]:
    """What each kind of pattern is applied to, from the whole corpus."""
    raw, payloads, messages, paths = set(), set(), set(), set()
    core = compile_pattern("HOROVOD_CORE_LINE")
    for case in cases():
        paths.add(case.config["path"])
        splitter = TagSplitter()  # payloads as parse_lines sees them: tags off, cut lines re-joined
        for line in case.lines():
            text = decode_line(line)
            raw.add(text)
            payloads.update(payload for payload, _ in splitter.feed(split_arrival(text).payload))
        payloads.update(payload for payload, _ in splitter.close())
    for payload in payloads:
        fields = core.match(payload)
        if fields is not None:
            messages.add(fields["message"])
    return {"raw": raw, "payload": payloads, "message": messages, "path": paths}


def _run_engine(classpath: str, requests: list[tuple[str, str]]) -> list[dict[str, Any]]:
    stdin = "".join(f"{name}\t{base64.b64encode(text.encode()).decode()}\n" for name, text in requests)
    result = subprocess.run(
        [jdk_tool("java"), "-cp", classpath, "GrokHarness", str(PATTERN_FILE), "v1"],  # ECS mode as in logstash.yml
        input=stdin.encode(), capture_output=True, check=False, timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()
    return [json.loads(line) for line in result.stdout.decode().splitlines()]


@pytest.fixture(name="engine_results", scope="module")
def fixture_engine_results(grok_classpath: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(pattern, text, engine output) for every pattern on every corpus text."""
    texts = sorted(set().union(*_texts().values()))
    names = list(load_definitions())
    requests = [(name, text) for name in names for text in texts]
    results = _run_engine(grok_classpath, requests)
    assert len(results) == len(requests)
    return [(name, text, result) for (name, text), result in zip(requests, results, strict=True)]


def _engine_fields(result: dict[str, Any]) -> dict[str, Any] | None:
    if not result["match"]:
        return None
    return {field_path(name): value for name, value in result["captures"].items()}


class TestGrokEngine:
    def test_python_translation_agrees_with_the_engine(self, engine_results) -> None:  # noqa: ANN001
        """For every pattern and corpus text, match or not and every capture are the same."""
        disagreements = []
        for name, text, result in engine_results:
            ours = compile_pattern(name).search(text)
            if ours != _engine_fields(result):
                disagreements.append((name, text[:200], ours, _engine_fields(result)))
        assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[:3]}"

    def test_every_message_pattern_matches_some_corpus_line(self, engine_results) -> None:  # noqa: ANN001
        """The corpus exercises every pattern (a pattern nothing matches is untested)."""
        matched = {name for name, _, result in engine_results if result["match"]}
        unused = set(load_definitions()) - BUILDING_BLOCKS - matched
        assert not unused, f"no corpus line matches {sorted(unused)}: add a case"

    def test_engine_gives_the_golden_core_fields(self, engine_results) -> None:  # noqa: ANN001
        """Every golden core-line document's origin, level and message come out of the engine."""
        engine = {
            text: _engine_fields(result)
            for name, text, result in engine_results
            if name == "HOROVOD_CORE_LINE" and result["match"]
        }
        from_engine = {
            (fields["log.origin.file.name"], fields["log.origin.file.line"], fields["message"]) for fields in engine.values()
        }
        checked = 0
        for case in cases():
            for doc in case.expected():
                origin = doc.get("log", {}).get("origin")
                if origin and "stall" not in doc.get("horovod", {}):
                    assert (origin["file"]["name"], origin["file"]["line"], doc["message"]) in from_engine, doc
                    checked += 1
        assert checked > 200


@pytest.mark.elasticsearch
def test_simulate_api_is_absent(es) -> None:  # noqa: ANN001
    """Records why the harness exists: this Elasticsearch has no grok ingest processor."""
    from elasticsearch import ApiError

    definitions = load_definitions()
    with pytest.raises(ApiError) as raised:
        es.ingest.simulate(
            pipeline={"processors": [{"grok": {"field": "message", "patterns": ["%{HOROVOD_CORE_LINE}"], "pattern_definitions": definitions}}]},
            docs=[{"_source": {"message": "[W /x.cc:1] y"}}],
        )
    assert "grok" in str(raised.value), raised.value

"""Every grok pattern gives the same captures in Logstash's grok (the goldens' engine), in the
Elasticsearch grok engine and in hvdlog's Python translation -- on every corpus line and on
every multi-line event as Filebeat ships it -- and the golden documents' core fields.

Engines (tests/support/grok.py): Logstash's grok filter modelled under JRuby
(tests/support/grok/logstash_grok.rb: jls-grok's loader and expansion, Regexp::MULTILINE, the
filter's capture handling) and org.elasticsearch.grok from the test Elasticsearch's lib/
(tests/support/grok/GrokHarness.java; Joni without the multiline option). Logstash's grok runs on
whole multi-line events (a stall block, a traceback), where `.` matching a newline once put
the whole block into a core line's `message`: the event texts below catch that. Not the
ingest `_simulate` API: the test server has no ingest-common module (test_simulate_api_is_absent).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from corpus.cases import cases
from corpus.realworld import real_cases
from support.grok import LOGSTASH_MODE, es_classpath, fields_of, run_elasticsearch, run_logstash
from support.native_events import events_of, streams_of

from hvdlog.parse import decode_line
from hvdlog.parse.arrival import split_arrival
from hvdlog.parse.launcher import TagSplitter, strip_tag
from hvdlog.parse.patterns import PATTERN_FILE, compile_pattern, load_definitions

#: Patterns that are pieces of others (referenced by another pattern): coverage skips them.
pytestmark = pytest.mark.jvm


BUILDING_BLOCKS = {
    name for source in load_definitions().values() for name in re.findall(r"%\{(\w+)", source)
}
#: What horovod-native.conf's gsubs remove from every line before the core-line grok.
LINE_PREFIXES = re.compile(
    r"^(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z )?"
    rf"(?:{load_definitions()['HOROVOD_COLLECTOR_PREFIX']})?"
    r"(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?"
    r"(?:\[\d+(?:,\d+)?\]<(?:stdout|stderr|stddiag)>:|\[\d+\] )?",
    re.MULTILINE,
)


def _texts() -> dict[str, set[str]]:
    """What each kind of pattern is applied to, from the whole corpus."""
    raw, payloads, messages, paths, events = set(), set(), set(), set(), set()
    core = compile_pattern("HOROVOD_CORE_LINE")
    for case in cases():
        paths.add(case.config["path"])
        splitter = TagSplitter()  # payloads as parse_lines sees them: tags off, cut lines re-joined
        for line in case.lines():
            text = decode_line(line)
            raw.add(text)
            payloads.update(payload for payload, _ in splitter.feed(split_arrival(text).payload))
        payloads.update(payload for payload, _ in splitter.close())
        if case.log.parent.name != "horovod.app":
            for stream in streams_of(case):
                for event in events_of(stream):
                    if "\n" in event:  # as shipped, and as the core-line grok sees it
                        events.update((event, LINE_PREFIXES.sub("", event)))
    for real in real_cases():  # tests/corpus/realworld (formats of public threads)
        for relative, path in real.files():
            paths.add(relative)
            data = path.read_bytes()
            for line in data.splitlines():
                text = decode_line(line)
                raw.add(text)
                payloads.add(strip_tag(split_arrival(text).payload).payload)
            # as read (split at newlines only): a tqdm bar's `\r` stays inside the line it is glued to
            raw.update(decode_line(line) for line in data.split(b"\n") if b"\r" in line.rstrip(b"\r"))
            for stream in streams_of(path):
                for event in events_of(stream):
                    if "\n" in event:
                        events.update((event, LINE_PREFIXES.sub("", event)))
    for payload in payloads:
        fields = core.match(payload)
        if fields is not None:
            messages.add(fields["message"])
    return {"raw": raw, "payload": payloads, "message": messages, "path": paths, "event": events}


TEXTS = _texts()
ALL_TEXTS = sorted(set().union(*TEXTS.values()))
NAMES = list(load_definitions())


@pytest.fixture(name="logstash_results", scope="module")
def fixture_logstash_results() -> list[tuple[str, str, dict[str, Any]]]:
    """(pattern, text, Logstash grok's answer) for every pattern on every corpus text."""
    requests = [(name, text) for name in NAMES for text in ALL_TEXTS]
    return [(name, text, answer) for (name, text), answer in zip(requests, run_logstash(requests), strict=True)]


@pytest.fixture(name="es_results", scope="module")
def fixture_es_results(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, dict[str, Any]]]:
    """(pattern, text, Elasticsearch grok's answer) for every pattern on every corpus text."""
    classpath = es_classpath(tmp_path_factory.mktemp("grok-harness"))
    requests = [(name, text) for name in NAMES for text in ALL_TEXTS]
    return [(name, text, answer) for (name, text), answer in zip(requests, run_elasticsearch(classpath, requests), strict=True)]


def _disagreements(results: list[tuple[str, str, dict[str, Any]]], *, drops_empty: bool) -> list[tuple[Any, ...]]:
    """Where hvdlog's translation and an engine differ. Logstash's grok drops empty captures
    (keep_empty_captures => false) where hvdlog keeps "": the conf sets keep_empty_captures
    on the one grok whose empty capture matters (the core line's message)."""
    found = []
    for name, text, answer in results:
        ours = compile_pattern(name).search(text)
        if ours is not None and drops_empty:
            ours = {field: value for field, value in ours.items() if value != ""}
        if ours != fields_of(answer):
            found.append((name, text[:300], ours, fields_of(answer)))
    return found


class TestGrokEngines:
    def test_corpus_has_multi_line_events(self) -> None:
        """Stall blocks and tracebacks as Filebeat ships them are among the texts."""
        events = TEXTS["event"]
        assert sum("Missing ranks:" in event for event in events) >= 6
        assert sum("Traceback (most recent call last):" in event for event in events) >= 6

    def test_python_translation_agrees_with_logstash(self, logstash_results) -> None:
        """For every pattern and corpus text (lines and whole events), match or not and every
        capture are what Logstash's grok gives."""
        disagreements = _disagreements(logstash_results, drops_empty=True)
        assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[:3]}"

    def test_python_translation_agrees_with_elasticsearch(self, es_results) -> None:
        """The same with the Elasticsearch engine (no multiline option): so the patterns mean
        the same whether `.` matches a newline or not."""
        disagreements = _disagreements(es_results, drops_empty=False)
        assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[:3]}"

    def test_every_message_pattern_matches_some_corpus_line(self, logstash_results) -> None:
        """The corpus exercises every pattern (a pattern nothing matches is untested)."""
        matched = {name for name, _, result in logstash_results if result["match"]}
        unused = set(load_definitions()) - BUILDING_BLOCKS - matched
        assert not unused, f"no corpus line matches {sorted(unused)}: add a case"

    def test_core_message_is_the_first_line_of_an_event(self, logstash_results) -> None:
        """On a multi-line event starting with a core line, Logstash's `message` is that line's text only."""
        checked = 0
        for name, text, answer in logstash_results:
            if name == "HOROVOD_CORE_LINE" and text in TEXTS["event"] and answer["match"]:
                assert "\n" not in answer["captures"]["message"], text[:300]
                checked += 1
        assert checked >= 6, checked

    def test_engine_gives_the_golden_core_fields(self, logstash_results) -> None:
        """Every golden core-line document's origin, level and message come out of Logstash's grok."""
        engine = [fields_of(answer) for name, _, answer in logstash_results if name == "HOROVOD_CORE_LINE" and answer["match"]]
        from_engine = {
            (fields["log.origin.file.name"], fields["log.origin.file.line"], fields.get("message", "")) for fields in engine
        }
        checked = 0
        for case in cases():
            for doc in case.expected():
                origin = doc.get("log", {}).get("origin")
                if origin and "stall" not in doc.get("horovod", {}):
                    assert (origin["file"]["name"], origin["file"]["line"], doc["message"]) in from_engine, doc
                    checked += 1
        assert checked > 200


class TestLogstashMode:
    """The harness really compiles as Logstash does: a test fails if it runs the other way."""

    PROBE = "%{HOROVOD_INT:[a]:int}(?<HOROVOD_X:[b]>.)%{HOROVOD_INT:[c]:int}"

    def test_dot_matches_a_newline(self) -> None:
        """In the mode the goldens use, `.` matches a newline (Regexp::MULTILINE)."""
        (answer,) = run_logstash([(self.PROBE, "1\n2")])
        assert answer == {"match": True, "captures": {"[a]": 1, "[b]": "\n", "[c]": 2}}
        assert LOGSTASH_MODE == "multiline"

    def test_the_old_pattern_duplicates_continuation_lines(self, tmp_path: Path) -> None:
        """Issue 16's bug, reproduced: with `HOROVOD_REST .*` Logstash's core-line grok puts the
        whole stall block into message; without MULTILINE it would not (so the mode matters)."""
        old = tmp_path / "horovod"
        old.write_text(PATTERN_FILE.read_text().replace("HOROVOD_REST [^\\n]*", "HOROVOD_REST .*"))
        assert old.read_text() != PATTERN_FILE.read_text()
        block = next(event for event in sorted(TEXTS["event"]) if event.startswith("[") and "\nMissing ranks:" in event)
        (multiline,) = run_logstash([("HOROVOD_CORE_LINE", block)], pattern_file=old)
        (plain,) = run_logstash([("HOROVOD_CORE_LINE", block)], pattern_file=old, mode="plain")
        assert "Missing ranks:" in multiline["captures"]["message"]
        assert "Missing ranks:" not in plain["captures"]["message"]

    def test_empty_captures(self) -> None:
        """Empty captures are dropped unless keep_empty_captures (the core-line grok sets it)."""
        line = "[I /a.cc:1] "
        (dropped,) = run_logstash([("HOROVOD_CORE_LINE", line)])
        (kept,) = run_logstash([("HOROVOD_CORE_LINE", line)], keep_empty=True)
        assert "message" not in dropped["captures"] and kept["captures"]["message"] == ""

    def test_trailing_blanks_stay_in_logstash_patterns(self, tmp_path: Path) -> None:
        """Logstash's loader keeps a trailing blank (hence hvdlog's loader refuses them)."""
        patterns = tmp_path / "p"
        patterns.write_text("HOROVOD_X a \n")
        (answer,) = run_logstash([("%{HOROVOD_X:[x]}", "a")], pattern_file=patterns)
        assert answer["match"] is False


@pytest.mark.elasticsearch
def test_simulate_api_is_absent(es) -> None:
    """Records why the harness exists: this Elasticsearch has no grok ingest processor."""
    from elasticsearch import ApiError

    definitions = load_definitions()
    with pytest.raises(ApiError) as raised:
        es.ingest.simulate(
            pipeline={"processors": [{"grok": {"field": "message", "patterns": ["%{HOROVOD_CORE_LINE}"], "pattern_definitions": definitions}}]},
            docs=[{"_source": {"message": "[W /x.cc:1] y"}}],
        )
    assert "grok" in str(raised.value), raised.value

"""The horovod-native pipeline's ruby filter (logstash/pipeline/horovod_native.rb), run in
JRuby (the Ruby Logstash 8.19 embeds), gives the golden documents' stall, error and level
fields for every multi-line event of the corpus, and drops exactly the chatter.

No Logstash can run here, so the script runs under tests/ruby/run_filter.rb, which
evaluates it the way the ruby filter does and hands it events shaped as the pipeline's
earlier filters leave them (tags removed, core line parsed, block kept in @metadata).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from corpus.cases import cases
from corpus.tools_required import installed, jdk_tool
from hvdlog.fields import HOROVOD_LEVEL_LETTERS, PARSE_FAILURE_TAG
from hvdlog.parse.patterns import PATTERN_FILE, compile_pattern

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "logstash" / "pipeline" / "horovod_native.rb"
RUNNER = ROOT / "tests" / "ruby" / "run_filter.rb"
LETTERS = {level: letter for letter, level in HOROVOD_LEVEL_LETTERS.items()}
CHATTER = compile_pattern("HOROVOD_CHATTER").regex


def _pipeline_input(doc: dict[str, Any], size: int | None) -> dict[str, Any]:
    """The event as horovod-native.conf hands it to the ruby filter."""
    message = doc["message"]
    event: dict[str, Any] = {"message": message, "@metadata": {"hvd": {"block": message}}}
    if "origin" in doc["log"]:  # a core line: grok replaced message with the first line's text
        event["message"] = message.split("\n", 1)[0]
        event["@metadata"]["hvd"]["level"] = LETTERS[doc["log"]["level"]]
    elif doc["event"]["dataset"] == "horovod.core":  # the oldest stall form, `WARNING: ...`
        event["@metadata"]["hvd"]["block"] = "WARNING: " + message
    if size is not None:
        event["size"] = size
    return event


def _expected(doc: dict[str, Any]) -> dict[str, Any] | None:
    """What the filter must produce for this golden document (None: drop it)."""
    if doc["log"]["level"] in ("trace", "debug") and CHATTER.match(doc["message"]):
        return None
    expected = {"message": doc["message"]}
    for key in ("horovod", "error", "process"):
        if key in doc and (key != "horovod" or "stall" in doc[key]):
            expected[key] = {"stall": doc[key]["stall"]} if key == "horovod" else doc[key]
    if "origin" not in doc["log"]:
        expected["level"] = doc["log"]["level"] if "tags" not in doc else None
        expected["tags"] = doc.get("tags")
    if "action" in doc.get("event", {}):
        expected["action"] = doc["event"]["action"]
    return expected


def _actual(event: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    actual = {"message": event["message"]}
    for key in ("horovod", "error", "process"):
        if key in event:
            actual[key] = event[key]
    if "origin" not in doc["log"]:
        actual["level"] = event.get("log", {}).get("level")
        actual["tags"] = event.get("tags")
    if "action" in event.get("event", {}):
        actual["action"] = event["event"]["action"]
    return actual


@pytest.fixture(name="jruby", scope="module")
def fixture_jruby() -> str:
    """jruby-complete.jar from scripts/install-jruby.sh."""
    return installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")


def test_ruby_filter_matches_the_goldens(jruby: str) -> None:
    """Every native golden document, replayed through the ruby filter, gets the same fields."""
    docs, inputs = [], []
    for case in cases():
        if case.log.parent.name == "horovod.app":
            continue
        for doc in case.expected():
            docs.append(doc)
            inputs.append(_pipeline_input(doc, case.config.get("size")))
    # Beyond the goldens: a core line to which Filebeat joined an indented line keeps it.
    joined = {"message": "first", "@metadata": {"hvd": {"block": "[I /a.cc:1] first\n  more", "level": "I"}}}
    inputs.append(joined)
    params = json.dumps({"patterns_file": str(PATTERN_FILE), "chatter": "drop"})
    result = subprocess.run(
        [jdk_tool("java"), "-jar", jruby, "--dev", str(RUNNER), str(SCRIPT), params],
        input="".join(json.dumps(event) + "\n" for event in inputs),
        capture_output=True, text=True, check=False, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    outputs = [json.loads(line)["events"] for line in result.stdout.splitlines()]
    assert outputs.pop()[0]["message"] == "first\n  more"
    assert len(outputs) == len(docs)
    dropped = checked = 0
    for doc, events in zip(docs, outputs, strict=True):
        expected = _expected(doc)
        if expected is None:
            assert events == [], doc["message"]
            dropped += 1
            continue
        (event,) = events
        if expected.get("tags"):
            assert PARSE_FAILURE_TAG in (event.get("tags") or []), doc["message"]
            continue
        assert _actual(event, doc) == expected
        checked += 1
    stalls = sum("horovod" in doc and "stall" in doc["horovod"] for doc in docs)
    assert dropped >= 20 and checked > 100 and stalls >= 15

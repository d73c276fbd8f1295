"""The two grok engines the tests run hvdlog's pattern file through.

* ``logstash``: tests/support/grok/logstash_grok.rb under JRuby -- Logstash's grok filter (4.4.4 over
  jls-grok 0.11.5, as bundled with Logstash 8.19.20): its pattern-file loading rules, its
  expansion, ``Regexp::MULTILINE`` (``.`` matches a newline) and its capture handling.
  This is the engine the goldens are checked in: what Logstash will really do.
* ``elasticsearch``: tests/support/grok/GrokHarness.java over the test Elasticsearch's
  ``org.elasticsearch.grok`` (Joni without the multiline option).

Requests are ``(expression, text)``; an expression is a pattern NAME or, for the Logstash
engine, any grok expression. Each answer is ``{"match": bool, "captures": {field: value}}``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pytest
from corpus.tools_required import installed, jdk_tool

from hvdlog.parse.patterns import PATTERN_FILE, field_path

__all__ = ["LOGSTASH_MODE", "es_classpath", "fields_of", "run_elasticsearch", "run_logstash"]

GROK_DIR: Final = Path(__file__).resolve().parent / "grok"
#: The mode Logstash's grok compiles in; the tests assert the engine really runs this way.
LOGSTASH_MODE: Final = "multiline"
_JARS: Final = ("elasticsearch-grok-*.jar", "joni-*.jar", "jcodings-*.jar")


def _encode(requests: Sequence[tuple[str, str]]) -> bytes:
    return "".join(f"{name}\t{base64.b64encode(text.encode()).decode()}\n" for name, text in requests).encode()


def run_logstash(
    requests: Sequence[tuple[str, str]], *, mode: str = LOGSTASH_MODE, pattern_file: Path = PATTERN_FILE,
    keep_empty: bool = False,
) -> list[dict[str, Any]]:
    """Every request through Logstash's grok (JRuby), in ``mode`` (``multiline`` or ``plain``);
    ``keep_empty`` is the grok option ``keep_empty_captures => true``."""
    jruby = installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")
    result = subprocess.run(
        [jdk_tool("java"), "-jar", jruby, "--dev", str(GROK_DIR / "logstash_grok.rb"), str(pattern_file), mode,
         "keep_empty" if keep_empty else "drop_empty"],
        input=_encode(requests), capture_output=True, check=False, timeout=600,
    )
    assert result.returncode == 0, result.stderr.decode()
    answers = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert len(answers) == len(requests), result.stderr.decode()
    return answers


def es_classpath(classes: Path) -> str:
    """GrokHarness.java compiled into ``classes`` against the test Elasticsearch's grok jars."""
    es_home = os.environ.get("HVDLOG_ES_HOME")
    if not es_home:
        pytest.fail("HVDLOG_ES_HOME is not set: run scripts/bootstrap.sh test (it fetches Elasticsearch)")
    jars = []
    for pattern in _JARS:
        found = sorted(Path(es_home, "lib").glob(pattern))
        if not found:
            pytest.fail(f"{pattern} not found in {es_home}/lib: is HVDLOG_ES_HOME an Elasticsearch 8 home?")
        jars.append(str(found[0]))
    subprocess.run([jdk_tool("javac"), "-d", str(classes), "-cp", os.pathsep.join(jars), str(GROK_DIR / "GrokHarness.java")], check=True)
    return os.pathsep.join([*jars, str(classes)])


def run_elasticsearch(classpath: str, requests: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Every request (pattern names only) through the Elasticsearch grok engine."""
    result = subprocess.run(
        [jdk_tool("java"), "-cp", classpath, "GrokHarness", str(PATTERN_FILE), "v1"],  # ECS mode as in logstash.yml
        input=_encode(requests), capture_output=True, check=False, timeout=600,
    )
    assert result.returncode == 0, result.stderr.decode()
    answers = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert len(answers) == len(requests)
    return answers


def fields_of(answer: dict[str, Any]) -> dict[str, Any] | None:
    """An engine's answer as hvdlog's dotted fields (None: no match)."""
    if not answer["match"]:
        return None
    return {field_path(name): value for name, value in answer["captures"].items()}

"""Filebeat's hvdlog-events events through logstash/pipeline/horovod-app.conf's first steps:
the date filter (the event's own time, to the millisecond, as Logstash's ISO8601 match keeps
it) and the ruby filter horovod_app.rb run under JRuby by tests/support/ruby/run_filter.rb."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from corpus.tools_required import installed, jdk_tool

ROOT = Path(__file__).resolve().parents[2]
APP_SCRIPT = ROOT / "logstash" / "pipeline" / "horovod_app.rb"
RUNNER = ROOT / "tests" / "support" / "ruby" / "run_filter.rb"
SOURCE = "hvdlog_event"


def _date_filter(event: dict[str, Any]) -> dict[str, Any]:
    time = event.get(SOURCE, {}).get("@timestamp") if isinstance(event.get(SOURCE), dict) else None
    if isinstance(time, str) and len(time) >= 23:
        return {**event, "@timestamp": time[:23] + "Z"}
    return event


def through_app(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event as it leaves the app pipeline's ruby filter (one out per one in)."""
    jruby = installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")
    result = subprocess.run(
        [jdk_tool("java"), "-jar", jruby, "--dev", str(RUNNER), str(APP_SCRIPT), json.dumps({"source": SOURCE})],
        input="".join(json.dumps(_date_filter(event)) + "\n" for event in events),
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert result.returncode == 0 and "ruby filter exception" not in result.stderr, result.stderr[-3000:]
    outputs = [json.loads(line)["events"] for line in result.stdout.splitlines()]
    assert [len(out) for out in outputs] == [1] * len(events), outputs[:3]
    return [out[0] for out in outputs]

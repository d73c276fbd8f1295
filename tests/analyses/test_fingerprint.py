"""Fingerprints: the same bug in two jobs gets the same one, whatever its numbers, paths and line numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hvdlog.analyses.failures import first_failure
from hvdlog.analyses.fingerprint import top_user_frame
from hvdlog.cli.main import cli

REALWORLD = Path(__file__).resolve().parent.parent / "corpus" / "realworld"

TRACE = """Traceback (most recent call last):
  File "/home/u/{run}/train.py", line {line}, in <module>
    main()
  File "/home/u/{run}/train.py", line {inner}, in main
    load(cfg)
  File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 630, in __next__
    data = self._next_data()
{kind}: {text}"""


def _job(job: str, kind: str, text: str, run: str, line: int) -> list[dict[str, Any]]:
    """A two-rank job whose rank 1 raises, and whose rank 0 is shut down after it."""
    trace = TRACE.format(run=run, line=line, inner=line + 40, kind=kind, text=text)
    return [
        {"@timestamp": "2026-01-01T00:00:01Z", "job": job, "rank": 1, "host": {"name": "n1"}, "message": trace,
         "log": {"level": "error"}, "event": {"action": "uncaught_exception"},
         "error": {"type": kind, "message": text, "stack_trace": trace}},
        {"@timestamp": "2026-01-01T00:00:02Z", "job": job, "rank": 0, "host": {"name": "n0"}, "log": {"level": "error"},
         "message": "Horovod has been shut down. This was caused by an exception on one of the ranks",
         "error": {"type": "HorovodInternalError", "message": "Horovod has been shut down."}},
    ]


def _mark(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (report,) = first_failure(docs)
    assert report.fingerprint is not None
    return report.fingerprint


def test_the_same_bug_with_other_numbers_paths_and_lines_has_one_fingerprint() -> None:
    one = _mark(_job("a", "ValueError", "expected 512 items, got 511 in /data/run-3/shard-0007", "run1", 12))
    other = _mark(_job("b", "ValueError", "expected 64 items, got 63 in /data/run-9/shard-0002", "run2", 30))
    assert one == other
    assert one["error_type"] == "ValueError" and one["frame"] == "train.py:main"
    assert one["message"] == "expected <N> items, got <N> in <PATH>"


def test_different_bugs_have_different_fingerprints() -> None:
    base = _mark(_job("a", "ValueError", "expected 512 items", "r", 12))
    assert _mark(_job("b", "KeyError", "expected 512 items", "r", 12))["id"] != base["id"]
    assert _mark(_job("c", "ValueError", "shape mismatch 512", "r", 12))["id"] != base["id"]


def test_top_user_frame_skips_the_libraries_and_takes_the_innermost() -> None:
    assert top_user_frame(TRACE.format(run="x", line=1, inner=2, kind="E", text="t")) == "train.py:main"
    assert top_user_frame('  File "/usr/lib/python3.10/threading.py", line 9, in run') is None
    assert top_user_frame(None) is None


def test_first_failure_json_and_report_show_the_fingerprint() -> None:
    case = REALWORLD / "gloo-timestamped-cuda-oom" / "console.log"
    runner = CliRunner()
    found = runner.invoke(cli, ["first-failure", "--json", str(case)])
    assert found.exit_code == 0, found.output
    mark = json.loads(found.output.splitlines()[0])["fingerprint"]
    assert mark["error_type"] == "RuntimeError" and "CUDA out of memory" in mark["message"] and "<N>" in mark["message"]
    shown = runner.invoke(cli, ["report", str(case)])
    assert f"fingerprint {mark['id']}: RuntimeError: CUDA out of memory" in shown.output, shown.output

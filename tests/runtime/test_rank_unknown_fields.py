"""A process no launcher numbered writes no ``rank``/``size``/``local_rank``/``local_size`` key at all:
the docs say the key's absence means "rank unknown" (issue #40: files held ``"rank": null``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

from hvdlog.runtime.rank import from_environment

RANK_KEYS = ("rank", "size", "local_rank", "local_size")


def test_rank_unknown_lines_have_no_rank_keys(tmp_path: Path) -> None:
    code = f"""
import hvdlog
hvdlog.configure(root={str(tmp_path)!r}, job="j", stall_after=None, console=False)
log = hvdlog.get_logger()
log.info("plain")
log.info("mine", rank=5)
with hvdlog.step(3):
    log.warning("in a step")
raise ValueError("boom")
"""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("HOROVOD_", "OMPI_", "PMI_", "PMIX_", "SLURM_"))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 1, result.stderr[-2000:]
    assert from_environment(env).rank is None  # the premise: this environment gives no rank
    (path,) = tmp_path.glob("j/*/rank-unknown-pid*.jsonl")
    events = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [event["message"] for event in events[:3]] == ["plain", "mine", "in a step"]
    assert any(event.get("event.action") == "uncaught_exception" for event in events)
    assert any(event.get("event.action") == "process_exit" for event in events)
    for event in events:
        assert not set(RANK_KEYS) & set(event), event
    assert events[1]["extra"] == {"rank": 5}  # the caller's own rank= still never poses as the rank field
    assert events[2]["step"] == 3

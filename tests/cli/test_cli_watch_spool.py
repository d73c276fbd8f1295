"""``hvdlog watch`` with a receiver that is down, then up: the alert is spooled in the watcher's state directory, then delivered once.

The rank's file is written here line by line (a crash as hvdlog's runtime logs it), so the
test spends its time on delivery, not on training; the watcher, the receiver and the files are real.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from support.watch_harness import Receiver, wait_for, watcher


def _append(path: Path, **event: object) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps(event) + "\n")


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_receiver_down_then_up(tmp_path: Path) -> None:
    """Spooled in the watcher's own state directory (never the job's folder) and said on stderr (no secret shown);
    delivered once when the receiver is up."""
    root = tmp_path / "logs"
    rank_file = root / "job7" / "node1" / "rank-1.jsonl"
    rank_file.parent.mkdir(parents=True)
    receiver = Receiver(up=False)
    stderr = tmp_path / "watch.stderr"
    state = tmp_path / "state"
    process = watcher("--interval", "0.3", "--retries", "2", "--webhook", receiver.url, str(root), stderr=stderr, env={"XDG_STATE_HOME": str(state)})
    try:
        base = {"rank": 1, "size": 2, "job": "job7", "host.name": "node1", "process.pid": 42}

        def step_seen() -> bool:  # the watcher reads from now on: steps until it says it saw the job
            _append(rank_file, **{"@timestamp": _now(), "log.level": "info", "message": "train step", "step": 1, **base})
            return "watching job job7" in stderr.read_text()

        wait_for(step_seen, 60, "the watcher to see the job", poll=0.5)
        crash = {"event.action": "uncaught_exception", "error.type": "RuntimeError", "error.message": "CUDA error: an illegal memory access"}
        _append(rank_file, **{"@timestamp": _now(), "log.level": "critical", "message": "uncaught exception", "step": 2, **crash, **base})
        spool = state / "hvdlog" / "watch-spool" / "job7.hvdlog-watch.spool"
        wait_for(spool.exists, 60, "the spool file in the watcher's state directory")
        assert receiver.bodies == []
        (entry,) = [json.loads(line) for line in spool.read_text().splitlines()]
        assert entry["alert"]["kind"] == "failure" and entry["alert"]["ranks"] == [1] and "s3cr3t" not in json.dumps(entry)
        receiver.start()
        wait_for(lambda: receiver.alerts("failure"), 60, "the spooled alert")
        wait_for(lambda: not spool.exists(), 30, "the spool to empty")
        time.sleep(6.0)  # another retry round (every 5 s): nothing is sent twice
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
        receiver.stop()
    assert len(receiver.alerts("failure")) == 1 and "CUDA error" in receiver.alerts("failure")[0]["reasoning"]
    err = stderr.read_text()
    assert "not delivered to webhook http://127.0.0.1:" in err and f"spooled to {spool}" in err and not list(root.rglob("*.spool"))
    assert "hvdlog: watch: delivered 1 spooled alert(s)" in err and "s3cr3t" not in err
    assert "warning: delivered" not in err  # good news is not a warning (issue #40)
    printed = [json.loads(line) for line in (process.stdout.read() if process.stdout else "").splitlines()]
    assert [a["kind"] for a in printed] == ["failure"]  # the terminal had it at once

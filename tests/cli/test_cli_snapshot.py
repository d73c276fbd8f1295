"""`hvdlog snapshot` on a real `horovodrun --gloo -np 2` job whose rank 1 hangs: both ranks answer while
rank 0's training thread is blocked in the allreduce, grouped by where they are; `stalls` gives the same
ranks the class `culprit outside`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from support.watch_harness import ENV, IN_TREE, rank_events, training_job, wait_for


def _hvdlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*IN_TREE, *args], capture_output=True, text=True, env=ENV, timeout=120, check=False)


@pytest.mark.horovod
def test_snapshot_of_a_hung_job(tmp_path: Path) -> None:
    job = training_job(tmp_path, "hung", "--steps-per-epoch", "8", "--stall-after", "3", "--hang-rank", "1", "--hang-at-step", "3",
                       "--hang-seconds", "300")
    try:
        # Rank 0 waits in the step-3 allreduce: its watchdog said so (the training thread is blocked there).
        wait_for(lambda: any(e.get("event.action") == "stall" and e.get("step") == 3 for e in rank_events(tmp_path, "hung", 0)),
                 240, "rank 0's stall report at step 3")
        done = _hvdlog("snapshot", "--json", "--timeout", "60", str(tmp_path / "hung"))
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["answered"] == [0, 1] and answer["no_answer"] == []
        where = {group["location"]: group["ranks"] for group in answer["groups"]}
        assert where["_DistributedOptimizer.step > synchronize"] == [0]
        assert [ranks for location, ranks in where.items() if location.startswith("inject_faults at train.py:")] == [[1]]
        text = _hvdlog("snapshot", str(tmp_path / "hung"))
        assert "2 of 2 ranks answered" in text.stdout and "rank 0 in `_DistributedOptimizer.step > synchronize`" in text.stdout
        stalls = _hvdlog("stalls", "--json", str(tmp_path / "hung"))
        hang = json.loads(stalls.stdout.splitlines()[0])["hang"]
        assert (hang["kind"], hang["culprits"], hang["confidence"]) == ("culprit_outside", [1], "certain"), hang["reasoning"]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)


def test_ranks_that_do_not_answer_are_named(tmp_path: Path) -> None:
    """A job folder whose ranks have no running watchdog: exit 1 after the timeout, the ranks named on stderr."""
    folder = tmp_path / "gone" / "node0"
    folder.mkdir(parents=True)
    for rank in (0, 1):
        (folder / f"rank-{rank}.jsonl").write_text(json.dumps({"rank": rank, "message": "train step", "job": "gone"}) + "\n")
    done = _hvdlog("snapshot", "--timeout", "1", str(tmp_path / "gone"))
    assert done.returncode == 1
    assert "no answer from rank 0-1" in done.stderr and "0 of 2 ranks answered" in done.stdout

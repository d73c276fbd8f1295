"""``hvdlog watch`` against real running training jobs, with a real webhook receiver on loopback.

Each test starts ``hvdlog watch`` first, then a real ``training/train.py`` job with one fault
flag, and reads what reached the receiver: the alert kind, its ranks, once per episode.
Every wait is bounded and generous (the machine is shared); what each bound stands for is
said where it is used.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.watch_harness import IndependentRanks, Receiver, rank_events, training_job, wait_for, watcher

pytestmark = pytest.mark.horovod

#: The watcher's poll interval in these tests (s).
INTERVAL = 1.0
#: What a loaded machine adds on top of a documented bound (s): the ranks' own watchdog poll,
#: the file being flushed, a busy scheduler.
LOAD_SLACK = 6.0


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.fixture(name="receiver")
def fixture_receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.stop()


class _Watch:
    """A running ``hvdlog watch`` and how to end it."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.stderr = tmp_path / "watch.stderr"
        # --from-start: the job's files (the test's own index) are new, and a watcher slow to start must not skip their first lines
        self.process = watcher("--interval", str(INTERVAL), "--from-start", *args, stderr=self.stderr)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        return self.stderr.read_text()

    def printed(self) -> list[dict[str, Any]]:
        """The alerts printed on stdout (--json), once it ended."""
        out = self.process.stdout.read() if self.process.stdout else ""
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _finish(job: subprocess.Popen[bytes], timeout: float = 240) -> int:
    try:
        return job.wait(timeout)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)


def _episodes(alerts: list[dict[str, Any]]) -> dict[str, list[str]]:
    """episode -> the statuses it went through, in order."""
    seen: dict[str, list[str]] = {}
    for alert in alerts:
        seen.setdefault(alert["episode"], []).append(alert["status"])
    return seen


@pytest.mark.horovod
def test_hung_rank_stall_alert_then_resolved(tmp_path: Path, receiver: Receiver) -> None:
    """--hang-rank 1: one stall alert naming rank 1 within stall_after + a poll, then its "resolved"; the job finishes."""
    root, stall_after = tmp_path / "logs", 3.0
    watch = _Watch(tmp_path, "--webhook", receiver.url, "--silent-after", "40", "--exit-when-finished", str(root))
    job = training_job(root, "hang", "--steps-per-epoch", "6", "--stall-after", str(stall_after),
                       "--hang-rank", "1", "--hang-at-step", "3", "--hang-seconds", "10")
    try:
        firing = wait_for(lambda: [a for a in receiver.alerts("stall", "firing") if a["step"] == 3], 180, "the step-3 stall alert")
        episode = firing[0]["episode"]
        wait_for(lambda: [a for a in receiver.alerts("stall", "resolved") if a["episode"] == episode], 60, "its resolution")
        assert _finish(job) == 0
        wait_for(lambda: receiver.alerts("job_finished"), 120, "the job-finished alert")
    finally:
        _finish(job, 0)
        stderr = watch.stop()
    assert firing[0]["ranks"] == [1] and firing[0]["job"] == "hang", firing
    hang = next(e for e in rank_events(root, "hang", 1) if e["message"].startswith("injected hang"))
    late = _seconds(firing[0]["time"]) - _seconds(hang["@timestamp"])
    assert late <= stall_after + INTERVAL + LOAD_SLACK, f"stall alert {late:.1f} s after the hang began"
    step_three = [a for a in receiver.alerts("stall") if a["episode"] == episode]
    assert [a["status"] for a in step_three] == ["firing", "resolved"]  # once, though both ranks report it every 3 s
    assert "progress resumed" in step_three[1]["summary"]
    (finished,) = receiver.alerts("job_finished")
    assert finished["status"] == "success" and finished["ranks"] == [0, 1]
    assert receiver.alerts("failure") == [] and "s3cr3t-token" not in stderr
    assert all(statuses.count("firing") <= 1 for statuses in _episodes(receiver.bodies).values()), receiver.bodies
    assert watch.printed() == receiver.bodies  # the terminal got every alert too


@pytest.mark.horovod
def test_crashed_rank_failure_alert(tmp_path: Path, receiver: Receiver) -> None:
    """--crash-rank 1: one failure alert naming rank 1 and the InjectedFault; rank 0 as collateral; the job finished: failure."""
    root = tmp_path / "logs"
    watch = _Watch(tmp_path, "--webhook", receiver.url, "--silent-after", "20", "--exit-when-finished", str(root))
    job = training_job(root, "crash", "--steps-per-epoch", "8", "--crash-rank", "1", "--crash-at-step", "3")
    try:
        assert _finish(job) != 0
        wait_for(lambda: receiver.alerts("job_finished"), 150, "the job-finished alert")
    finally:
        _finish(job, 0)
        watch.stop()
    (failure,) = receiver.alerts("failure", "firing")
    assert failure["ranks"] == [1] and "InjectedFault" in failure["summary"] and "injected fault on rank 1" in failure["reasoning"]
    assert failure["confidence"] in ("certain", "likely")
    collateral = {rank for a in receiver.alerts("failure") for rank in a["details"].get("collateral_ranks", [])}
    assert collateral == {0}
    (finished,) = receiver.alerts("job_finished")
    assert finished["status"] == "failure"
    assert receiver.alerts("silent_rank") == []  # rank 1 said why it stopped


def test_killed_rank_is_silent(tmp_path: Path, receiver: Receiver) -> None:
    """A rank SIGKILLed while rank 0 hangs (and keeps reporting its stall): a silent-rank alert naming rank 1, once."""
    root, silent_after = tmp_path / "logs", 6.0
    watch = _Watch(tmp_path, "--webhook", receiver.url, "--silent-after", str(silent_after), str(root))
    ranks = IndependentRanks(root, "kill", "--steps-per-epoch", "6", "--stall-after", "2",
                             "--hang-rank", "0", "--hang-at-step", "3", "--hang-seconds", "60")
    try:
        wait_for(lambda: [e for e in rank_events(root, "kill", 0) if e["message"].startswith("injected hang")], 180, "rank 0's hang")
        wait_for(lambda: [e for e in rank_events(root, "kill", 1) if e.get("event.action") == "stall"], 60, "rank 1 waiting")
        ranks.processes[1].send_signal(signal.SIGKILL)
        ranks.processes[1].wait(30)
        killed = max(e["@timestamp"] for e in rank_events(root, "kill", 1))
        (silent,) = wait_for(lambda: receiver.alerts("silent_rank", "firing"), silent_after + 60, "the silent-rank alert")
        wait_for(lambda: len([e for e in rank_events(root, "kill", 0) if e.get("event.action") == "stall"]) >= 8, 60, "more stall reports")
    finally:
        ranks.stop()
        watch.stop()
    assert silent["ranks"] == [1] and silent["job"] == "kill" and silent["details"]["silent_after_s"] == silent_after
    assert _seconds(silent["time"]) - _seconds(killed) >= silent_after  # not before the threshold
    assert len(receiver.alerts("silent_rank")) == 1  # rank 0 kept logging: no update, no second alert
    assert silent["hosts"] and silent["step"] is not None


@pytest.mark.elasticsearch
def test_over_elasticsearch(tmp_path: Path, receiver: Receiver, es_url: str) -> None:
    """The same over Elasticsearch: a hang then a crash of rank 1, shipped while it runs; stall, resolved, failure, finished."""
    from support.watch_harness import Shipper

    root, index = tmp_path / "logs", f"hvdlog-watch-{os.getpid()}"
    shipper = Shipper(es_url, index, root)
    watch = _Watch(tmp_path, "--webhook", receiver.url, "--es", es_url, "--index", index, "--job", "esjob",
                   "--silent-after", "30", "--exit-when-finished")
    job = training_job(root, "esjob", "--steps-per-epoch", "8", "--stall-after", "3", "--hang-rank", "1", "--hang-at-step", "3",
                       "--hang-seconds", "10", "--crash-rank", "1", "--crash-at-step", "5")
    try:
        firing = wait_for(lambda: [a for a in receiver.alerts("stall", "firing") if a["step"] == 3], 180, "the step-3 stall alert")
        wait_for(lambda: receiver.alerts("failure", "firing"), 120, "the failure alert")
        assert _finish(job) != 0
        wait_for(lambda: receiver.alerts("job_finished"), 150, "the job-finished alert")
    finally:
        _finish(job, 0)
        watch.stop()
        shipper.stop()
    assert firing[0]["ranks"] == [1]
    step_three = [a["status"] for a in receiver.alerts("stall") if a["episode"] == firing[0]["episode"]]
    assert step_three == ["firing", "resolved"]
    (failure,) = receiver.alerts("failure", "firing")
    assert failure["ranks"] == [1] and "InjectedFault" in failure["summary"]
    assert [a["status"] for a in receiver.alerts("job_finished")] == ["failure"]


@pytest.mark.horovod
def test_straggler_alert_once(tmp_path: Path, receiver: Receiver) -> None:
    """Three ranks, --straggler-rank 1 (0.3 s of extra work per step, seen in its samples/s): one straggler
    alert for rank 1; then success. (Two ranks cannot decide on step figures: the analysis says so and
    watch pages nobody, tests/watch/test_detectors.py.)"""
    root = tmp_path / "logs"
    watch = _Watch(tmp_path, "--webhook", receiver.url, "--silent-after", "20", "--exit-when-finished", str(root))
    job = training_job(root, "slow", "--steps-per-epoch", "25", "--straggler-rank", "1", "--straggler-delay", "0.3", np=3)
    try:
        assert _finish(job) == 0
        wait_for(lambda: receiver.alerts("job_finished"), 120, "the job-finished alert")
    finally:
        _finish(job, 0)
        watch.stop()
    (straggler,) = receiver.alerts("straggler", "firing")
    assert straggler["ranks"] == [1] and "samples/s" in straggler["reasoning"] and straggler["hosts"]
    assert [a["status"] for a in receiver.alerts("job_finished")] == ["success"]
    assert receiver.alerts("failure") == [] and receiver.alerts("silent_rank") == []

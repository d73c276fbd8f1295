"""One job, one verdict (issue 40): every command gives a job the same status, culprit, step,
recovered and stragglers, on real jobs.

Real ``training/train.py`` runs under ``hvdlog run -- horovodrun --gloo -np 2`` (short, 2 ranks):
a clean finish, a crash, a hang the operator ended with SIGINT, a job hung right now, a
timeline straggler; a real elastic recovery, README's ``training/elastic_train.py`` under
``hvdlog run -- horovodrun`` with ``--min-np 1`` (rank 1 SIGKILLed at step 3; the session's one
run, tests/support/elastic_run.py, shared with tests/runtime/test_resets.py); the committed
recording of an older elastic job (tests/corpus/elastic/j1) and a ``cp -r`` copy of the clean job. For each, ``report``, ``jobs``,
``first-failure``, ``stalls``, ``stragglers`` and ``watch`` are run as a user would (``--json``),
and every answer a command gives is compared with the expected one: they must all be equal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from support.elastic_run import ElasticRun
from support.watch_harness import ENV, IN_TREE, REPO, rank_events, wait_for

pytestmark = pytest.mark.horovod

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "elastic" / "j1"


def hvdlog(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The in-tree CLI, as a user runs it."""
    return subprocess.run([*IN_TREE, *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False)


def launch(root: Path, job: str, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``hvdlog run -- horovodrun --gloo -np 2 python training/train.py ...`` in its own session."""
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    command = [*IN_TREE, "run", "--root", str(root), "--job", job, "--", horovodrun, "--gloo", "-np", "2", sys.executable,
               str(REPO / "training" / "train.py"), "--epochs", "1", "--samples", "512", *flags]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{job}.console", "wb") as console:
        return subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, env={**ENV, **(env or {})}, start_new_session=True)


def finish(process: subprocess.Popen[bytes], timeout: float = 240) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def stalled(root: Path, job: str, reports: int = 2) -> bool:
    """Both ranks' watchdogs reported the stall at least ``reports`` times between them."""
    return sum(1 for rank in (0, 1) for event in rank_events(root, job, rank) if event.get("event.action") == "stall" and "step" in event) >= reports


def _lines(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def watch_verdict(folder: Path) -> dict[str, Any]:
    """``hvdlog watch --from-start`` until the job's job_finished alert (or a few quiet seconds): its verdict;
    a job that has not finished but has an open stall alert is hung."""
    process = subprocess.Popen([*IN_TREE, "watch", "--json", "--from-start", "--exit-when-finished", "--silent-after", "4",
                                "--interval", "0.5", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        out, _ = process.communicate(timeout=40)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    alerts = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finished = [alert for alert in alerts if alert["kind"] == "job_finished"]
    if finished:
        return dict(finished[-1]["details"]["verdict"])
    stalls = [alert for alert in alerts if alert["kind"] == "stall"]
    if stalls and stalls[-1]["status"] != "resolved":
        return {"status": "hung"}
    return {"status": None}


def views(folder: Path, root: Path) -> dict[str, dict[str, Any]]:
    """What each command says about the one job in ``folder`` (``root``: the folder ``jobs`` lists)."""
    (report,) = _lines(hvdlog("report", "--json", str(folder)))
    (row,) = _lines(hvdlog("jobs", "--json", str(root)))
    failures = _lines(hvdlog("first-failure", "--json", str(folder)))
    first = failures[0]["verdict"] if failures else {"culprit": [], "step": None, "recovered": False}
    episodes = _lines(hvdlog("stalls", "--json", str(folder)))
    rows = _lines(hvdlog("stragglers", "--json", str(folder)))
    return {
        "report": report["verdict"],
        "jobs": {key: value for key, value in row["verdict"].items() if key != "stragglers"},  # jobs reads no step series
        "first-failure": first,
        "stalls": {"status": "hung"} if any(e["ended"] == "still open" for e in episodes) else {},
        "stragglers": {"stragglers": sorted(r["rank"] for r in rows if r["outlier"])},
        "watch": watch_verdict(folder),
    }


def assert_agree(found: dict[str, dict[str, Any]], expected: dict[str, Any]) -> None:
    """Every answer each command gives equals the expected one (a command that cannot answer a key says nothing of it)."""
    disagreements = [f"{command} says {key}={value!r}, expected {expected[key]!r}"
                     for command, answers in found.items() for key, value in answers.items()
                     if key in expected and value != expected[key]]
    assert not disagreements, "\n".join(disagreements) + f"\n{json.dumps(found, indent=1)}"


@pytest.fixture(scope="module", name="jobs")
def fixture_jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The finished real jobs, one root each, run one after the other (2 cores shared)."""
    base = tmp_path_factory.mktemp("agreement")
    assert finish(launch(base / "clean", "clean", "--steps-per-epoch", "6")) == 0
    assert finish(launch(base / "crash", "crash", "--steps-per-epoch", "8", "--crash-rank", "1", "--crash-at-step", "3")) != 0
    killed = launch(base / "killed", "killed", "--steps-per-epoch", "8", "--hang-rank", "1", "--hang-at-step", "3",
                    "--stall-after", "2", "--hang-seconds", "600")
    try:
        wait_for(lambda: stalled(base / "killed", "killed"), 180, "the hung rank's stall reports")
        killed.send_signal(signal.SIGINT)  # the operator's `timeout -s INT`: hvdlog run passes it on to horovodrun
    finally:
        code = finish(killed, 120)
    if code == 0:  # horovodrun's own status is not under test; the ranks' records are (once seen: 0 in a CI run)
        console = (base / "killed" / "killed.console").read_text(errors="replace")
        warnings.warn(f"horovodrun exited 0 after SIGINT; its console ends:\n{console[-3000:]}", stacklevel=1)
    assert finish(launch(base / "straggler", "straggler", "--steps-per-epoch", "16", "--straggler-rank", "1",
                         "--straggler-delay", "0.5", env={"HVDLOG_TIMELINE": "1"})) == 0
    shutil.copytree(CORPUS, base / "elastic" / "j1")
    time.sleep(1.1)  # the copy's files are newer than the original's by more than a second
    shutil.copytree(base / "clean", base / "copy", copy_function=shutil.copy)  # `cp -r`: new modification times
    return base


@pytest.mark.parametrize(("name", "expected"), [
    ("clean", {"status": "finished", "culprit": [], "step": None, "recovered": False, "stragglers": []}),
    ("crash", {"status": "failed", "culprit": [1], "step": 3, "recovered": False}),
    ("killed", {"status": "failed", "culprit": [1], "step": 3, "recovered": False}),
    ("straggler", {"status": "finished", "culprit": [], "recovered": False, "stragglers": [1]}),
    ("elastic", {"status": "recovered", "culprit": [0], "recovered": True}),  # the committed recording
    ("copy", {"status": "finished", "culprit": [], "step": None, "recovered": False, "stragglers": []}),
])
def test_every_command_gives_the_same_verdict(jobs: Path, name: str, expected: dict[str, Any]) -> None:
    """report, jobs, first-failure, stalls, stragglers and watch agree with each other and with what happened."""
    root = jobs / name
    (folder,) = [path for path in root.iterdir() if path.is_dir()]
    assert_agree(views(folder, root), expected)


def test_a_real_elastic_recovery(elastic_example: ElasticRun) -> None:
    """Rank 1 killed at step 3, rank 0 reset and finished alone: recovered, and rank 1 the culprit, everywhere.
    A SIGKILLed rank says nothing of its step, so no command names one (its last step event is not where it died)."""
    assert elastic_example.returncode == 0, elastic_example.console[-3000:]
    assert_agree(views(elastic_example.directory, elastic_example.root),
                 {"status": "recovered", "culprit": [1], "step": None, "recovered": True, "stragglers": []})


def test_a_copied_folder_keeps_its_times(jobs: Path) -> None:
    """`cp -r` of a finished job: the same first and last times as the original, and still finished (M5)."""
    (original,) = _lines(hvdlog("jobs", "--json", str(jobs / "clean")))
    (copied,) = _lines(hvdlog("jobs", "--json", str(jobs / "copy")))
    assert (copied["first"], copied["last"], copied["status"]) == (original["first"], original["last"], original["status"])
    assert copied["status"]["confidence"] == "certain"


def test_a_job_hung_right_now(tmp_path: Path) -> None:
    """While rank 1 hangs and the watchdogs report it, every command says hung (not running: M2)."""
    job = launch(tmp_path, "hung", "--steps-per-epoch", "8", "--hang-rank", "1", "--hang-at-step", "3", "--stall-after", "2",
                 "--hang-seconds", "600")
    try:
        wait_for(lambda: stalled(tmp_path, "hung", reports=3), 180, "the hung rank's stall reports")
        found = views(tmp_path / "hung", tmp_path)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
    assert_agree(found, {"status": "hung", "culprit": [], "step": None, "recovered": False})

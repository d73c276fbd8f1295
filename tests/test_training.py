"""The training example under real `horovodrun -np 2` (Gloo and MPI): what lands in the files."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from corpus.tools_required import horovodrun as horovodrun_path

from hvdlog import layout
from hvdlog.fields import FIELDS_BY_NAME

REPO = Path(__file__).resolve().parent.parent
TRAIN = REPO / "training" / "train.py"

pytestmark = pytest.mark.horovod


@dataclass
class Run:
    """One finished horovodrun job and its per-rank files."""

    result: subprocess.CompletedProcess[str]
    root: Path
    job: str

    def files(self, rank: int, kind: str = "events") -> list[Path]:
        return sorted((self.root / self.job).glob(f"*/rank-{rank}.{layout.KINDS[kind]}"))

    def events(self, rank: int) -> list[dict]:
        (path,) = self.files(rank)
        return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def horovodrun(tmp_path_factory: pytest.TempPathFactory, name: str, *flags: str, mpi: bool = False, env: dict[str, str] | None = None) -> Run:
    root = tmp_path_factory.mktemp(name)
    launcher = ["--mpi", "--mpi-args=--allow-run-as-root --oversubscribe"] if mpi and os.geteuid() == 0 else (["--mpi"] if mpi else ["--gloo"])
    cmd = [
        str(Path(horovodrun_path())), "-np", "2", "-H", "localhost:2", *launcher,
        sys.executable, str(TRAIN), "--log-root", str(root), "--job", name, "--epochs", "1", "--steps-per-epoch", "6", *flags,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, **(env or {})}, check=False)
    return Run(result, root, name)


@pytest.fixture(name="gloo_run", scope="module")
def fixture_gloo_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return horovodrun(tmp_path_factory, "gloo-ok", env={"HOROVOD_LOG_LEVEL": "debug"})


@pytest.fixture(name="mpi_run", scope="module")
def fixture_mpi_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return horovodrun(tmp_path_factory, "mpi-ok", mpi=True, env={"HOROVOD_LOG_LEVEL": "debug"})


class TestCleanRuns:
    @pytest.mark.parametrize("run_name", ["gloo_run", "mpi_run"])
    def test_one_file_set_per_rank(self, run_name: str, request: pytest.FixtureRequest) -> None:
        """Each rank has its JSON file and both native captures; Horovod's DEBUG lines are captured."""
        run: Run = request.getfixturevalue(run_name)
        assert run.result.returncode == 0, run.result.stdout[-3000:] + run.result.stderr[-3000:]
        for rank in (0, 1):
            assert len(run.files(rank)) == 1 and len(run.files(rank, "stdout")) == 1 and len(run.files(rank, "stderr")) == 1
            debug = run.files(rank, "stdout")[0].read_text()
            assert "D /" in debug and "horovod/common/" in debug, debug[:500]

    @pytest.mark.parametrize("run_name", ["gloo_run", "mpi_run"])
    def test_every_line_is_contract_json(self, run_name: str, request: pytest.FixtureRequest) -> None:
        """Every line parses, uses declared fields only, and carries the right rank, local_rank and step."""
        run: Run = request.getfixturevalue(run_name)
        for rank in (0, 1):
            events = run.events(rank)
            assert events, f"rank {rank} wrote nothing"
            for event in events:
                assert set(event) <= set(FIELDS_BY_NAME), set(event) - set(FIELDS_BY_NAME)
                assert (event["rank"], event["local_rank"], event["size"], event["job"]) == (rank, rank, 2, run.job)
                assert event["event.dataset"] == "horovod.app"
            steps = [e["step"] for e in events if e["message"] == "train step"]
            assert steps == list(range(1, 7))
            assert all(isinstance(e["loss"], float) and e["samples_per_sec"] > 0 for e in events if e["message"] == "train step")
        # Metric averaging: both ranks log the same job-wide loss per step.
        losses = [[e["loss"] for e in run.events(rank) if e["message"] == "train step"] for rank in (0, 1)]
        assert losses[0] == losses[1]


def test_crash_leaves_traceback_in_that_ranks_file(tmp_path_factory: pytest.TempPathFactory) -> None:
    """An injected exception on rank 1 is logged there with error.* and step; rank 0 is marked collateral by its error type."""
    run = horovodrun(tmp_path_factory, "gloo-crash", "--crash-rank", "1", "--crash-at-step", "3")
    assert run.result.returncode != 0
    crash = [e for e in run.events(1) if e.get("event.action") == "uncaught_exception"]
    assert len(crash) == 1
    assert crash[0]["error.type"] == "__main__.InjectedFault" and crash[0]["step"] == 3
    assert "injected fault on rank 1 at step 3" in crash[0]["error.stack_trace"]
    assert "InjectedFault: injected fault on rank 1" in run.files(1, "stderr")[0].read_text()
    assert not any(e.get("error.type") == "__main__.InjectedFault" for e in run.events(0))


def test_hang_produces_stall_events_under_gloo(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Rank 1 hangs outside any collective: both ranks report stalls, only rank 1 without a collective, then both resolve."""
    run = horovodrun(
        tmp_path_factory, "gloo-hang", "--hang-rank", "1", "--hang-at-step", "3", "--hang-seconds", "8", "--stall-after", "3"
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    # A loaded machine may also report a stall during hvd.init(), before any step: not this one.
    stalls = {rank: [e for e in run.events(rank) if e.get("event.action") == "stall" and "step" in e] for rank in (0, 1)}
    assert stalls[0] and stalls[1]
    assert all(e["step"] == 3 and e["horovod.stall.source"] == "watchdog" for rank in (0, 1) for e in stalls[rank])
    assert all("horovod.stall.operation" not in e for e in stalls[1]), "the culprit is not in a collective"
    assert all(e["log.origin.function"] == "inject_faults" for e in stalls[1])
    assert all("synchronize" in e["horovod.stall.operation"] for e in stalls[0]), "the victim waits in a collective"
    for rank in (0, 1):
        resolved = [e for e in run.events(rank) if e.get("event.action") == "stall_resolved" and e.get("step") == 3]
        assert len(resolved) == 1 and resolved[0]["horovod.stall.seconds"] >= 6


def test_straggler_is_flagged_by_hvdlog_stragglers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """--straggler-rank 1 slows rank 1's compute; samples_per_sec (measured before the allreduce wait) shows it,
    and with 2 ranks the timeline (HVDLOG_TIMELINE=1: rank 0 waited for rank 1) is what lets hvdlog name it."""
    run = horovodrun(tmp_path_factory, "gloo-straggler", "--straggler-rank", "1", "--straggler-delay", "0.15",
                     "--steps-per-epoch", "16", env={"HVDLOG_TIMELINE": "1"})
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    result = subprocess.run(
        [str(Path(sys.executable).with_name("hvdlog")), "stragglers", "--json", str(run.root / run.job)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = {row["rank"]: row for row in map(orjson.loads, result.stdout.splitlines())}
    assert rows[1]["outlier"] and not rows[0]["outlier"]
    assert "timeline" in rows[1]["evidence"] and rows[1]["confidence"] in ("likely", "certain")
    assert rows[1]["samples_per_sec"] < rows[0]["samples_per_sec"] / 2

"""`hvdlog diff` on real `training/train.py` runs under `horovodrun -np 2`: a healthy run and one with an
injected fault, of the same script under one root. The fault leads, and nothing that differs only in
numbers (losses, rates, times, pids) is reported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus.tools_required import horovodrun

from hvdlog.analyses.summary import one_line
from hvdlog.cli.main import cli
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

pytestmark = pytest.mark.horovod

TRAIN = Path(__file__).resolve().parent.parent.parent / "training" / "train.py"


def _train(root: Path, job: str, *flags: str) -> None:
    cmd = [str(Path(horovodrun())), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, str(TRAIN),
           "--log-root", str(root), "--job", job, "--epochs", "1", "--steps-per-epoch", "8", *flags]
    subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ), check=False)
    assert list((root / job).rglob("rank-*.jsonl")), f"{job}: no events written"


def test_diff_of_a_crashed_run_against_the_healthy_one(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _train(root, "train-20261206-1")
    _train(root, "train-20261206-2", "--crash-rank", "1", "--crash-at-step", "4")
    result = CliRunner().invoke(cli, ["diff", "--json", str(root / "train-20261206-2")])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert Path(answer["good"]).name == "train-20261206-1", answer["good_chosen"]
    top = [item["example"] for item in answer["templates"][:3]]
    assert any("injected fault on rank 1 at step 4" in line for line in top), top
    good = {re.sub(r"\d+", "", one_line(doc)) for doc in FileSource([str(root / "train-20261206-1")]).search(Filter())}
    assert not [item["example"] for item in answer["templates"] if re.sub(r"\d+", "", item["example"]) in good]

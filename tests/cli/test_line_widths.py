"""One-line views stay one screen wide (issue 40): real consoles carry exception messages, tensor
names and reasons of 300-900 characters, which ``jobs``, ``stalls``, ``report`` and ``first-failure``
once printed whole on one line. A table row or a summary now cuts its free text (``--json`` keeps
it whole) and ``first-failure`` wraps its answer; only a traceback's own lines are shown verbatim."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REALWORLD = REPO / "tests" / "corpus" / "realworld"
#: The cases whose lines were the longest (cause, collateral, reasons, tensor names).
CASES = ("tf211-graph-execution-error", "gloo-nccl-init-chained", "compose-prefix-stalled-ops-v015")
#: Columns a line may take (the jobs table's fixed columns are 121 wide before the status and its reason).
WIDEST = 280


def _lines(command: str, case: str, *options: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "hvdlog", command, *options, f"{case}/"], capture_output=True, text=True,
                            cwd=REALWORLD, env=env, timeout=120, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", ["jobs", "stalls", "report", "first-failure"])
def test_no_line_is_wider_than_a_screen_but_a_traceback_s(command: str, case: str) -> None:
    lines = _lines(command, case)
    if command == "first-failure":
        lines = [line for line in lines if not line.startswith("    ") or not line.strip()]  # the traceback, verbatim
    wide = [line for line in lines if len(line) > WIDEST]
    assert not wide, "\n".join(f"{len(line)}: {line[:160]}" for line in wide)


def test_json_keeps_the_whole_text() -> None:
    """What a table cuts, ``--json`` gives whole: the jobs row's reason and the culprit's cause."""
    (row,) = _lines("jobs", "tf211-graph-execution-error", "--json")
    assert "[Op:__inference_train_function_21437]" in row

"""``stalls`` and ``first-failure`` on a job with nothing to report cost what their prefiltered read costs.

The sentence "no stall in 1024 ranks of job …" once came from reading every document a second
time and sorting them: 9.5-17 s and 2.3 GB on a 1,024-rank × 1,000-step job where ``grep --level
error`` takes 0.28 s. Each command here is a real process; its CPU (user + system, its children
included) and peak RSS come from ``wait4``, so the machine's load changes the wall time, not these.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_scale  # the bench's event lines, at test sizes

RANKS = 1024


def _calm_job(root: Path, steps: int) -> Path:
    """``RANKS`` ranks logging ``steps`` train steps each: no stall, no failure."""
    for rank in range(RANKS):
        folder = root / "scale" / f"node{rank // 8}"
        folder.mkdir(parents=True, exist_ok=True)
        head = bench_scale._head  # the bench's line shape (timestamp, level, rank, host, job fields)
        lines = (head(rank, RANKS, bench_scale.BASE + i * 0.05, "info", "train step") + f',"step":{i},"samples_per_sec":800.5}}'
                 for i in range(steps))
        (folder / f"rank-{rank}.jsonl").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module", name="jobs")
def _jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    return {steps: _calm_job(tmp_path_factory.mktemp(f"calm{steps}"), steps) for steps in (40, 160)}


def _cost(*args: str) -> tuple[float, int, bytes, int]:
    """(CPU seconds, peak RSS in KiB, stderr, exit status) of one ``hvdlog`` process."""
    env = {**os.environ, "TZ": "UTC"}
    process = subprocess.Popen([sys.executable, "-m", "hvdlog", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert process.stderr is not None
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, err, process.returncode


@pytest.mark.parametrize(("command", "what"), [("stalls", "no stall"), ("first-failure", "no failure")])
def test_nothing_found_costs_at_most_three_greps_and_flat_memory(jobs: dict[int, Path], command: str, what: str) -> None:
    """On a stall-free 1,024-rank job the analysis is at most 3x ``grep --level error``'s CPU,
    its memory does not grow with the events (4x the steps), and the sentence still says what was read."""
    small, big = jobs[40], jobs[160]
    grep_cpu, _, _, grep_code = _cost("grep", "--level", "error", str(big))
    cpu, rss_big, err, code = _cost(command, str(big))
    _, rss_small, _, _ = _cost(command, str(small))
    assert grep_code == 1 and code == 1, err
    assert cpu <= 3 * grep_cpu, f"{command}: {cpu:.2f} s CPU against grep's {grep_cpu:.2f} s"
    assert rss_big - rss_small < 10 * 1024, f"{command}: peak RSS {rss_small} KiB at 40 steps, {rss_big} KiB at 160"
    assert err.decode().strip().startswith(f"hvdlog: {what} in {RANKS} ranks of job scale ({RANKS} files, "), err

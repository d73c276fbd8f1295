"""The fault matrix's smoke version: one real run per fault of bench/bench_faults.py under `hvdlog watch`.

Each fault runs once (`horovodrun --gloo -np 2`, 3 ranks for divergence, an elastic launch for the
reset; no extra load); the test checks what the benchmark measures: an alert came, it named rank 1,
its kind and the class watch said are the fault's (the hang class in the stall alert; ``recovered``
for the elastic job). Faults whose
first alert is measured wrong today are strict xfails with the measured reason (docs/benchmarks.md),
so a fix shows up as an XPASS. Healthy: no firing alert.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_faults

pytestmark = pytest.mark.horovod

#: Measured 2026-12-06 (docs/benchmarks.md): why the first alert is wrong today.
KNOWN_MISSES = {
    "input-straggler": "a 10-step job ends before watch's straggler alert has the steps it needs from every rank (measured: no alert)",
    "compute-straggler": "a 10-step job ends before watch's straggler alert has the steps it needs from every rank (as input-straggler)",
}


@pytest.mark.parametrize("fault", [
    pytest.param(fault, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[fault])) if fault in KNOWN_MISSES else fault
    for fault in bench_faults.FAULTS
])
def test_one_run_per_fault(fault: str, tmp_path: Path) -> None:
    outcome = bench_faults.run_one(fault, tmp_path, 0, steps=10, timeout=120)
    assert outcome.latency_s is not None and outcome.latency_s >= 0, outcome
    assert outcome.culprit_ok and outcome.class_ok, outcome


def test_a_healthy_run_raises_no_alert(tmp_path: Path) -> None:
    outcome = bench_faults.run_one("healthy", tmp_path, 0, steps=10, timeout=180)
    assert outcome.false_alerts == 0, outcome

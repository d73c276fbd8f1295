"""The console line a person sees outside a launcher: no rank is shown as ``-``, never ``None``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_rank_is_a_dash(tmp_path: Path) -> None:
    """A plain `python train.py` (no launcher, no rank variable): `[rank -]`, and `[rank - step 3]` in a step."""
    code = (
        "import hvdlog; hvdlog.configure(root='logs', job='solo', capture_native=False, console=True); log = hvdlog.get_logger();"
        "log.info('hello')\nwith hvdlog.step(3): log.info('in step')\nhvdlog.shutdown()"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "OMPI_", "PMI_", "SLURM_", "RANK", "HVDLOG_"))}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            env={**env, "PYTHONPATH": str(REPO)}, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "None" not in result.stderr, result.stderr
    assert "[rank -] hello" in result.stderr and "[rank - step 3] in step" in result.stderr, result.stderr

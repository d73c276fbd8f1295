"""A path that does not exist: the analyses say so on stderr, exit 2, and print no verdict beside
the error (issue #40: ``stragglers nosuchdir`` printed "not enough data to call a straggler")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("command", ["stragglers", "stalls", "first-failure", "report"])
def test_no_verdict_next_to_the_error(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "nosuchdir"
    result = subprocess.run([sys.executable, "-m", "hvdlog", command, str(missing)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"{missing}: no such file or directory" in result.stderr
    assert result.stdout == "", result.stdout

"""ruff and mypy, as configured in pyproject.toml, over the whole repository.

Part of the suite so the README's test command runs them; a finding fails here with the
tool's own report.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=600, check=False)


def test_ruff() -> None:
    """`ruff check` finds nothing (rules in [tool.ruff.lint])."""
    result = _tool("ruff", "check", "--no-cache", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy() -> None:
    """`mypy` (strict, over hvdlog/) finds nothing."""
    result = _tool("mypy", "--no-incremental")
    assert result.returncode == 0, result.stdout + result.stderr

"""Tools the parsing tests need, installed by scripts/setup.sh: a missing one fails the test
with the script to run, never skips it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["installed"]


def installed(variable: str, what: str, script: str) -> str:
    """The path in environment ``variable``; fails the test when it names no file."""
    path = os.environ.get(variable)
    if not path or not Path(path).is_file():
        pytest.fail(f"{what} not found ({variable}={path!r}): run scripts/setup.sh (scripts/{script})")
    return path

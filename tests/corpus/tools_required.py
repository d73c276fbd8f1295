"""Tools the parsing tests need, installed by scripts/bootstrap.sh test: a missing one fails the test
with the script to run, never skips it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = ["installed", "jdk_tool"]


def installed(variable: str, what: str, script: str) -> str:
    """The path in environment ``variable``; fails the test when it names no file."""
    path = os.environ.get(variable)
    if not path or not Path(path).is_file():
        pytest.fail(f"{what} not found ({variable}={path!r}): run scripts/bootstrap.sh test (scripts/{script})")
    return path


def jdk_tool(name: str) -> str:
    """``java`` or ``javac`` from JAVA_HOME, else from PATH; fails the test when absent."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / name) if home else shutil.which(name)
    if not found or not Path(found).exists():
        pytest.fail(f"`{name}` not found: install a JDK 17+ (scripts/install-jdk.sh; Debian openjdk-17-jdk-headless)")
    return found

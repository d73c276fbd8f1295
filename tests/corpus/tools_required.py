"""Tools the slower tests need, installed by scripts/bootstrap.sh test: a missing one fails the test
with the script to run, never skips it.

Each tool has a marker (pyproject.toml): ``make check`` deselects the marked tests and hides the
tools, so an unmarked test that reaches one fails there with the marker it lacks."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

__all__ = ["MARKER_OF", "horovodrun", "installed", "jdk_tool"]

#: The environment variable (or tool) -> the marker a test that needs it carries.
MARKER_OF: dict[str, str] = {
    "HVDLOG_JRUBY": "jvm",
    "java": "jvm",
    "javac": "jvm",
    "HVDLOG_FILEBEAT": "tools",
    "HVDLOG_MUSTACHE": "tools",
    "HVDLOG_COMPOSECHECK": "tools",
    "horovodrun": "horovod",
}


def _check_tier(tool: str) -> None:
    """Under ``make check`` (HVDLOG_TIER=check) no tool is there: say which marker is missing."""
    if os.environ.get("HVDLOG_TIER") == "check":
        marker = MARKER_OF.get(tool, "tools")
        pytest.fail(f"this test needs {tool}, which `make check` leaves out: mark it @pytest.mark.{marker}")


def installed(variable: str, what: str, script: str) -> str:
    """The path in environment ``variable``; fails the test when it names no file."""
    _check_tier(variable)
    path = os.environ.get(variable)
    if not path or not Path(path).is_file():
        pytest.fail(f"{what} not found ({variable}={path!r}): run scripts/bootstrap.sh test (scripts/{script})")
    return path


def jdk_tool(name: str) -> str:
    """``java`` or ``javac`` from JAVA_HOME, else from PATH; fails the test when absent."""
    _check_tier(name)
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / name) if home else shutil.which(name)
    if not found or not Path(found).exists():
        pytest.fail(f"`{name}` not found: install a JDK 17+ (scripts/install-jdk.sh; Debian openjdk-17-jdk-headless)")
    return found


def horovodrun() -> str:
    """The venv's ``horovodrun`` (beside this interpreter); fails the test when it is absent."""
    _check_tier("horovodrun")
    found = Path(sys.executable).with_name("horovodrun")
    if not found.exists():
        pytest.fail(f"horovodrun not found beside {sys.executable}: run scripts/bootstrap.sh test (scripts/build-horovod.sh)")
    return str(found)

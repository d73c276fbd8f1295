"""``grep -E`` in linear time, or refused with one sentence (issue #23): both paths tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hvdlog.query import regex
from hvdlog.query.spec import Filter, FilterError

CATASTROPHIC = "(a+)+$"
LINE = "a" * 40 + "!"  # re takes ~2**40 steps on this


@pytest.fixture(name="stdlib_only")
def fixture_stdlib_only() -> Iterator[None]:
    regex.USE_RE2 = False
    try:
        yield
    finally:
        regex.USE_RE2 = True


@pytest.mark.skipif(regex._re2() is None, reason="google-re2 (hvdlog[cli]) not installed")
def test_catastrophic_pattern_runs_in_linear_time_on_re2() -> None:
    spec = Filter(pattern=CATASTROPHIC, regex=True)
    started = time.process_time()
    assert not spec.matches({"message": LINE * 1000})
    assert spec.matches({"message": "aaa"})
    assert time.process_time() - started < 1.0


def test_stdlib_path_refuses_nested_repetition(stdlib_only: None) -> None:
    for pattern in (CATASTROPHIC, "(a*)*b", "((ab)+c)*", "(?:x{2,})+y"):
        with pytest.raises(FilterError, match="repeats a repetition"):
            Filter(pattern=pattern, regex=True)


@pytest.mark.parametrize("use_re2", [True, False])
def test_both_paths_match_the_same(use_re2: bool) -> None:
    regex.USE_RE2 = use_re2
    try:
        cases = [("NCCL.*timeout", "NCCL op timeout", True), ("^rank [0-9]+$", "rank 12", True), ("^rank [0-9]+$", "rank x", False)]
        for pattern, text, expected in cases:
            assert Filter(pattern=pattern, regex=True).matches({"message": text}) is expected
        assert Filter(pattern="nccl", regex=True, ignore_case=True).matches({"message": "NCCL"})
        assert Filter(pattern=r"(\w)\1", regex=True).matches({"message": "xx"})  # a backreference: re (RE2 cannot)
        with pytest.raises(FilterError, match="bad regular expression"):
            Filter(pattern="(", regex=True)
    finally:
        regex.USE_RE2 = True


def test_grep_dash_e_on_a_file_finishes(tmp_path: Path) -> None:
    """The CLI on a real file: with RE2 the search finishes fast; without it, one sentence, exit 2."""
    log = tmp_path / "rank-0.jsonl"
    log.write_text(json.dumps({"@timestamp": "2026-12-01T12:00:00Z", "log.level": "info", "message": LINE, "rank": 0}) + "\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, "-m", "hvdlog", "grep", "-E", CATASTROPHIC, str(log)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
    if regex._re2() is not None:
        assert result.returncode == 1, result.stderr  # nothing matched, quickly
    else:
        assert result.returncode == 2 and "repeats a repetition" in result.stderr


def test_a_backreference_pattern_with_overlapping_alternatives_is_refused_in_a_real_grep(tmp_path: Path) -> None:
    """``(a|aa)+(x)\\2``: RE2 refuses the backreference, and ``re`` would backtrack exponentially on
    a line of ``a``; grep -E refuses it with one sentence, and never suggests installing RE2 when it is installed."""
    path = tmp_path / "j" / "h" / "rank-0.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"@timestamp": "2026-11-30T14:00:00Z", "log.level": "info", "message": "a" * 60 + "y", "rank": 0}) + "\n")
    result = subprocess.run([sys.executable, "-m", "hvdlog", "grep", "-E", r"(a|aa)+(x)\2", str(path)], capture_output=True, text=True,
                            timeout=60, check=False, env={**os.environ, "TZ": "UTC"})
    assert result.returncode == 2 and "exponential time" in result.stderr and "Traceback" not in result.stderr, result.stderr
    installed = regex._re2() is not None
    assert ("install" in result.stderr) is not installed, result.stderr

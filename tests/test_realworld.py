"""hvdlog on real-world Horovod output (tests/corpus/realworld): documents, first failure, stalls, grep.

Every case is checked through the library (parse_paths, first_failure, find_stalls over a
FileSource) and through the ``hvdlog`` commands as a user runs them (parse, first-failure
--json, stalls --json, grep --level error, grep --rank N), against expectations written by
hand in the case's ``case.yml`` (see tests/corpus/realworld.py).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from corpus.realworld import ASPECTS, RealCase, check, cli_answers, library_answers, real_cases

CASES = real_cases()
_LIBRARY = ("documents", "first_failure", "stalls")
_PARAMS = [(case, aspect) for case in CASES for aspect in ASPECTS if aspect == "documents" or aspect in case.config]


def _id(param: object) -> str:
    return param.id if isinstance(param, RealCase) else str(param)


@pytest.mark.parametrize(("case", "aspect"), [p for p in _PARAMS if p[1] in _LIBRARY], ids=_id)
def test_library(case: RealCase, aspect: str) -> None:
    """The library's answer (parse_paths / first_failure / find_stalls) is the expected one."""
    assert check(case, aspect, library_answers(case, aspect)) == []


@pytest.mark.parametrize(("case", "aspect"), _PARAMS, ids=_id)
def test_cli(case: RealCase, aspect: str) -> None:
    """The command's answer is the expected one, and its exit code says whether it found something."""
    code, answers = cli_answers(case, aspect)
    assert check(case, aspect, answers) == []
    expected = case.config.get(aspect)
    nothing = expected in ("none", []) or (isinstance(expected, dict) and expected.get("count") == 0)
    assert code == (1 if nothing else 0)


def test_corpus_covers_the_issue() -> None:
    """At least 40 cases, every failure class of issue 11, several launchers, frameworks and versions."""
    assert len(CASES) >= 40
    assert {c for case in CASES for c in case.config["classes"]} == set(range(1, 11))
    launchers = " ".join(case.config["launcher"] for case in CASES)
    for launcher in ("horovodrun --gloo", "Open MPI", "MPICH", "Intel MPI", "srun", "Kubernetes"):
        assert launcher in launchers
    assert {case.config["framework"] for case in CASES} >= {"pytorch", "tensorflow", "keras"}
    assert {str(case.config["horovod"])[:4] for case in CASES} >= {"0.15", "0.16", "0.19", "0.21", "0.28"}
    assert any(case.config["gpu"] for case in CASES) and all("#" in case.config["source"] or "hvdlog" in case.config["source"] for case in CASES)


def test_hvdlog_command_runs_a_case() -> None:
    """The installed entry point (a real process, not the in-process runner) gives the same first failure."""
    case = next(case for case in CASES if case.id == "gloo-bash-segfault")
    result = subprocess.run(
        [sys.executable, "-c", "from hvdlog.cli.main import main; main()", "first-failure", "--json", "--tz", "UTC",
         *map(str, case.inputs())],
        capture_output=True, check=False, text=True,
    )
    assert result.returncode == 0, result.stderr
    import json

    assert check(case, "first_failure", [json.loads(line) for line in result.stdout.splitlines()]) == []

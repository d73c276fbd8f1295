"""hvdlog on real-world Horovod output (tests/corpus/realworld): documents, first failure, stalls, grep.

Every case is checked through the library (parse_paths, first_failure, find_stalls over a
FileSource) and through the ``hvdlog`` commands as a user runs them (parse, first-failure
--json, stalls --json, grep --level error, grep --rank N), against expectations written by
hand in the case's ``case.yml`` (see tests/corpus/realworld.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from corpus.realworld import ASPECTS, KNOWN_GAPS, RealCase, check, cli_answers, library_answers, real_cases

CASES = real_cases()
_LIBRARY = ("documents", "first_failure", "stalls")


def _param(case: RealCase, aspect: str) -> object:
    reason = KNOWN_GAPS.get((case.id, aspect))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, aspect, marks=marks, id=f"{case.id}-{aspect}")


_PARAMS = [(case, aspect) for case in CASES for aspect in ASPECTS if aspect == "documents" or aspect in case.config]


@pytest.mark.parametrize(("case", "aspect"), [_param(*p) for p in _PARAMS if p[1] in _LIBRARY])
def test_library(case: RealCase, aspect: str) -> None:
    """The library's answer (parse_paths / first_failure / find_stalls) is the expected one."""
    assert check(case, aspect, library_answers(case, aspect)) == []


@pytest.mark.parametrize(("case", "aspect"), [_param(*p) for p in _PARAMS])
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


#: Cases whose order does not hang on untimed lines (Elasticsearch returns those by rank).
ES_CASES = ("layout-uncaught-once", "layout-thread-exception-stall", "tree-internal-error-only")


@pytest.mark.elasticsearch
@pytest.mark.parametrize("case_id", ES_CASES)
def test_same_answers_from_elasticsearch(es_url: str, case_id: str) -> None:
    """Indexed as parsed, the case gives the same grep, first-failure and stalls answers with --es as from files."""
    import json

    from click.testing import CliRunner
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.cli.main import cli
    from hvdlog.elastic.templates import mappings
    from hvdlog.parse import parse_paths

    case = next(case for case in CASES if case.id == case_id)
    index = f"hvdlog-realworld-{case_id}"
    with Elasticsearch(es_url, request_timeout=60) as es:
        if not es.indices.exists(index=index):
            es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
            docs = list(parse_paths(case.inputs(), timezone=case.timezone))
            ok, errors = bulk(es, ({"_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
            assert not errors and ok == len(docs), errors[:3]
    paths = [str(path) for path in case.inputs()]
    for command in (["grep", "--level", "error"], ["first-failure"], ["stalls"]):
        runs = [CliRunner().invoke(cli, [*command, "--json", *where], catch_exceptions=False)
                for where in (["--tz", case.timezone, *paths], ["--es", es_url, "--index", index])]
        files, es_answer = ([json.loads(line) for line in run.stdout.splitlines()] for run in runs)
        assert runs[0].exit_code == runs[1].exit_code
        if command[0] == "grep":
            assert sorted(json.dumps(d, sort_keys=True) for d in files) == sorted(json.dumps(d, sort_keys=True) for d in es_answer)
            assert check(case, "grep_error", es_answer) == []
        else:
            assert files == es_answer, command


@pytest.mark.parametrize("case", [case for case in CASES if "stalls" in case.config], ids=lambda case: case.id)
def test_report_counts_the_episodes_stalls_gives(case: RealCase) -> None:
    """`hvdlog report` reads the logs once and runs the analyses on what it kept: its stall
    section counts, per job, the episodes `hvdlog stalls` gives (untimed reports split by the
    reporter's own prints included, which it reads again for)."""
    from click.testing import CliRunner

    from hvdlog.cli.main import cli

    _, episodes = cli_answers(case, "stalls")
    result = CliRunner().invoke(cli, ["report", "--json", "--tz", case.timezone, *map(str, case.inputs())], catch_exceptions=False)
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    counted = {str(item["job"]): item["stalls"]["episodes"] for item in reports}
    expected: dict[str, int] = {}
    for episode in episodes:
        expected[str(episode.get("job"))] = expected.get(str(episode.get("job")), 0) + 1
    assert {job: count for job, count in counted.items() if count} == expected


@pytest.mark.parametrize("case", [case for case in CASES if "first_failure" in case.config], ids=lambda case: case.id)
def test_report_blames_whom_first_failure_blames(case: RealCase) -> None:
    """`hvdlog report`'s failure section names, per job, the ranks `hvdlog first-failure` blames, as sure."""
    from click.testing import CliRunner

    from hvdlog.cli.main import cli

    _, failures = cli_answers(case, "first_failure")
    result = CliRunner().invoke(cli, ["report", "--json", "--tz", case.timezone, *map(str, case.inputs())], catch_exceptions=False)
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    shown = {str(item["job"]): (item["first_failure"]["blamed_ranks"], item["first_failure"]["confidence"])
             for item in reports if item.get("first_failure")}
    expected = {str(found.get("job")): ([rank for rank in found.get("blamed_ranks") or [] if rank is not None], found.get("confidence"))
                for found in failures}
    assert shown == expected

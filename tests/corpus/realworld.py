"""The real-world corpus: Horovod output in the shapes users posted, and what hvdlog must answer.

Each case is a folder ``tests/corpus/realworld/<case>/`` holding the files as the user had
them (a console capture, an ``--output-filename`` tree, ``kubectl logs`` output, a Slurm
``slurm-<id>.out``, hvdlog's own per-rank layout) and ``case.yml``: where the format comes
from (``source``: the public threads), the settings (``inputs`` handed to hvdlog, relative to
the folder; ``timezone``), and the expectations, written by hand before any parser ran:

* ``documents``: significant lines: the documents whose ``message`` contains ``match``
  (exactly ``count`` of them, default 1) have these ``fields`` (dotted names; ``null`` =
  absent);
* ``first_failure``: ``none``, or the blamed rank(s), whether a ``primary`` cause is in the
  logs (false: the launcher's evidence points to the rank), a ``cause`` substring, the
  ``collateral`` ranks and ranks that ``also_failed``;
* ``stalls``: the episodes in order (missing ranks, tensors, reports, shutdown, waiting ranks);
* ``grep_error`` (``grep --level error``) and ``grep_rank`` (``grep --rank N``): the ranks
  (``ranks`` exactly, ``ranks_include`` at least), the ``count`` of events, substrings every
  answer ``includes``/``excludes``, and ``count_of`` events containing a substring.

The checks here are shared by tests/test_realworld.py and by ``python tests/corpus/realworld.py``,
which prints how many cases hvdlog gets right.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ASPECTS", "KNOWN_GAPS", "REALWORLD", "RealCase", "answers_over", "check", "real_cases"]

REALWORLD = Path(__file__).resolve().parent / "realworld"
ASPECTS = ("documents", "first_failure", "stalls", "grep_error", "grep_rank")
_TEXT_FIELDS = ("message", "error.message", "error.stack_trace")

#: Known wrong answers, each caused on the parsing side (hvdlog/parse, owner: the parse branch) or, for
#: some survey cases, in the failure analysis (hvdlog/analyses/failures.py), as (case, aspect): reason.
#: tests/parse/test_realworld.py runs them as strict xfails: once fixed, the test reports XPASS and
#: fails until the entry is removed.
KNOWN_GAPS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class RealCase:
    """One folder of the real-world corpus."""

    folder: Path
    config: dict[str, Any]

    @property
    def id(self) -> str:
        return self.folder.name

    @property
    def timezone(self) -> str:
        return str(self.config.get("timezone", "UTC"))

    def inputs(self) -> list[Path]:
        """What the user hands to hvdlog (files or directories)."""
        return [self.folder / name for name in self.config["inputs"]]

    def files(self) -> list[tuple[str, Path]]:
        """Every log file of the case as (path relative to the case folder, file): for the grok/ruby goldens."""
        found = []
        for item in self.inputs():
            paths = sorted(p for p in item.rglob("*") if p.is_file()) if item.is_dir() else [item]
            found += [(p.relative_to(self.folder).as_posix(), p) for p in paths]
        return found


def real_cases() -> list[RealCase]:
    """Every case, in name order."""
    return [
        RealCase(folder, yaml.safe_load((folder / "case.yml").read_text(encoding="utf-8")))
        for folder in sorted(REALWORLD.iterdir())
        if (folder / "case.yml").exists()
    ]


# --- checks: each returns the list of problems (empty = right) --------------------------------


def _field(doc: Mapping[str, Any], name: str) -> Any:
    if name in doc:
        return doc[name]
    value: Any = doc
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _texts(doc: Mapping[str, Any]) -> str:
    return "\n".join(str(t) for t in (_field(doc, name) for name in _TEXT_FIELDS) if isinstance(t, str))


def check_documents(expected: list[dict[str, Any]], docs: list[dict[str, Any]]) -> list[str]:
    """The significant lines came out as the expected documents."""
    problems = []
    for item in expected:
        found = [doc for doc in docs if item["match"] in str(doc.get("message", ""))]
        want = item.get("count", 1)
        if len(found) != want:
            problems.append(f"{item['match']!r}: {len(found)} document(s), expected {want}")
            continue
        for doc in found:
            for name, value in item.get("fields", {}).items():
                if _field(doc, name) != value:
                    problems.append(f"{item['match']!r}: {name} = {_field(doc, name)!r}, expected {value!r}")
    return problems


def _ranks(items: Iterable[Any]) -> list[Any]:
    return sorted(set(items), key=lambda rank: (rank is not None, rank if rank is not None else -1))


def _legacy_primary(report: Mapping[str, Any]) -> bool:
    """Reports from before the failure model had no ``primary``: a culprit or a stall meant one."""
    return report.get("culprit") is not None or report.get("stall") is not None


def _legacy_cause(report: Mapping[str, Any]) -> str:
    """Reports from before the failure model had no ``cause``: what they said instead."""
    culprit = report.get("culprit") or {}
    parts = [report.get("error_type"), report.get("error_message"), culprit.get("message"), culprit.get("reason")]
    if report.get("stall"):
        parts.append("stall")
    return " ".join(str(part) for part in parts if part)


def check_first_failure(expected: Any, reports: list[dict[str, Any]]) -> list[str]:
    """One report for the case's job, blaming the expected rank(s) for the expected cause."""
    if expected == "none":
        return [f"expected no failure, got {len(reports)} report(s)"] if reports else []
    if len(reports) != 1:
        return [f"expected 1 report, got {len(reports)}"]
    report = reports[0]
    problems = []
    blamed = _ranks(report.get("blamed_ranks") or [])
    if blamed != _ranks(expected["blamed"]):
        problems.append(f"blamed {blamed}, expected {expected['blamed']}")
    primary = report.get("primary", _legacy_primary(report))
    if "primary" in expected and primary != expected["primary"]:
        problems.append(f"primary = {primary!r}, expected {expected['primary']!r}")
    cause = str(report.get("cause") or _legacy_cause(report))
    if expected["cause"].lower() not in cause.lower():
        problems.append(f"cause {cause!r} does not say {expected['cause']!r}")
    if "collateral" in expected:
        collateral = _ranks(item.get("rank") for item in report.get("collateral") or [])
        if collateral != _ranks(expected["collateral"]):
            problems.append(f"collateral ranks {collateral}, expected {expected['collateral']}")
    if "also_failed" in expected:
        others = _ranks(item.get("rank") for item in report.get("other_errors") or [])
        if others != _ranks(expected["also_failed"]):
            problems.append(f"also failed: ranks {others}, expected {expected['also_failed']}")
    return problems


def check_stalls(expected: list[dict[str, Any]], episodes: list[dict[str, Any]]) -> list[str]:
    """The episodes, in order, with their missing ranks, tensors, reports and end."""
    if len(episodes) != len(expected):
        return [f"{len(episodes)} episode(s), expected {len(expected)}: {[e.get('missing_ranks') for e in episodes]}"]
    problems = []
    for index, (want, got) in enumerate(zip(expected, episodes, strict=True)):  # lengths checked above
        for name, value in want.items():
            actual = got.get(name)
            same = sorted(actual or []) == sorted(value) if name == "tensors" else actual == value
            if not same:
                problems.append(f"episode {index}: {name} = {actual!r}, expected {value!r}")
    return problems


def check_grep(expected: dict[str, Any], docs: list[dict[str, Any]]) -> list[str]:
    """What a grep printed: its ranks, how many events, and what they say."""
    problems = []
    ranks = _ranks(doc.get("rank") for doc in docs)
    if "ranks" in expected and ranks != _ranks(expected["ranks"]):
        problems.append(f"ranks {ranks}, expected {expected['ranks']}")
    if "ranks_include" in expected and not set(expected["ranks_include"]) <= set(ranks):
        problems.append(f"ranks {ranks} lack some of {expected['ranks_include']}")
    if "count" in expected and len(docs) != expected["count"]:
        problems.append(f"{len(docs)} event(s), expected {expected['count']}: {[_texts(d)[:60] for d in docs]}")
    texts = [_texts(doc) for doc in docs]
    for text in expected.get("includes", []):
        if not any(text in t for t in texts):
            problems.append(f"nothing says {text!r}")
    for text in expected.get("excludes", []):
        if any(text in t for t in texts):
            problems.append(f"an event says {text!r}, which should not be there")
    for text, count in (expected.get("count_of") or {}).items():
        if (got := sum(text in t for t in texts)) != count:
            problems.append(f"{got} event(s) say {text!r}, expected {count}")
    return problems


# --- running hvdlog on a case ---------------------------------------------------------------


def _noop(_message: str) -> None:
    return None


def library_answers(case: RealCase, aspect: str) -> list[dict[str, Any]]:
    """The library's answer for one aspect, as JSON-like dicts (grep aspects: the matching documents)."""
    from hvdlog.query.files import FileSource
    from hvdlog.query.spec import Filter

    source = FileSource(case.inputs(), timezone=case.timezone, warn=_noop)
    if aspect == "documents":
        from hvdlog.parse import parse_paths

        return json.loads(json.dumps(list(parse_paths(case.inputs(), timezone=case.timezone)), default=str))
    if aspect == "first_failure":
        from hvdlog.analyses.failures import find_first_failure

        return [report.to_json() for report in find_first_failure(source.search, Filter())]
    if aspect == "stalls":
        from hvdlog.analyses.stalls import find_stalls

        return [episode.to_json() for episode in find_stalls(source.search, Filter())]
    raise ValueError(f"no library answer for {aspect}")


def answers_over(docs: list[dict[str, Any]], case: RealCase, aspect: str) -> list[dict[str, Any]]:
    """An aspect's answer from documents another path made (the Logstash path's), by the
    library calls the commands make on a source's search: ``first-failure``'s, ``stalls``',
    and ``grep``'s echo-free matches (``--level error``, ``--rank N``), in sort-key order."""
    from hvdlog.analyses.failures import find_first_failure
    from hvdlog.analyses.stalls import find_stalls
    from hvdlog.documents import sort_key
    from hvdlog.query.echoes import drop_echoes
    from hvdlog.query.spec import Filter

    def search(spec: Filter, last: int | None = None) -> Iterable[dict[str, Any]]:
        return sorted((doc for doc in docs if spec.matches(doc)), key=sort_key)

    if aspect == "first_failure":
        answers: list[Any] = [report.to_json() for report in find_first_failure(search, Filter())]
    elif aspect == "stalls":
        answers = [episode.to_json() for episode in find_stalls(search, Filter())]
    elif aspect in ("grep_error", "grep_rank"):
        rank = int(case.config.get("grep_rank", {}).get("rank", 0))
        answers = list(drop_echoes(search(Filter(min_level="error") if aspect == "grep_error" else Filter(ranks=frozenset({rank})))))
    else:
        raise ValueError(f"no answer over documents for {aspect}")
    return json.loads(json.dumps(answers, default=str))


def cli_answers(case: RealCase, aspect: str) -> tuple[int, list[dict[str, Any]]]:
    """Run the ``hvdlog`` command for one aspect (in-process, as a user types it); (exit code, JSON lines)."""
    from click.testing import CliRunner

    from hvdlog.cli.main import cli as main

    paths = [str(path) for path in case.inputs()]
    args = {
        "documents": ["parse", "--timezone", case.timezone, *paths],
        "first_failure": ["first-failure", "--json", "--tz", case.timezone, *paths],
        "stalls": ["stalls", "--json", "--tz", case.timezone, *paths],
        "grep_error": ["grep", "--level", "error", "--json", "--no-dedupe", "--tz", case.timezone, *paths],
        "grep_rank": ["grep", "--rank", str(case.config.get("grep_rank", {}).get("rank", 0)), "--json", "--no-dedupe",
                      "--tz", case.timezone, *paths],
    }[aspect]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def check(case: RealCase, aspect: str, answers: list[dict[str, Any]]) -> list[str]:
    """Problems of ``answers`` (library or CLI) against the case's expectations for ``aspect``."""
    expected = case.config.get(aspect)
    if aspect == "documents":
        return check_documents(expected or [], answers)
    if aspect == "first_failure":
        return check_first_failure(expected, answers)
    if aspect == "stalls":
        return check_stalls(expected or [], answers)
    if expected is None:
        return []
    return check_grep(expected, answers)


def score(cases: list[RealCase]) -> dict[str, list[str]]:
    """Every problem of every case (library and CLI, every aspect); a case with none is right."""
    problems: dict[str, list[str]] = {}
    for case in cases:
        found: list[str] = []
        for aspect in ASPECTS:
            if aspect not in case.config and aspect not in ("documents",):
                continue
            try:
                if aspect in ("documents", "first_failure", "stalls"):
                    found += [f"{aspect} (library): {p}" for p in check(case, aspect, library_answers(case, aspect))]
                _, answers = cli_answers(case, aspect)
                found += [f"{aspect} (cli): {p}" for p in check(case, aspect, answers)]
            except Exception as exc:  # noqa: BLE001 - a crash is a wrong answer, reported as such
                found.append(f"{aspect}: {type(exc).__name__}: {exc}")
        problems[case.id] = found
    return problems


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    verbose = "-v" in sys.argv
    results = score(real_cases())
    for name, found in results.items():
        print(f"{'ok  ' if not found else 'FAIL'} {name}")
        for problem in found if verbose else []:
            print(f"       {problem}")
    right = sum(not found for found in results.values())
    print(f"{right}/{len(results)} cases right")
    by_aspect = {aspect: sum(not any(p.startswith(aspect) for p in f) for f in results.values()) for aspect in ASPECTS}
    print("per aspect:", ", ".join(f"{aspect} {count}" for aspect, count in by_aspect.items()))

"""The analyses' prefilter (hvdlog/query/prefilter.py) is exact: first-failure and stalls answer as a full read.

A full read parses every line (``hvdlog.query.files.PREFILTER`` off: the switch the file
sources read); the prefiltered read parses only the lines of events files holding the needles
of the analyses' conditions. Compared on: every real-world case of the corpus and every real
capture; the variants (tests/support/variants.py) of the cases that hold events files; jobs made
like bench/bench_scale.py's; jobs that reach the analyses' second reads (an elastic reset, a
watchdog stall a rank leaves by progress only); and lines written to meet the conditions in
every way JSON allows (escapes, nesting, dotted sub-keys), which a naive needle set misses.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from corpus.realworld import KNOWN_GAPS, RealCase, real_cases
from support.variants import variants

from hvdlog.analyses.failures import FAILURE_EVENTS
from hvdlog.analyses.stalls import STALL_EVENTS
from hvdlog.cli.main import cli
from hvdlog.parse import bounded
from hvdlog.query import files, scan
from hvdlog.query.files import FileSource
from hvdlog.query.prefilter import line_test
from hvdlog.query.spec import Condition, Filter

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_scale  # noqa: E402  # the bench's job generator, at test sizes


def _answers(paths: list[str], timezone: str, *, full: bool, workers: int = 1) -> dict[str, Any]:
    """first-failure and stalls ``--json`` as a user runs them: (exit code, stdout) each."""
    runner = CliRunner()
    previous, files.PREFILTER = files.PREFILTER, not full
    try:
        out = {}
        for command in ("first-failure", "stalls"):
            result = runner.invoke(cli, [command, "--json", "--tz", timezone, "-j", str(workers), *paths], catch_exceptions=False)
            out[command] = (result.exit_code, result.stdout)
        return out
    finally:
        files.PREFILTER = previous


def _same(paths: list[str], timezone: str = "UTC") -> dict[str, Any]:
    """The prefiltered answers, after checking they are the full read's."""
    prefiltered = _answers(paths, timezone, full=False)
    assert prefiltered == _answers(paths, timezone, full=True)
    return prefiltered


def _captures() -> list[Any]:
    """(file, timezone) of every real capture."""
    found = []
    for config_path in sorted(CORPUS.glob("horovod.*/*.log-config.yml")):
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        log = config_path.with_name(config_path.name.removesuffix("-config.yml"))
        found.append(pytest.param(str(log), str(config.get("timezone", "UTC")), id=f"{log.parent.name}/{log.name}"))
    return found


@pytest.mark.parametrize("case", real_cases(), ids=lambda case: case.id)
def test_realworld_case(case: RealCase) -> None:
    """Every real-world case: the same answers (and the analyses did answer on the ones that expect it)."""
    answers = _same([str(path) for path in case.inputs()], case.timezone)
    # A known first-failure gap (corpus.realworld.KNOWN_GAPS) has its exit code asserted, as a
    # strict xfail, by tests/parse/test_realworld.py's test_cli; here the two reads must still agree.
    if case.config.get("first_failure") not in (None, "none") and (case.id, "first_failure") not in KNOWN_GAPS:
        assert answers["first-failure"][0] == 0, answers


@pytest.mark.parametrize(("path", "timezone"), _captures())
def test_real_capture(path: str, timezone: str) -> None:
    """Every real capture (native or events): the same answers."""
    _same([path], timezone)


def _events_cases() -> Iterator[Any]:
    """Variants of the cases that hold events files (the others are parsed whole either way)."""
    for case in real_cases():
        found = {relative: path.read_bytes() for relative, path in case.files()}
        if any(".jsonl" in relative for relative in found):
            for variant in variants(case.id, found):
                yield pytest.param(case, variant, id=f"{case.id}-{variant.name}")


@pytest.mark.parametrize(("case", "variant"), list(_events_cases()))
def test_realworld_variant(case: RealCase, variant: Any, tmp_path: Path) -> None:
    """Every variant (prefixes, CRLF, colour codes, cuts, torn lines...) of a case with events files: the same answers."""
    for relative, data in variant.files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes(data)
    _same([str(tmp_path / name) for name in case.config["inputs"]], case.timezone)


def test_elastic_capture() -> None:
    """The real elastic job (resets, a killed worker): the second read, steps after the first reset, agrees too."""
    answers = _same([str(CORPUS / "elastic" / "j1")])
    report = json.loads(answers["first-failure"][1].splitlines()[0])
    assert report["recovered"], report  # the recovery read ran and found steps


def _bench_job(root: Path, size: int, count: int) -> Path:
    for rank in range(size):
        folder = root / "scale" / f"node{rank // 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank-{rank}.jsonl").write_text(bench_scale.events(rank, size, count))
        (folder / f"rank-{rank}.stderr.log").write_text(bench_scale.capture(rank, size, count))
    return root


@pytest.mark.parametrize(("size", "count"), [(3, 40), (12, 120)])
def test_bench_like_job(size: int, count: int, tmp_path: Path) -> None:
    """A job as bench_scale.py makes them: the same answers, and the ones the bench checks."""
    answers = _same([str(_bench_job(tmp_path, size, count))])
    report = json.loads(answers["first-failure"][1].splitlines()[0])
    assert report["blamed_ranks"] == [size // 3]
    assert [size // 3] in [json.loads(line)["missing_ranks"] for line in answers["stalls"][1].splitlines()]


def _line(**fields: Any) -> str:
    return json.dumps({"@timestamp": fields.pop("t"), "job": "pf", "size": 3, **fields}, separators=(",", ":"))


def _tricky_job(root: Path) -> Path:
    """Three ranks whose decisive events are spelled every way JSON allows, between plain step events.

    Rank 1 stalls outside any collective at step 4 (rank 0 waits in the allreduce), then moves on
    without a ``stall_resolved`` (only its step 5 shows it: the stalls' second read); rank 2 is
    killed; rank 1 raises later. The level, actions and fields are written with escapes, nested
    objects and dotted sub-keys.
    """
    folder = root / "pf" / "node0"
    folder.mkdir(parents=True)
    ranks: dict[int, list[str]] = {rank: [] for rank in range(3)}
    for step in range(1, 8):
        for rank in ranks:
            ranks[rank].append(_line(t=f"2026-12-01T10:00:{step:02d}.{rank}00Z", rank=rank, step=step, message="train step",
                                     **{"log.level": "info", "samples_per_sec": 100.0}))
    escaped = ('{"@timestamp":"2026-12-01T10:00:04.500Z","job":"pf","size":3,"rank":1,"step":4,"log.level":"warning",'
               '"message":"no progress for 30 s","ev\\u0065nt.action":"st\\u0061ll","horovod":{"st\\u0061ll":{"source":"watchdog","seconds":30.0}}}')
    ranks[1][3] += "\n" + escaped
    ranks[0][3] += "\n" + _line(t="2026-12-01T10:00:04.600Z", rank=0, step=4, message="waiting in allreduce",
                                **{"log.level": "warning", "event": {"action": "stall"}, "horovod.stall": {"source": "watchdog", "seconds": 30.0,
                                   "operation": "allreduce", "tensors": ["allreduce.w"]}})
    ranks[2].append(_line(t="2026-12-01T10:00:09Z", rank=2, message="killed", **{"log.level": "info", "process.exit_code.value": 137}))
    ranks[2].append(_line(t="2026-12-01T10:00:09.5Z", rank=2, message="terminated", **{"log.level": "warning", "event.action": "signal",
                                                                                        "event.reason": "SIGKILL"}))
    ranks[1].append('{"@timestamp":"2026-12-01T10:00:10Z","job":"pf","size":3,"rank":1,"log.level":"\\u0065rror",'
                    '"message":"uncaught ValueError","error.type":"ValueError","error.message":"bad batch"}')
    evidence = {"hvdlog": {"evidence.kind": "peer_loss", "evidence.rank": 0}, "hvdlog.evidence.source": "rank"}
    ranks[0].append(_line(t="2026-12-01T10:00:11Z", rank=0, message="peer lost", **{"log.level": "info", **evidence}))
    ranks[0].append("not json: ERROR error critical stall")
    for rank, lines in ranks.items():
        (folder / f"rank-{rank}.jsonl").write_bytes(("\r\n" if rank == 2 else "\n").join(lines).encode() + b"\n")
    return root


@pytest.fixture(params=["accelerated", "stdlib"])
def scanner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both needle scanners: the wheel's (skipped when it is not installed) and bytes.find."""
    if request.param == "accelerated":
        pytest.importorskip("ahocorasick_rs")
    monkeypatch.setattr(scan, "_ACCELERATED", request.param == "accelerated")
    return str(request.param)


def test_tricky_spellings(tmp_path: Path, scanner: str) -> None:
    """Escaped keys and values, nested objects, dotted sub-keys, CRLF, a line that is not JSON:
    the same answers, and answers that needed those lines (a naive needle set would lose them)."""
    answers = _same([str(_tricky_job(tmp_path))])
    reports = [json.loads(line) for line in answers["first-failure"][1].splitlines()]
    episodes = [json.loads(line) for line in answers["stalls"][1].splitlines()]
    assert reports and episodes, answers
    assert 1 in episodes[0]["missing_ranks"] and episodes[0]["waiting_ranks"] == [0]
    assert episodes[0]["resolved"] and not episodes[0]["shutdown"]  # rank 1's later step: the progress read
    assert {item["rank"] for item in reports[0]["collateral"] + reports[0]["other_errors"]} | set(reports[0]["blamed_ranks"]) >= {0, 1, 2}


SPECS = {
    "failures": Filter(any_of=FAILURE_EVENTS),
    "stalls": Filter(any_of=STALL_EVENTS),
    "recovery": Filter(any_of=(Condition("step"),)),
    "progress": Filter(steps=(5, None)),
    "failures-warning": Filter(any_of=FAILURE_EVENTS, min_level="warning"),
    "stalls-pattern": Filter(any_of=STALL_EVENTS, pattern="no progress"),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_search_is_the_full_read(name: str, tmp_path: Path, scanner: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each filter the analyses use, small blocks: the prefiltered search is the full read's, document for document."""
    monkeypatch.setattr(bounded, "_BLOCK", 300)
    root = _tricky_job(tmp_path)
    spec = SPECS[name]
    assert list(FileSource([root], prefilter=True).search(spec)) == list(FileSource([root], prefilter=False).search(spec))


def test_the_prefilter_skips_what_cannot_matter(tmp_path: Path) -> None:
    """The analyses' filters do prefilter (the tests above would pass without one): a step line is never a candidate."""
    path = str(tmp_path / "job" / "node0" / "rank-0.jsonl")
    step = _line(t="2026-12-01T10:00:00Z", rank=0, step=3, message="train step", **{"log.level": "info", "samples_per_sec": 1.0}).encode()
    for spec in (Filter(any_of=FAILURE_EVENTS), Filter(any_of=STALL_EVENTS)):
        test = line_test(spec, path)
        assert test is not None and not any(needle in step for needle in test.scan) and not test.keeps(step)
        assert test.keeps(b'{"log.level":"\\u0065rror"}') and test.keeps(b'{"event":{"action":"signal"}}')


@pytest.mark.parametrize("condition", [
    Condition("event.dataset", ("horovod.app",)),  # the parser's default for a line without it
    Condition("rank"),  # the path gives it to a line that is not JSON
    Condition("message"),
    Condition("log.file.path"),
    Condition("extra.event"),  # where the parser moves an "event" that is not an object
    Condition("log.level", min_level="info"),  # a line without a level is info
    Condition("event.action", (5,)),
])
def test_what_the_parser_adds_is_never_a_needle(condition: Condition, tmp_path: Path) -> None:
    """A condition the parser can meet without the line's bytes is not prefiltered: the file is read whole."""
    assert line_test(Filter(any_of=(condition, *FAILURE_EVENTS)), str(tmp_path / "job" / "node0" / "rank-0.jsonl")) is None


@pytest.mark.parametrize("workers", [2, 3])
def test_parallel_reading_gives_the_same_output(workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-j N`` reads the files in N processes: output and exit codes identical to ``-j 1``."""
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    job = [str(_bench_job(tmp_path / "bench", 12, 60)), str(_tricky_job(tmp_path / "tricky"))]
    one = _answers(job, "UTC", full=False, workers=1)
    assert _answers(job, "UTC", full=False, workers=workers) == one
    assert _answers(job, "UTC", full=True, workers=workers) == one
    assert all(code == 0 for code, _ in one.values())


def test_parallel_reading_counts_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers, the progress line still counts every file read (when a worker's share comes back)."""
    from hvdlog.query.progress_files import ProgressFileSource

    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    job = _bench_job(tmp_path, 6, 30)
    source = ProgressFileSource([job], warn=lambda _message: None)
    source.workers = 2
    found = list(source.search(Filter(any_of=FAILURE_EVENTS)))
    assert source.progress is not None and source.progress.done_files == len(source.files(Filter())) == 12
    assert found == list(FileSource([job], prefilter=False).search(Filter(any_of=FAILURE_EVENTS)))

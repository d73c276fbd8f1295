"""hvdlog report and hvdlog jobs: one read for every section, statuses with their reasons, files and Elasticsearch.

The logs are plain per-rank ``.jsonl`` files in our layout, written as the runtime writes
them (the demo's real logs are covered by tests/test_docs.py through the README's examples).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hvdlog.cli.main import cli
from hvdlog.cli.pictures import bars, sparkline

REPO = Path(__file__).resolve().parents[2]


def hvdlog(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


def _write(root: Path, job: str, rank: int, events: list[dict[str, object]], host: str = "node1") -> None:
    path = root / job / host / f"rank-{rank}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for event in events:
            out.write(json.dumps({"job": job, "rank": rank, "size": 2, "host.name": host, "event.dataset": "horovod.app", **event}) + "\n")


def _steps(start: float, count: int, every: float = 1.0, first: int = 0) -> list[dict[str, object]]:
    return [{"@timestamp": _iso(start + i * every), "log.level": "info", "message": "train step", "step": first + i} for i in range(count)]


@pytest.fixture(name="root")
def fixture_root(tmp_path: Path) -> Path:
    """Three jobs: `crashed` (rank 1 raises at step 4, an hour ago), `done` (two hours ago), `live` (steps now)."""
    root = tmp_path / "hvdlog-logs"
    hour_ago, now = time.time() - 3600, time.time()
    _write(root, "crashed", 0, [*_steps(hour_ago, 5), {"@timestamp": _iso(hour_ago + 5.5), "log.level": "error",
           "message": "Horovod has been shut down", "error.type": "HorovodInternalError", "error.message": "Horovod has been shut down"}])
    _write(root, "crashed", 1, [*_steps(hour_ago, 4), {"@timestamp": _iso(hour_ago + 5), "log.level": "critical",
           "message": "uncaught ValueError", "event.action": "uncaught_exception", "error.type": "ValueError",
           "error.message": "bad batch", "step": 4}])
    for rank in (0, 1):
        _write(root, "done", rank, _steps(now - 7200, 10, first=0), host=f"node{rank}")
        _write(root, "live", rank, _steps(now - 5, 6))
    return root


class TestReport:
    def test_sections_in_order_with_the_command_that_shows_more(self, root: Path) -> None:
        """One block per job: the job line, how it ended, then the five sections, each naming a command."""
        result = hvdlog("report", str(root / "crashed"))
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith("job crashed: 2 ranks (0-1) on node1") and "last step 4" in lines[0]
        assert lines[1].startswith("  FAILED (certain): rank 1 at step 4: ValueError: bad batch"), lines[1]  # the step (M6)
        titles = [line.split()[0] for line in lines[2:] if not line.startswith(" " * 16)]
        assert titles == ["first", "stalls", "stragglers", "timeline", "resources"], lines
        assert f"(more: hvdlog first-failure {root / 'crashed'})" in result.stdout
        assert f"(more: hvdlog stalls {root / 'crashed'})" in result.stdout
        assert "steps/s by rank 0-1:" in result.stdout and "\x1b[" not in result.stdout  # no samples/s logged: steps/s

    def test_json_is_one_document_per_job_with_every_section(self, root: Path) -> None:
        """--json: job facts, status with confidence and reasoning, each section, the 'more' commands; oldest activity first."""
        result = hvdlog("report", "--json", str(root))
        assert result.exit_code == 0, result.stderr
        docs = [json.loads(line) for line in result.stdout.splitlines()]
        assert [doc["job"] for doc in docs] == ["done", "crashed", "live"]
        by_job = {doc["job"]: doc for doc in docs}
        crashed = by_job["crashed"]
        assert crashed["status"]["state"] == "failed" and crashed["first_failure"]["blamed_ranks"] == [1]
        assert crashed["first_failure"]["collateral_ranks"] == [0]
        assert crashed["stragglers"]["progress"] == {"0": 4, "1": 4}
        assert set(crashed) >= {"ranks", "hosts", "first", "last", "last_step", "stalls", "timeline", "resources", "more"}
        assert crashed["more"]["stalls"].endswith("--job crashed")  # several jobs: the command names this one
        assert by_job["done"]["status"]["state"] == "finished" and by_job["done"]["hosts"] == ["node0", "node1"]
        assert by_job["done"]["status"]["confidence"] == "likely"
        assert by_job["live"]["status"]["state"] == "running", by_job["live"]["status"]

    def test_reads_the_logs_once(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every section comes from one search of the source, not one per analysis."""
        from hvdlog.query.files import FileSource

        calls: list[object] = []
        original = FileSource.search

        def counted(self: FileSource, spec: object, last: int | None = None) -> object:
            calls.append(spec)
            return original(self, spec, last)  # type: ignore[arg-type]

        monkeypatch.setattr(FileSource, "search", counted)
        assert hvdlog("report", str(root)).exit_code == 0
        assert len(calls) == 1

    def test_elasticsearch_unreachable(self) -> None:
        """Over Elasticsearch without --job the server is asked which job the documents name: unreachable, one sentence, exit 2.
        (One job: it is reported; several: --job is asked for; tests/cli/test_import.py, on real servers.)"""
        result = hvdlog("report", "--es", "http://127.0.0.1:9")
        assert result.exit_code == 2 and "cannot reach Elasticsearch at http://127.0.0.1:9" in result.stderr

    def test_nothing_to_report_exits_1(self, root: Path) -> None:
        result = hvdlog("report", "--job", "nosuchjob", str(root))
        assert result.exit_code == 1 and result.stdout == ""


class TestJobs:
    def test_every_job_newest_first(self, root: Path) -> None:
        """Ranks, hosts, times, size on disk and status per job, sorted by last activity."""
        result = hvdlog("jobs", "--json", str(root))
        assert result.exit_code == 0, result.stderr
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert [row["job"] for row in rows] == ["live", "crashed", "done"]
        by_job = {row["job"]: row for row in rows}
        assert by_job["crashed"]["status"]["state"] == "failed" and "ValueError" in by_job["crashed"]["status"]["reasoning"]
        assert by_job["done"]["status"]["state"] == "finished" and by_job["live"]["status"]["state"] == "running"
        assert by_job["done"]["ranks"] == [0, 1] and by_job["done"]["hosts"] == ["node0", "node1"]
        size = sum(p.stat().st_size for p in (root / "done").rglob("*") if p.is_file())
        assert by_job["done"]["size_bytes"] == size and by_job["done"]["files"] == 2

    def test_jobs_and_report_give_the_same_status(self, tmp_path: Path) -> None:
        """Silence is judged by the job's step interval in both: quiet for 2 min after 1-s steps is
        finished; quiet for 2 min after 30-s steps is still running (20 intervals, at most 5 min)."""
        root, now = tmp_path / "hvdlog-logs", time.time()
        for rank in (0, 1):
            _write(root, "fast", rank, _steps(now - 120 - 40, 40))
            _write(root, "slow", rank, _steps(now - 120 - 30 * 8, 9, every=30.0))
        rows = {row["job"]: row["status"] for row in map(json.loads, hvdlog("jobs", "--json", str(root)).stdout.splitlines())}
        reports = {doc["job"]: doc["status"] for doc in map(json.loads, hvdlog("report", "--json", str(root)).stdout.splitlines())}
        assert rows == reports, (rows, reports)
        assert rows["fast"]["state"] == "finished" and "20 step intervals of 1 s" in rows["fast"]["reasoning"]
        assert rows["slow"]["state"] == "running", rows["slow"]

    def test_default_root_and_its_absence(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """No ROOT: ./hvdlog-logs when it exists, else one sentence, exit 2."""
        monkeypatch.chdir(root.parent)
        assert "crashed" in hvdlog("jobs").stdout
        monkeypatch.chdir(root / "done")
        result = hvdlog("jobs")
        assert result.exit_code == 2 and "give a root, or run where hvdlog-logs/ is" in result.stderr


@pytest.mark.elasticsearch
def test_report_and_jobs_over_elasticsearch(root: Path, es_url: str) -> None:
    """The same documents indexed through `hvdlog install`'s templates: jobs aggregates, report reads them."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.parse import parse_paths
    from hvdlog.query.files import discover

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    installed = subprocess.run([sys.executable, "-m", "hvdlog", "install", "--es", es_url], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert installed.returncode == 0, installed.stderr
    docs = list(parse_paths([str(p) for p in discover([root], print)], timezone="UTC"))
    client = Elasticsearch(es_url, request_timeout=60)
    actions = ({"_op_type": "create", "_index": "logs-horovod.app-reporttest", "_source": d} for d in docs)
    ok, errors = bulk(client, actions, refresh="wait_for", raise_on_error=False)
    client.close()
    assert not errors and ok == len(docs)
    jobs = hvdlog("jobs", "--json", "--es", es_url)
    assert jobs.exit_code == 0, jobs.stderr
    rows = {row["job"]: row for row in map(json.loads, jobs.stdout.splitlines())}
    assert rows["crashed"]["status"]["state"] == "failed" and rows["crashed"]["ranks"] == [0, 1]
    assert rows["crashed"]["size_bytes"] is None and rows["done"]["status"]["state"] == "finished"
    assert rows["live"]["status"]["state"] == "running"
    report = hvdlog("report", "--json", "--es", es_url, "--job", "crashed")
    assert report.exit_code == 0, report.stderr
    (doc,) = [json.loads(line) for line in report.stdout.splitlines()]
    assert doc["status"]["state"] == "failed" and doc["first_failure"]["blamed_ranks"] == [1]
    assert doc["more"]["stalls"] == f"hvdlog stalls --es {es_url} --job crashed"
    # Files and --es over the same job: every event once.
    alone = hvdlog("grep", "--json", "--job", "crashed", str(root))
    both = hvdlog("grep", "--json", "--job", "crashed", "--es", es_url, str(root))
    crashed = sum(1 for doc in docs if doc["job"] == "crashed")
    assert both.exit_code == 0 and len(both.stdout.splitlines()) == len(alone.stdout.splitlines()) == crashed, both.stdout


def test_pictures_plain_in_a_pipe_blocks_on_a_terminal() -> None:
    """ASCII when not a terminal; bars scale to the largest value; unknown values are marked."""
    assert sparkline({0: 10, 1: 5, 2: None}, fancy=False) == "@+?"
    assert sparkline({0: 10, 1: 0}, fancy=True) == "█▁"
    lines = bars({0: 10.0, 1: 5.0}, fancy=False, width=10)
    assert lines == ["rank    0 ##########  10", "rank    1 #####.....  5"]


class TestFirstHour:
    def test_grep_without_a_path_reads_the_default_root(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """`hvdlog grep --level error` in the folder holding hvdlog-logs/ searches it; elsewhere one sentence."""
        monkeypatch.chdir(root.parent)
        result = hvdlog("grep", "--level", "error")
        assert result.exit_code == 0 and "uncaught ValueError" in result.stdout, result.stderr
        monkeypatch.chdir(root / "done")
        result = hvdlog("grep", "--level", "error")
        assert result.exit_code == 2 and "give a path, or run where hvdlog-logs/ is" in result.stderr

    def test_a_pattern_taken_for_a_path_gets_a_suggestion(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An unquoted two-word pattern, or a quoted one alone: 'did you mean' with -e."""
        monkeypatch.chdir(root.parent)
        result = hvdlog("grep", "bad batch")
        assert result.exit_code == 2 and "did you mean `hvdlog grep -e 'bad batch' hvdlog-logs`?" in result.stderr, result.stderr
        result = hvdlog("grep", "bad", "batch", "hvdlog-logs")
        assert result.exit_code == 2 and "did you mean `hvdlog grep -e 'bad batch' hvdlog-logs`?" in result.stderr, result.stderr
        assert hvdlog("grep", "-e", "bad batch").exit_code == 0

    def test_times_are_marked_utc_or_local(self, root: Path) -> None:
        """Text output marks its zone: Z by default (--utc), the offset with --local."""
        utc = hvdlog("grep", "bad batch", str(root)).stdout
        assert utc[23] == "Z", utc
        local = subprocess.run([sys.executable, "-m", "hvdlog", "grep", "--local", "bad batch", str(root)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO), "TZ": "Asia/Kolkata"}, timeout=60, check=False).stdout
        assert local[23:29] == "+05:30", local

    def test_usage_errors_are_one_line(self, root: Path) -> None:
        """A bad --tz: one `hvdlog: error:` line, not click's four-line block."""
        result = subprocess.run([sys.executable, "-m", "hvdlog", "grep", "--tz", "Mars/Base", "x", str(root)], capture_output=True,
                                text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60, check=False)
        assert result.returncode == 2
        assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith("hvdlog: error: "), result.stderr
        assert "Mars/Base" in result.stderr and "--help" in result.stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class TestProgress:
    def test_a_line_on_a_terminal_for_large_input_erased_at_the_end(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Bytes read / total and files, redrawn in place, then erased."""
        from hvdlog.query import progress

        monkeypatch.setattr(progress, "EVERY_S", 0.0)
        monkeypatch.setenv("HVDLOG_PROGRESS_BYTES", "100")
        terminal = _Terminal()
        line = progress.ReadProgress(3000, 3, stream=terminal)
        line.file_done(1000)
        line.file_done(2000)
        line.end()
        assert "\\rhvdlog: reading 1 kB of 3 kB, 1 of 3 files" in repr(terminal.getvalue())
        assert "3 kB of 3 kB, 2 of 3 files" in terminal.getvalue() and terminal.getvalue().endswith("\r\x1b[K")

    def test_nothing_in_a_pipe_or_for_small_input(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from hvdlog.query import progress

        monkeypatch.setattr(progress, "EVERY_S", 0.0)
        for stream, total in ((io.StringIO(), 10**12), (_Terminal(), 10)):
            line = progress.ReadProgress(total, 1, stream=stream)
            line.file_done(total)
            line.end()
            assert stream.getvalue() == ""

    def test_grep_reports_every_file(self, root: Path) -> None:
        """The source the commands use counts each file it read (through the real search)."""
        from hvdlog.query.progress_files import ProgressFileSource
        from hvdlog.query.spec import Filter

        source = ProgressFileSource([root], warn=print)
        assert list(source.search(Filter(min_level="error")))
        assert source.progress is not None and source.progress.done_files == 6
        assert source.progress.done_bytes == sum(p.stat().st_size for p in root.rglob("*.jsonl"))


def _stall(at: float, step: int, seconds: float, operation: str | None = None) -> dict[str, object]:
    """A watchdog stall report as the runtime writes it (a waiting rank names its collective)."""
    event: dict[str, object] = {"@timestamp": _iso(at), "log.level": "warning", "message": "stalled", "event.action": "stall",
                                "horovod.stall.source": "watchdog", "horovod.stall.seconds": seconds, "step": step}
    if operation:
        event["horovod.stall.operation"] = operation
    return event


def _statuses(root: Path) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    rows = {row["job"]: row["status"] for row in map(json.loads, hvdlog("jobs", "--json", str(root)).stdout.splitlines())}
    reports = {doc["job"]: doc["status"] for doc in map(json.loads, hvdlog("report", "--json", str(root)).stdout.splitlines())}
    return rows, reports


class TestOneVerdict:
    """Issue 40: the status is the job model's, facts first, the same in report and jobs."""

    def test_a_job_whose_newest_events_are_stall_reports_is_hung(self, tmp_path: Path) -> None:
        """Rank 1 stopped at step 3 and both watchdogs keep reporting: hung, naming rank 1 (M2), not running."""
        root, now = tmp_path / "logs", time.time()
        _write(root, "stuck", 0, [*_steps(now - 40, 3), *(_stall(now - 30 + 6 * i, 3, 5 + 6 * i, "allreduce") for i in range(5))])
        _write(root, "stuck", 1, [*_steps(now - 40, 3), *(_stall(now - 30 + 6 * i, 3, 5 + 6 * i) for i in range(5))])
        rows, reports = _statuses(root)
        assert rows["stuck"]["state"] == reports["stuck"]["state"] == "hung"  # (the reasoning says the reports' age)
        assert rows["stuck"]["state"] == "hung" and "rank 1 has not progressed at step 3" in rows["stuck"]["reasoning"], rows

    def test_the_consoles_echo_of_a_stall_report_is_no_progress(self, tmp_path: Path) -> None:
        """`hvdlog run`'s launcher.log holds each rank's console echo of its stall reports, stamped when it arrived
        (after the report itself). `jobs` read it as the job's newest activity and said running while `report`,
        which pairs the copy with its original, said hung (a red CI run): both say hung."""
        root, now = tmp_path / "logs", time.time()
        stalls = [_stall(now - 30 + 6 * i, 3, 5 + 6 * i, "allreduce") for i in range(5)]
        _write(root, "stuck", 0, [*_steps(now - 40, 3), *stalls])
        _write(root, "stuck", 1, [*_steps(now - 40, 3), *(_stall(now - 30 + 6 * i, 3, 5 + 6 * i) for i in range(5))])
        last = now - 30 + 6 * 4
        arrived = _iso(last + 0.001)[:-1] + "000Z"  # hvdlog run stamps a line's arrival in microseconds
        echo = f"{arrived} [0]<stderr>:{_iso(last)[11:23]} WARNING  [rank 0 step 3] stalled\n"
        (root / "stuck" / "launcher.log").write_text(echo)
        rows, reports = _statuses(root)
        assert rows["stuck"]["state"] == reports["stuck"]["state"] == "hung", (rows, reports)

    @pytest.mark.parametrize("after", ["[2026-11-29 16:09:00.000001: I /tmp/horovod/common/operations.cc:1] [0]: rank 0 still here", ""])
    def test_a_log_that_ends_in_an_unresolved_stall_is_not_finished(self, tmp_path: Path, after: str) -> None:
        """Issue 41: an old console whose last stall report names rank 1, and nothing after it from rank 1 (rank 0's
        own line after it is no sign rank 1 went on): not `finished (likely)`, but unknown, with the stall as reason;
        `jobs` and `report` agree."""
        console = tmp_path / "stuck.console.log"
        lines = ["[2026-11-29 16:01:00.000001: I /tmp/horovod/common/operations.cc:689] [0]: Horovod initialized",
                 ("[2026-11-29 16:02:48.117744: W /tmp/horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
                  "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "
                  "This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is "
                  "submitting tensors, which will cause deadlock. "), "Missing ranks:", "1: [allreduce.grad.fc1.weight]", after]
        console.write_text("\n".join(lines) + "\n")
        (report,) = map(json.loads, hvdlog("report", "--json", str(console)).stdout.splitlines())
        status = report["status"]
        if after:
            assert status["state"] == "unknown", status
            assert "ends in an unresolved stall: rank 1 stopped since" in status["reasoning"], status
        else:
            assert status["state"] in ("hung", "unknown") and "rank 1" in status["reasoning"], status

    def test_every_rank_recorded_a_clean_end(self, tmp_path: Path) -> None:
        """Exit records of status 0 from every rank: finished for certain, seconds after the end (M2)."""
        root, now = tmp_path / "logs", time.time()
        for rank in (0, 1):
            _write(root, "ended", rank, [*_steps(now - 10, 5), {"@timestamp": _iso(now - 4), "log.level": "info", "message": "process exit: status 0",
                                                              "event.action": "process_exit", "process.exit_code": 0}])
        rows, reports = _statuses(root)
        assert rows == reports
        assert rows["ended"] == {"state": "finished", "confidence": "certain",
                                 "reasoning": "every rank recorded a clean end (exit status 0, 2 exit records)"}

    def test_the_launcher_recorded_its_exit_status(self, tmp_path: Path) -> None:
        """`hvdlog run`'s launcher_exit record decides: status 0 is finished for certain, whatever the ranks recorded."""
        root, now = tmp_path / "logs", time.time()
        for rank in (0, 1):
            _write(root, "launched", rank, _steps(now - 10, 5))
        (root / "launched" / "node1" / "launcher.jsonl").write_text(json.dumps({
            "@timestamp": _iso(now - 3), "log.level": "info", "message": "launcher horovodrun exited with status 0", "job": "launched",
            "event.action": "launcher_exit", "hvdlog.launcher.exit_code": 0}) + "\n")
        rows, reports = _statuses(root)
        assert rows == reports
        assert rows["launched"] == {"state": "finished", "confidence": "certain", "reasoning": "the launcher exited with status 0"}

    def test_a_copied_root_keeps_its_times(self, tmp_path: Path) -> None:
        """Times come from the events, never from files' modification times: a capture written now
        (as `cp -r` makes every file) does not make a job of two hours ago look running (M5)."""
        root, then = tmp_path / "logs", time.time() - 7200
        for rank in (0, 1):
            _write(root, "old", rank, _steps(then, 5))
            capture = root / "old" / "node1" / f"rank-{rank}.stdout.log"
            capture.write_text(f"{_iso(then + 2)[:-1]}000Z printed by the script\n")
        (row,) = map(json.loads, hvdlog("jobs", "--json", str(root)).stdout.splitlines())
        assert row["last"] == _iso(then + 4) and row["status"]["state"] == "finished", row

    def test_report_and_jobs_give_the_same_span(self, tmp_path: Path) -> None:
        """The launcher's console (its lines' arrival times) starts 40 s before the ranks' first events and a
        rank's capture prints after their last: report and jobs both give the span of hvdlog's own records
        (events and the launcher's exit record); report once started it at the launcher's first line."""
        root, then = tmp_path / "logs", time.time() - 7200
        for rank in (0, 1):
            _write(root, "spanned", rank, _steps(then, 5))
            (root / "spanned" / "node1" / f"rank-{rank}.stdout.log").write_text(f"{_iso(then + 4.5)[:-1]}000Z [{rank}]<stdout>:bye\n")
        (root / "spanned" / "launcher.log").write_text(f"{_iso(then - 40)[:-1]}000Z INFO:root:reset workers: 2\n")
        (root / "spanned" / "node1" / "launcher.jsonl").write_text(json.dumps({
            "@timestamp": _iso(then + 6), "log.level": "info", "message": "launcher horovodrun exited with status 0", "job": "spanned",
            "event.action": "launcher_exit", "hvdlog.launcher.exit_code": 0}) + "\n")
        (row,) = map(json.loads, hvdlog("jobs", "--json", str(root)).stdout.splitlines())
        (report,) = map(json.loads, hvdlog("report", "--json", str(root / "spanned")).stdout.splitlines())
        assert (report["first"], report["last"]) == (row["first"], row["last"]) == (_iso(then), _iso(then + 6)), (report["first"], row)

    def test_grep_over_several_jobs_names_each_line_s_job(self, root: Path) -> None:
        """A root of several jobs: each line names its job (M12); one job: no job column."""
        several = hvdlog("grep", "--level", "error", str(root)).stdout.splitlines()
        assert several and all(line.split()[2] == "crashed" for line in several), several
        one = hvdlog("grep", "--level", "error", str(root / "crashed")).stdout.splitlines()
        assert one and all(line.split()[2] == "rank" for line in one), one


def test_jobs_reads_a_consoles_ranks_and_times() -> None:
    """A console outside hvdlog's layout names its ranks and times only in its lines: `jobs` reads it whole
    (it listed the job with no ranks and no times, while `report` on the same folder knew both)."""
    console = REPO / "tests" / "corpus" / "realworld" / "mpich-hydra-traceback"
    rows = [json.loads(line) for line in hvdlog("jobs", "--json", str(console)).output.splitlines()]
    report = json.loads(hvdlog("report", "--json", "--tz", "UTC", str(console)).output)
    assert [row["job"] for row in rows] == [report["job"]] == [str(console / "console.log")]  # one name: the file's
    assert rows[0]["ranks"] == report["ranks"] == [0, 1]
    assert (rows[0]["first"], rows[0]["last"]) == (report["first"], report["last"]) == ("2021-06-07T11:51:50.120Z", "2021-06-07T11:51:58.044Z")


def test_jobs_reads_a_console_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A console outside hvdlog's layout is read whole for its ranks and times; its status documents and a rank's
    last words (rank 1's NCCL chain ends the output) come from that read, not from reading it again (3 reads before)."""
    from hvdlog.query.files import FileSource

    console = REPO / "tests" / "corpus" / "realworld" / "nccl-warn-chain-then-silence"
    calls: list[list[str]] = []
    original = FileSource.search

    def counted(self: FileSource, spec: object, last: int | None = None) -> object:
        calls.append([str(path) for path in self.paths])
        return original(self, spec, last)  # type: ignore[arg-type]

    monkeypatch.setattr(FileSource, "search", counted)
    (row,) = [json.loads(line) for line in hvdlog("jobs", "--json", str(console)).output.splitlines()]
    assert row["status"]["state"] == "failed" and row["status"]["reasoning"].startswith("rank 1: "), row["status"]
    assert calls == [[str(console / "console.log")]], calls

"""hvdlog grep / stalls / stragglers / first-failure on real horovodrun files: output, exit codes, bad input."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.query_corpus import FAULTS, REPO, STRAGGLER, Corpus, corpus

from hvdlog.cli.main import cli

pytestmark = pytest.mark.horovod


@pytest.fixture(name="runs", scope="module")
def fixture_runs() -> Corpus:
    """The shared real runs."""
    return corpus()


#: This tree's CLI in a child process (whatever checkout the venv's console script points to).
IN_TREE_HVDLOG = [sys.executable, "-c", "from hvdlog.cli.main import main; main()"]
IN_TREE_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def hvdlog(*args: str) -> Result:
    """Run the CLI in-process (stdout is not a terminal: plain text)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def ndjson(result: Result) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.horovod
class TestGrep:
    def test_level_error_finds_the_crash_on_both_ranks(self, runs: Corpus) -> None:
        """--level error: exit 0, rank 1's InjectedFault and rank 0's shutdown, nothing below error."""
        result = hvdlog("grep", "--level", "error", "--json", str(runs.logs))
        assert result.exit_code == 0, result.stderr
        docs = ndjson(result)
        assert {d["log"]["level"] for d in docs} <= {"error", "critical"}
        assert any("InjectedFault" in json.dumps(d) and d["rank"] == 1 for d in docs)
        assert any("HorovodInternalError" in json.dumps(d) and d["rank"] == 0 for d in docs)

    def test_plain_line_has_time_rank_level_step_message(self, runs: Corpus) -> None:
        """One line per event with the five columns; piped output has no colour codes."""
        result = hvdlog("grep", "injected hang", str(runs.logs))
        assert result.exit_code == 0, result.stderr
        (line,) = result.stdout.splitlines()
        assert line.startswith("20") and "rank 1" in line and "WARNING" in line and "step 3" in line
        assert "injected hang" in line and "\x1b[" not in line

    def test_identical_lines_from_ranks_collapse_unless_no_dedupe(self, runs: Corpus) -> None:
        """`train step` at one step from both ranks is one line naming ranks 0-1; --no-dedupe shows both."""
        args = ("grep", "train step", "--job", FAULTS, "--step", "4:5", str(runs.logs))
        collapsed = hvdlog(*args).stdout.splitlines()
        assert len(collapsed) == 2 and all("ranks 0-1" in line for line in collapsed)
        assert len(hvdlog(*args, "--no-dedupe").stdout.splitlines()) == 4

    def test_rank_step_and_last(self, runs: Corpus) -> None:
        """--rank, --step and -n select exactly what they say, in time order."""
        docs = ndjson(hvdlog("grep", "--json", "--rank", "1", "--job", STRAGGLER, "--step", "3:7", "train step", str(runs.logs)))
        assert [d["step"] for d in docs] == [3, 4, 5, 6, 7] and {d["rank"] for d in docs} == {1}
        last = ndjson(hvdlog("grep", "--json", "-n", "2", "--rank", "1", "--job", STRAGGLER, str(runs.logs)))
        # the rank's last word is its own exit record, written at interpreter exit
        assert [d["message"] for d in last] == ["training done", "process exit: status 0 (sys.exit)"]  # sys.exit(main())

    def test_nothing_matches_exits_1(self, runs: Corpus) -> None:
        """No match: exit 1 and no output, like grep."""
        result = hvdlog("grep", "no such message anywhere", str(runs.logs))
        assert (result.exit_code, result.stdout) == (1, "")

    def test_output_filename_tree(self, runs: Corpus) -> None:
        """A horovodrun --output-filename tree is searched too; ranks come from rank.N."""
        docs = ndjson(hvdlog("grep", "--json", "-e", "InjectedFault", str(runs.output)))
        assert docs and {d["rank"] for d in docs} == {1}

    def test_follow_prints_new_lines(self, runs: Corpus, tmp_path: Path) -> None:
        """-f prints a matching line appended after it started, then keeps running."""
        job = tmp_path / "followed" / "vm"
        job.mkdir(parents=True)
        target = job / "rank-0.jsonl"
        shutil.copy(runs.logs / FAULTS / runs.host / "rank-0.jsonl", target)
        process = subprocess.Popen(
            [*IN_TREE_HVDLOG, "grep", "-f", "--interval", "0.2", "--json", "late event", str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=IN_TREE_ENV,
        )
        try:
            time.sleep(2.0)
            event = {"@timestamp": "2026-11-29T18:00:00Z", "log.level": "info", "message": "late event", "rank": 0}
            with open(target, "a") as handle:
                handle.write(json.dumps(event) + "\n")
            line = _readline(process, timeout=15)
            assert json.loads(line)["message"] == "late event"
        finally:
            process.terminate()
            process.wait(timeout=10)


def _readline(process: subprocess.Popen[str], timeout: float) -> str:
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    assert box and box[0], f"no line within {timeout} s; stderr: {process.stderr}"
    return box[0]


@pytest.mark.horovod
class TestBadInput:
    def test_garbage_lines_are_kept_and_warned_about(self, runs: Corpus, tmp_path: Path) -> None:
        """Garbage in a rank's files still parses the rest; the garbage is findable, with a warning."""
        tree = tmp_path / "logs"
        shutil.copytree(runs.logs / FAULTS, tree / FAULTS)
        with open(tree / FAULTS / runs.host / "rank-1.stderr.log", "ab") as handle:
            handle.write(b"\xff\xfe binary garbage \x00 zzz\n{not json at all\n")
        result = hvdlog("grep", "garbage", str(tree))
        assert result.exit_code == 0, result.stderr
        assert "binary garbage" in result.stdout
        assert hvdlog("grep", "--level", "error", str(tree)).exit_code == 0

    def test_missing_path_warns_but_shows_the_rest(self, runs: Corpus, tmp_path: Path) -> None:
        """One missing path: the others' matches are printed, a warning names it, exit 2."""
        result = hvdlog("grep", "InjectedFault", str(runs.logs), str(tmp_path / "nope"))
        assert result.exit_code == 2
        assert "InjectedFault" in result.stdout
        assert "nope: no such file or directory" in result.stderr

    def test_nothing_readable_is_an_error(self, tmp_path: Path) -> None:
        """Only missing paths: exit 2 and a sentence saying what to check."""
        result = hvdlog("grep", "x", str(tmp_path / "nope"))
        assert result.exit_code == 2 and "no log files found" in result.stderr

    @pytest.mark.parametrize(
        ("flag", "value", "needle"),
        [("--rank", "one", "rank list"), ("--since", "someday", "bad time"), ("--step", "9:1", "step range"), ("--level", "loud", "loud")],
    )
    def test_bad_flags_exit_2(self, runs: Corpus, flag: str, value: str, needle: str) -> None:
        """Bad flag values exit 2 with the reason."""
        result = hvdlog("grep", flag, value, "x", str(runs.logs))
        assert result.exit_code == 2 and needle in result.stderr

    def test_unreachable_elasticsearch_with_files_still_shows_files(self, runs: Corpus) -> None:
        """Files + a dead --es: file matches printed, a warning says ES cannot be reached, exit 2."""
        result = hvdlog("grep", "InjectedFault", str(runs.logs), "--es", f"http://127.0.0.1:{_dead_port()}")
        assert result.exit_code == 2
        assert "InjectedFault" in result.stdout
        assert "cannot reach Elasticsearch at" in result.stderr and "is it running" in result.stderr

    def test_slow_elasticsearch_times_out(self) -> None:
        """An Elasticsearch that accepts but never answers: exit 2 within --timeout, saying so."""
        with _SilentServer() as port:
            started = time.monotonic()
            result = hvdlog("grep", "x", "--es", f"http://127.0.0.1:{port}", "--timeout", "1")
            assert time.monotonic() - started < 10
        assert result.exit_code == 2 and "no answer within 1 s" in result.stderr


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _SilentServer:
    """A TCP server that accepts connections and never replies."""

    def __enter__(self) -> int:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


@pytest.mark.horovod
class TestAnalysisCommands:
    def test_stalls(self, runs: Corpus) -> None:
        """hvdlog stalls: exit 0, the step-3 episode with rank 1 missing; --json has the fields."""
        result = hvdlog("stalls", "--job", FAULTS, str(runs.logs))
        assert result.exit_code == 0, result.stderr
        assert any("missing ranks 1" in line and "resolved" in line for line in result.stdout.splitlines())
        episodes = ndjson(hvdlog("stalls", "--json", "--job", FAULTS, str(runs.logs)))
        assert any(e["step"] == 3 and e["missing_ranks"] == [1] for e in episodes)
        assert hvdlog("stalls", "--job", STRAGGLER, str(runs.logs)).exit_code == 1

    def test_stragglers(self, runs: Corpus) -> None:
        """hvdlog stragglers: rank 1 of the 3-rank straggler job flagged (how much, evidence, confidence), exit 0;
        the 2-rank faults job has no timeline, so "not enough data to call a straggler", exit 1, at any tolerance."""
        result = hvdlog("stragglers", "--job", STRAGGLER, str(runs.logs))
        assert result.exit_code == 0, result.stderr
        flagged = [line for line in result.stdout.splitlines() if "STRAGGLER" in line]
        assert len(flagged) == 1 and flagged[0].split()[1] == "1"
        assert "STRAGGLER (likely): samples/s" in flagged[0] and "below the median" in flagged[0]
        assert f"{STRAGGLER}: straggler: rank 1 (likely, on samples)" in result.stdout
        for tolerance in ("0.6", "0.1", "0"):
            calm = hvdlog("stragglers", "--tolerance", tolerance, "--job", FAULTS, str(runs.logs))
            assert calm.exit_code == 1, calm.stdout + calm.stderr
            assert "STRAGGLER" not in calm.stdout and f"{FAULTS}: not enough data to call a straggler: 2 ranks" in calm.stdout

    def test_first_failure(self, runs: Corpus) -> None:
        """hvdlog first-failure: rank 1 with its traceback; rank 0 listed as collateral."""
        result = hvdlog("first-failure", str(runs.logs))
        assert result.exit_code == 0, result.stderr
        assert "first failure on rank 1" in result.stdout
        assert 'raise InjectedFault' in result.stdout
        assert "collateral: rank 0" in result.stdout
        (report,) = ndjson(hvdlog("first-failure", "--json", str(runs.logs)))
        assert report["culprit"]["rank"] == 1 and report["collateral"][0]["rank"] == 0


@pytest.mark.horovod
def test_console_script_exit_code_and_no_colour_when_piped(runs: Corpus) -> None:
    """The installed `hvdlog` exits like grep and writes plain text into a pipe."""
    exe = Path(sys.executable).with_name("hvdlog")
    env = {**os.environ, "TZ": "UTC"}
    found = subprocess.run([str(exe), "grep", "--level", "critical", str(runs.logs)], capture_output=True, text=True, env=env)
    missing = subprocess.run([str(exe), "grep", "zzz-none", str(runs.logs)], capture_output=True, text=True, env=env)
    assert (found.returncode, missing.returncode) == (0, 1), found.stderr
    assert "\x1b[" not in found.stdout and "CRITICAL" in found.stdout

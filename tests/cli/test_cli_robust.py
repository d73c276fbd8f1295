"""The CLI never crashes: malformed data, bad flags, closed pipes, unreadable paths, hostile text.

Every command runs as a real child process (``python -m hvdlog``), the way a user runs it:
the answer is exit 0/1 (found / nothing) or 2 with one sentence on stderr, never a traceback.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import queue
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC", "NO_COLOR": ""}
HVDLOG = [sys.executable, "-m", "hvdlog"]

GOOD = {"@timestamp": "2026-11-30T14:00:09.000001Z", "log.level": "error", "message": "the good line", "rank": 0, "job": "j", "step": 1}

#: One malformed event per row, each from the issue's list or its neighbours.
MALFORMED: dict[str, dict[str, object]] = {
    "message-object": {"message": {"nested": {"deep": 1}}},
    "level-list": {"log.level": ["error", "x"]},
    "tags-int": {"tags": 5},
    "dotted-300": {".".join(["a"] * 300): 1},
    "missing-ranks-int": {"message": "stall", "horovod.stall.source": "watchdog", "horovod.stall.missing_ranks": 5},
    "missing-ranks-str": {"message": "stall", "horovod.stall.source": "inspector", "horovod.stall.missing_ranks": "0,1", "horovod.stall.tensors": 7},
    "rank-list": {"rank": [1, 2]},
    "size-huge": {"size": 300_000_000, "step": 3},
    "size-huge-collateral": {"size": 300_000_000, "message": "Horovod has been shut down. This was caused by an exception on one of the ranks"},
    "size-huge-stall": {"size": 300_000_000, "message": "stall", "horovod.stall.source": "watchdog", "horovod.stall.operation": "allreduce"},
    "step-huge": {"step": 10**18, "size": -4},
    "time-impossible": {"@timestamp": "2026-13-45T25:61:00.000000Z"},
    "time-number": {"@timestamp": 1e300},
    "time-object": {"@timestamp": {"a": 1}},
    "host-list": {"host.name": ["a", "b"], "job": {"x": 1}},
    "error-fields": {"error.type": ["X"], "error.message": {"m": 1}, "error.stack_trace": 3, "event.action": 4},
}


def run(*args: str, cwd: Path | None = None, timeout: float = 60, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, *HVDLOG, *args], capture_output=True, text=True, timeout=timeout, check=False, env=ENV, cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def assert_no_crash(result: subprocess.CompletedProcess[str], *allowed: int) -> None:
    """Exit 0/1/2 as allowed, no traceback; an exit 2 says why in one ``error:`` line."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (allowed or (0, 1, 2)), (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower() and line.startswith(("hvdlog", "Error"))]
    if result.returncode == 2:
        assert errors or "warning" in result.stderr, result.stderr


def write_events(path: Path, *events: dict[str, object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for event in events:
            handle.write(json.dumps(event) + "\n")
    return path


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``hvdlog ARGS`` through the same ``main()`` as the console script, in this process (fast)."""
    from hvdlog.cli.main import main

    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
    out.flush()
    return subprocess.CompletedProcess(args, code, out.buffer.getvalue().decode(), err.getvalue())  # type: ignore[attr-defined]


def _malformed_case(name: str, tmp_path: Path) -> Path:
    bad = {**GOOD, "message": f"bad {name}", **MALFORMED[name]}
    write_events(tmp_path / "j" / "node1" / "rank-0.jsonl", bad, GOOD)
    return tmp_path / "j"


def _assert_understood(command: tuple[str, ...], result: subprocess.CompletedProcess[str]) -> None:
    assert_no_crash(result)
    # main() turns an unexpected exception into a sentence that offers --debug: data must never get there.
    assert "--debug for the traceback" not in result.stderr, (command, result.stderr)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_event_is_never_a_crash(name: str, tmp_path: Path) -> None:
    """grep, parse and stragglers read a file holding one malformed event beside a good one:
    no unexpected error, and grep/parse still deliver the good event (exit 0)."""
    tree = _malformed_case(name, tmp_path)
    for command in (("grep",), ("grep", "--level", "error"), ("grep", "--json"), ("stragglers",), ("parse",)):
        result = in_process(*command, str(tree))
        _assert_understood(command, result)
        if command[0] in ("grep", "parse"):
            assert result.returncode == 0, (command, result.stderr)
            assert "the good line" in result.stdout, (command, result.stdout)


@pytest.mark.parametrize(("command", "name"), [(command, name) for command in ("stalls", "first-failure") for name in sorted(MALFORMED)])
def test_malformed_event_in_the_analyses(command: str, name: str, tmp_path: Path) -> None:
    """stalls and first-failure read the same files without an unexpected error."""
    _assert_understood((command,), in_process(command, str(_malformed_case(name, tmp_path))))


def _analysed(command: str, name: str, tmp_path: Path) -> dict[str, Any]:
    result = in_process(command, "--json", str(_malformed_case(name, tmp_path)))
    _assert_understood((command,), result)
    assert result.returncode == 0, result.stderr
    (answer,) = [json.loads(line) for line in result.stdout.splitlines()]
    return cast("dict[str, Any]", answer)


def test_scalar_missing_rank_is_one_rank(tmp_path: Path) -> None:
    """Elasticsearch stores a one-rank list as a scalar: ``missing_ranks: 5`` is rank 5 to both analyses."""
    assert 5 in _analysed("stalls", "missing-ranks-int", tmp_path / "s")["missing_ranks"]
    report = _analysed("first-failure", "missing-ranks-int", tmp_path / "f")
    assert report["blamed_ranks"] == [5] and report["stall"]["missing_ranks"] == [5]
    assert report["cause"].startswith("stall: rank(s) 5 never joined"), report["cause"]


def test_stall_fields_of_the_wrong_type_name_nothing(tmp_path: Path) -> None:
    """``missing_ranks: "0,1"`` and ``tensors: 7`` are ignored: no rank or tensor is made up from them."""
    episode = _analysed("stalls", "missing-ranks-str", tmp_path / "s")
    assert (episode["source"], episode["missing_ranks"], episode["tensors"]) == ("inspector", [], [])
    report = _analysed("first-failure", "missing-ranks-str", tmp_path / "f")
    assert report["blamed_ranks"] == [] and report["stall"]["tensors"] == []
    assert "a rank the report does not name" in report["cause"], report["cause"]


def test_list_rank_is_never_blamed(tmp_path: Path) -> None:
    """An error whose ``rank`` is a list names no rank: the culprit is the good event's rank 0."""
    report = _analysed("first-failure", "rank-list", tmp_path)
    assert report["blamed_ranks"] == [0] and report["culprit"]["message"] == "the good line"


@pytest.mark.parametrize("command", ["grep", "first-failure", "stalls", "stragglers", "parse"])
def test_unknown_time_zone_is_a_usage_error(command: str, tmp_path: Path) -> None:
    """``--tz Bad/Zone`` exits 2 naming the zone, before reading anything."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", GOOD)
    result = run(command, "--tz", "Bad/Zone", str(tmp_path / "j"))
    assert_no_crash(result, 2)
    assert "unknown time zone 'Bad/Zone'" in result.stderr


def _measured(*args: str) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """Run the CLI under a fresh parent that reports the child's CPU seconds and peak RSS (KiB).

    CPU time, not wall time: on a machine shared with builds, wall time measures the
    neighbours (interpreter start alone can take 2 s there); 54 s of work would still show.
    """
    probe = (
        "import resource, subprocess, sys, json\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps([usage.ru_utime + usage.ru_stime, usage.ru_maxrss, done.returncode, done.stderr]))\n"
    )
    wrapper = subprocess.run([sys.executable, "-c", probe, *HVDLOG, *args], capture_output=True, text=True, env=ENV, timeout=120, check=True)
    seconds, peak_kib, code, stderr = json.loads(wrapper.stdout)
    return subprocess.CompletedProcess(args, code, "", stderr), seconds, peak_kib


def test_huge_rank_range_is_fast_and_small(tmp_path: Path) -> None:
    """``--rank 0-99999999`` answers within 2 s of CPU in under 200 MB (ranks are intervals)."""
    write_events(tmp_path / "j" / "h" / "rank-7.jsonl", {**GOOD, "rank": 7})
    result, seconds, peak_kib = _measured("grep", "--rank", "0-99999999", str(tmp_path / "j"))
    assert result.returncode == 0, result.stderr
    assert seconds < 2.0 and peak_kib < 200 * 1024, (seconds, peak_kib)


def test_size_from_data_is_bounded(tmp_path: Path) -> None:
    """One event claiming ``size: 300000000`` does not make stragglers list 300 M ranks."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", {**GOOD, "size": 300_000_000, "step": 4})
    result, seconds, peak_kib = _measured("stragglers", str(tmp_path / "j"))
    assert_no_crash(result)
    assert seconds < 5.0 and peak_kib < 200 * 1024, (seconds, peak_kib)


def _pty_output(args: list[str], seconds: float = 20) -> str:
    """What a terminal would receive from the command."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(args, stdout=follower, stderr=subprocess.PIPE, env={**ENV, "TERM": "xterm"}, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    process.wait(timeout=10)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_control_characters_are_escaped_on_a_terminal(tmp_path: Path) -> None:
    """A logged title change or screen clear is shown as text, not sent to the terminal."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", {**GOOD, "message": "evil \x1b]0;pwned\x07 and \x1b[2J cleared \x9b31m"})
    for extra in ((), ("--no-color",)):
        shown = _pty_output([*HVDLOG, "grep", *extra, "evil", str(tmp_path / "j")])
        assert "evil" in shown, shown
        assert "\x1b]0;pwned" not in shown and "\x1b[2J" not in shown and "\x9b" not in shown, repr(shown)
        assert "\\x1b]0;pwned\\x07" in shown, repr(shown)


def test_piped_output_keeps_bytes(tmp_path: Path) -> None:
    """Into a pipe (a file, another program) the text is passed on unchanged."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", {**GOOD, "message": "tab\there"})
    assert "tab\there" in run("grep", "tab", str(tmp_path / "j")).stdout


def test_credentials_in_urls_are_masked_and_plain_http_warns(tmp_path: Path) -> None:
    """No message shows the password of ``http://user:pass@host``; Basic auth over http warns."""
    for command in (("grep", "x"), ("stalls",), ("install",)):
        result = run(*command, "--es", "http://alice:s3cretpw@127.0.0.1:9/", "--timeout" if command[0] != "install" else "--replicas", "1")
        assert_no_crash(result, 2)
        assert "s3cretpw" not in result.stderr + result.stdout, result.stderr
        assert "alice:***" in result.stderr, result.stderr
        assert "plain HTTP" in result.stderr, result.stderr


def test_bad_es_url_is_one_sentence() -> None:
    """A URL without a scheme is refused with the reason."""
    result = run("grep", "--es", "es.example:9200", "x")
    assert_no_crash(result, 2)
    assert "use http(s)://host:port" in result.stderr


def test_python_dash_m_is_the_cli() -> None:
    """``python -m hvdlog`` runs the CLI."""
    result = run("--help")
    assert result.returncode == 0 and "Usage: hvdlog" in result.stdout and "install" in result.stdout


def test_old_setup_name_still_works() -> None:
    """``hvdlog setup`` (renamed ``install``) still answers, and says the new name."""
    result = run("setup", "--help")
    assert result.returncode == 0 and "now `hvdlog install`" in result.stderr


@pytest.mark.parametrize("command", [("parse",), ("grep",), ("grep", "--json"), ("grep", "--no-dedupe")])
def test_closed_pipe_ends_quietly(command: tuple[str, ...], tmp_path: Path) -> None:
    """``hvdlog … | head -1``: exit 0, nothing on stderr about the pipe."""
    stamp = "2026-11-30T14:{:02d}:{:02d}.{:06d}Z"
    events = [{**GOOD, "message": f"line {i} " + "x" * 200, "@timestamp": stamp.format(i // 6000 % 60, i // 100 % 60, i % 100)} for i in range(20000)]
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", *events)
    process = subprocess.Popen([*HVDLOG, *command, str(tmp_path / "j")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert "Broken pipe" not in stderr and "Traceback" not in stderr and "Errno" not in stderr, stderr


def test_pattern_is_never_taken_for_a_path(tmp_path: Path) -> None:
    """A file named like the pattern in the current directory does not change the meaning."""
    write_events(tmp_path / "logs" / "j" / "h" / "rank-0.jsonl", {**GOOD, "message": "NCCL timeout"}, {**GOOD, "message": "other"})
    (tmp_path / "NCCL").write_text("not a log\n")
    result = run("grep", "NCCL", "logs", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "NCCL timeout" in result.stdout and "other" not in result.stdout
    whole = run("grep", "logs", cwd=tmp_path)  # one argument and no --es: the path
    assert "other" in whole.stdout
    two_trees = run("grep", "logs/j", "logs/j/h", cwd=tmp_path)  # written as existing paths: both are paths
    assert two_trees.returncode == 0 and "other" in two_trees.stdout, two_trees.stderr
    as_path = run("grep", "./NCCL", "logs", cwd=tmp_path)  # ./ asks for the file
    assert "not a log" in as_path.stdout


def _without_root_override() -> tuple[str, ...]:
    """Root reads anything; drop that capability so permissions apply as to a user."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to test unreadable paths as root")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search", "--")


@pytest.fixture(name="locked_tree")
def fixture_locked_tree(tmp_path: Path) -> Iterator[Path]:
    """A job tree with one readable rank and one directory nobody may list."""
    root = tmp_path / "runs"
    write_events(root / "j" / "node1" / "rank-0.jsonl", GOOD)
    write_events(root / "j" / "node2" / "rank-1.jsonl", {**GOOD, "rank": 1})
    (root / "j" / "node1" / "NOTES.txt").write_text("not a log: never read\n")
    (root / "j" / "node2").chmod(0)
    yield root
    (root / "j" / "node2").chmod(0o755)


@pytest.mark.parametrize("command", [("grep",), ("parse",), ("stalls",), ("jobs",)])
def test_unreadable_directory_warns_and_exits_2(command: tuple[str, ...], locked_tree: Path) -> None:
    """The readable files are still read; the locked directory is named; exit 2."""
    result = run(*command, str(locked_tree), prefix=_without_root_override())
    assert_no_crash(result, 2)
    assert "node2" in result.stderr and "cannot read" in result.stderr, result.stderr
    if command[0] not in ("stalls", "jobs"):
        assert "the good line" in result.stdout
    if command[0] == "jobs":
        assert result.stdout.startswith("job ") and "\nj " in result.stdout, result.stdout  # the job is still listed


def test_jobs_names_an_unreadable_file_and_exits_2(locked_tree: Path) -> None:
    """One rank's file unreadable: jobs lists the job, names the file, exit 2 (it said nothing and exited 0)."""
    (locked_tree / "j" / "node2").chmod(0o755)
    locked = locked_tree / "j" / "node2" / "rank-1.jsonl"
    locked.chmod(0)
    result = run("jobs", str(locked_tree), prefix=_without_root_override())
    assert_no_crash(result, 2)
    assert f"{locked}: cannot read" in result.stderr and "\nj " in result.stdout, (result.stderr, result.stdout)


def test_one_walker_for_parse_and_grep(locked_tree: Path) -> None:
    """``parse DIR`` and ``grep DIR`` read the same files: NOTES.txt in neither."""
    (locked_tree / "j" / "node2").chmod(0o755)
    parsed = {json.loads(line)["log"]["file"]["path"] for line in run("parse", str(locked_tree)).stdout.splitlines()}
    grepped = {json.loads(line)["log"]["file"]["path"] for line in run("grep", "--json", str(locked_tree)).stdout.splitlines()}
    assert parsed == grepped and len(parsed) == 2, (parsed, grepped)


def test_missing_path_is_warned_and_exit_2(tmp_path: Path) -> None:
    """A typo in one path: the others are read, the typo named, exit 2."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", GOOD)
    for command in ("grep", "parse"):
        result = run(command, *(("-e", "good") if command == "grep" else ()), str(tmp_path / "j"), str(tmp_path / "nope"))
        assert_no_crash(result, 2)
        assert "nope" in result.stderr and "the good line" in result.stdout


def test_file_truncated_while_read_is_no_crash(tmp_path: Path) -> None:
    """A file cut short while grep scans it (rotation, a restart): no SIGBUS, no traceback."""
    path = tmp_path / "j" / "h" / "rank-0.jsonl"
    line = json.dumps({**GOOD, "message": "y" * 300}) + "\n"
    path.parent.mkdir(parents=True)
    path.write_text(line * 200_000)  # ~70 MB
    stop = threading.Event()

    def truncate_repeatedly() -> None:
        while not stop.is_set():
            with path.open("r+b") as handle:
                handle.truncate(len(line) * 10)
            time.sleep(0.01)
            with path.open("ab") as handle:
                handle.write(line.encode() * 100_000)

    worker = threading.Thread(target=truncate_repeatedly, daemon=True)
    worker.start()
    try:
        for _ in range(3):
            result = run("grep", "--level", "error", str(tmp_path / "j"), timeout=120)
            assert result.returncode in (0, 1, 2) and "Traceback" not in result.stderr, (result.returncode, result.stderr[-500:])
    finally:
        stop.set()
        worker.join()


def test_unexpected_error_is_one_sentence_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    """A broken pattern file (``HVDLOG_PATTERNS``): one sentence; ``--debug`` adds the traceback."""
    broken = tmp_path / "patterns"
    broken.write_text("THIS is not ( a pattern file\n")
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", GOOD)
    # A native capture: its parser needs the patterns (our JSON events alone never load them).
    (tmp_path / "j" / "h" / "rank-0.stdout.log").write_text("a plain line\n")
    env = {**ENV, "HVDLOG_PATTERNS": str(broken)}
    plain = subprocess.run([*HVDLOG, "grep", str(tmp_path / "j")], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr, plain.stderr
    assert len([line for line in plain.stderr.splitlines() if line.startswith("hvdlog: error:")]) == 1, plain.stderr
    debug = subprocess.run([*HVDLOG, "--debug", "grep", str(tmp_path / "j")], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert debug.returncode == 2 and "Traceback" in debug.stderr, debug.stderr


class _FailingSource:
    """A source whose follower yields one event, then fails (as a disk or a bug would)."""

    label = "flaky"

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def search(self, spec: object, last: int | None = None) -> Iterator[dict[str, object]]:
        yield from ()

    def follow(self, spec: object, interval: float) -> Iterator[dict[str, object]]:
        yield {"@timestamp": "2026-11-30T14:00:00Z", "rank": 0, "message": "before the failure", "log": {"level": "info"}}
        raise self.error


@pytest.mark.parametrize("kind", ["source-error", "bug"])
def test_follower_errors_reach_the_main_loop(kind: str) -> None:
    """grep -f: a follower that fails ends following (no hang); a source error is recorded
    for exit 2, anything else is raised in the main thread (where main() makes it a sentence)."""
    from hvdlog.cli.grep import _follow
    from hvdlog.cli.options import Run
    from hvdlog.cli.output import Printer
    from hvdlog.query.source import SourceError
    from hvdlog.query.spec import Filter

    error: BaseException = SourceError("disk gone") if kind == "source-error" else KeyError("bug")
    run_ = Run([_FailingSource(error)], Filter(), as_json=False)
    out: queue.Queue[BaseException | None] = queue.Queue()

    import io

    stream = io.StringIO()

    def target() -> None:
        try:
            _follow(run_, Filter(), 0.01, Printer(as_json=False, stream=stream))
            out.put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out.put(exc)

    threading.Thread(target=target, daemon=True).start()
    outcome = out.get(timeout=10)
    assert "before the failure" in stream.getvalue()
    if kind == "source-error":
        assert outcome is None and run_.failures == ["flaky: disk gone"]
    else:
        assert isinstance(outcome, KeyError)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--window", "nan"), ("--window", "-1"), ("--interval", "0"), ("--interval", "inf"), ("--timeout", "nan")],
)
def test_numeric_options_are_validated(option: str, value: str, tmp_path: Path) -> None:
    """A bad number of seconds exits 2 with one sentence naming the option (issue #23), never
    a Python exception (``--window nan`` leaked ``ValueError: cannot convert float NaN``)."""
    write_events(tmp_path / "j" / "h" / "rank-0.jsonl", GOOD)
    result = run("grep", option, value, "good", str(tmp_path / "j"))
    assert_no_crash(result, 2)
    assert f"Invalid value for '{option}'" in result.stderr and "number of seconds" in result.stderr
    assert "ValueError" not in result.stderr


def test_python_dash_m_hvdlog_cli_main_is_the_cli() -> None:
    """``python -m hvdlog.cli.main`` runs the CLI (it did nothing and exited 0)."""
    result = subprocess.run([sys.executable, "-m", "hvdlog.cli.main", "--help"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert result.returncode == 0 and "Usage: hvdlog" in result.stdout

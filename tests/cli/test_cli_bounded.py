"""Bounded reading: no line, nesting or file kind takes a command over a root down (issue 45:
Medium 13, Low 26, 27, 28, 29 and the ``\\ud800`` escape of Low 33).

Every command runs as a real child process. A sparse file makes a 1 GiB line that costs no disk;
the children's address space is capped well below it, so reading that line whole fails.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC", "NO_COLOR": ""}
BOOM = {"@timestamp": "2026-11-30T14:00:09.000001Z", "log.level": "error", "message": "boom in the other job", "rank": 0, "job": "ok"}
#: The children's address space: far below the sparse line, well above what a bounded read needs.
CAP = 768 * 2**20


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None, capped: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hvdlog", *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env or ENV, stdin=subprocess.DEVNULL, preexec_fn=_capped if capped else None)


def _write(path: Path, *events: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(event) + "\n" for event in events))


@pytest.fixture(name="sparse_root")
def fixture_sparse_root(tmp_path: Path) -> Path:
    """A root with a 1 GiB one-line sparse file in job x, and a failed job ok beside it."""
    root = tmp_path / "root"
    big = root / "x" / "h" / "rank-0.jsonl"
    big.parent.mkdir(parents=True)
    with big.open("wb") as handle:
        handle.truncate(2**30)  # `truncate -s 1G`: no disk
    _write(root / "ok" / "h" / "rank-0.jsonl", BOOM)
    return root


@pytest.mark.parametrize("command", [("jobs",), ("grep", "--level", "error"), ("grep", "boom"), ("first-failure",)])
def test_a_sparse_line_takes_no_root_command_down(sparse_root: Path, command: tuple[str, ...]) -> None:
    """The 1 GiB line is cut as it is read (said once on stderr); the other job is still answered."""
    result = run(*command, str(sparse_root), capped=True)
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    if command[0] == "jobs":
        assert "ok " in result.stdout and "failed" in result.stdout, result.stdout
    else:
        assert "boom in the other job" in result.stdout, result.stdout
        assert "1 line(s) longer than" in result.stderr and "were cut" in result.stderr, result.stderr


def test_a_long_error_line_stays_an_error_and_the_first_failure(tmp_path: Path) -> None:
    """Over the line bound (4 KiB here, 1 MiB by default), an error event keeps its level, rank and
    end, tagged and counted as cut: the first-failure answer does not change."""
    trace = "Traceback (most recent call last):\n" + "".join(f'  File "layer{i}.py", line {i}, in forward\n' for i in range(3000))
    first = {"@timestamp": "2026-11-30T14:00:01.000000Z", "log.level": "error", "message": "CUDA error: an illegal memory access",
             "rank": 1, "job": "j", "error.type": "RuntimeError", "error.stack_trace": trace + "RuntimeError: CUDA error\n",
             "event.action": "uncaught_exception"}
    later = {"@timestamp": "2026-11-30T14:00:05.000000Z", "log.level": "error", "message": "connection closed by peer", "rank": 0, "job": "j"}
    _write(tmp_path / "j" / "h" / "rank-1.jsonl", first)
    _write(tmp_path / "j" / "h" / "rank-0.jsonl", later)
    env = {**ENV, "HVDLOG_MAX_LINE_BYTES": "4096"}
    grep = run("grep", "--json", "--rank", "1", str(tmp_path), env=env)
    (doc,) = [json.loads(line) for line in grep.stdout.splitlines()]
    assert doc["log"]["level"] == "error" and doc["rank"] == 1 and doc["event"]["action"] == "uncaught_exception", doc
    assert "_hvdlog_truncated" in doc["tags"] and doc["hvdlog"]["truncated"]["bytes"] > 100_000, doc.get("tags")
    assert doc["error"]["stack_trace"].endswith("RuntimeError: CUDA error\n"), "the line's end is kept"
    assert "1 line(s) longer than 4096 bytes were cut" in grep.stderr, grep.stderr
    report = run("first-failure", "--json", str(tmp_path), env=env)
    assert json.loads(report.stdout.splitlines()[0])["blamed_ranks"] == [1], report.stdout


def test_an_event_nested_a_thousand_deep_is_bounded(tmp_path: Path) -> None:
    """stragglers (msgspec's block reader) and grep read a line nested 1,000 levels: the value is cut at 20 levels."""
    steps = [{"@timestamp": f"2026-11-30T14:00:{i:02d}.000000Z", "log.level": "info", "message": "train step", "rank": 0, "job": "j",
              "step": i, "samples_per_sec": 100.0} for i in range(20)]
    path = tmp_path / "j" / "h" / "rank-0.jsonl"
    _write(path, *steps)
    with path.open("a") as handle:
        handle.write(json.dumps(steps[-1])[:-1] + ', "x": ' + '{"a": ' * 1000 + "1" + "}" * 1000 + "}\n")
    result = run("stragglers", "--no-timeline", str(tmp_path))
    assert "RecursionError" not in result.stderr and result.returncode in (0, 1), result.stderr
    grep = run("grep", "--json", "--step", "19", str(tmp_path))
    deepest = [json.loads(line) for line in grep.stdout.splitlines()][-1]["x"]
    depth = 1
    while isinstance(deepest, dict):
        deepest, depth = deepest["a"], depth + 1
    assert depth == 20 and "nested deeper than 20 levels" in deepest, (depth, deepest)


def test_a_fifo_or_a_device_is_refused_with_one_sentence(tmp_path: Path) -> None:
    """A FIFO in the tree, a FIFO and /dev/zero named: each named on stderr, never read; the other files are; exit 2."""
    _write(tmp_path / "ok" / "h" / "rank-0.jsonl", BOOM)
    fifo = tmp_path / "ok" / "h" / "rank-1.jsonl"
    os.mkfifo(fifo)
    named = tmp_path / "named.log"
    os.mkfifo(named)
    for args in ((str(tmp_path),), (str(tmp_path / "ok" / "h" / "rank-0.jsonl"), str(named), "/dev/zero")):
        result = run("grep", "boom", *args, timeout=60, capped=True)
        assert result.returncode == 2 and "boom in the other job" in result.stdout, result.stderr
        for refused in ([fifo] if len(args) == 1 else [named, Path("/dev/zero")]):
            assert f"{refused}: a " in result.stderr and "not a regular file" in result.stderr, result.stderr


def test_a_lone_surrogate_escape_keeps_an_error_an_error(tmp_path: Path) -> None:
    """A foreign writer's ``\\ud800`` (valid JSON, refused by orjson) is U+FFFD, as a bad byte is: the event stays an error."""
    path = tmp_path / "j" / "h" / "rank-2.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"@timestamp":"2026-11-30T14:00:01Z","log.level":"error","message":"bad \\ud800 name","rank":2}\n')
    result = run("grep", "--json", "--level", "error", str(tmp_path))
    (doc,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert doc["log"]["level"] == "error" and doc["message"] == "bad \ufffd name" and doc["rank"] == 2, doc


@pytest.mark.parametrize("args", [("stalls", "--merge-gap", "nan"), ("stalls", "--merge-gap", "inf"), ("watch", "--interval", "inf"),
                                  ("watch", "--interval", "nan"), ("watch", "--silent-after", "nan")])
def test_a_non_finite_number_of_seconds_is_one_sentence(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Not a raw Python error, and (--interval nan) not a poll loop spinning at full CPU: exit 2 with one sentence."""
    _write(tmp_path / "ok" / "h" / "rank-0.jsonl", BOOM)
    result = run(*args, str(tmp_path), timeout=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "Error" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "finite number of seconds" in result.stderr, result.stderr

"""``grep -f`` across rotation (issue #23): every line printed exactly once, never half a line.

Real processes: a writer process (hvdlog's own rotating writer, or copy-truncate as logrotate
does it) writes 3,000 numbered events while ``hvdlog grep -f`` follows the file, or the
directory, in another process.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SUPPORT = Path(__file__).resolve().parents[1] / "support"
COUNT = 3000


def follow_while_writing(tmp_path: Path, mode: str, target: str) -> list[str]:
    directory = tmp_path / "logs" / "job" / "vm"
    directory.mkdir(parents=True)
    file = directory / "rank-1.jsonl"
    go = tmp_path / "go"
    file.write_bytes(b"")
    writer = subprocess.Popen([sys.executable, str(SUPPORT / "rotating_writer.py"), mode, str(file), str(COUNT), str(go)], env=os.environ.copy())
    followed = str(file) if target == "file" else str(tmp_path / "logs")
    grep = subprocess.Popen(
        [sys.executable, "-m", "hvdlog", "grep", "-f", "--json", "--interval", "0.05", followed],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy(),
    )
    messages: list[str] = []
    done = threading.Event()

    def read() -> None:
        assert grep.stdout is not None
        first: float | None = None
        for raw in grep.stdout:
            message = json.loads(raw)["message"]  # a half line would not be JSON
            messages.append(message)
            first = first or time.monotonic()
            if message.startswith("probe") and time.monotonic() - first > 0.3:
                go.touch()  # printed by the follower (the first search printed all its probes at once): following has started
            if message == f"line {COUNT - 1}":
                done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert writer.wait(timeout=300) == 0
        done.wait(timeout=60)
        time.sleep(0.5)  # anything printed twice arrives in the same polls
    finally:
        grep.terminate()
        grep.wait(timeout=30)
        writer.kill()
    reader.join(10)
    return messages


@pytest.mark.parametrize("mode", ["ours", "copytruncate"])
@pytest.mark.parametrize("target", ["file", "directory"])
def test_every_line_exactly_once(tmp_path: Path, mode: str, target: str) -> None:
    messages = follow_while_writing(tmp_path, mode, target)
    lines = [m for m in messages if m.startswith("line ")]
    counts = collections.Counter(lines)
    missing = [n for n in range(COUNT) if f"line {n}" not in counts]
    doubled = {line: n for line, n in counts.items() if n > 1}
    assert not missing and not doubled, f"{len(missing)} missing (first {missing[:5]}), {len(doubled)} doubled (e.g. {list(doubled)[:5]})"
    assert len(lines) == COUNT
    if mode == "ours":
        assert len(list((tmp_path / "logs" / "job" / "vm").glob("rank-1.jsonl.*"))) >= 10  # it did rotate, many times


def _lines(first: int, last: int) -> bytes:
    return b"".join(b'{"message": "line %d", "rank": 1}\n' % number for number in range(first, last))


def _read_all(follower, polls: int = 1) -> list[bytes]:
    return [line for _ in range(polls) for _, lines in follower.poll() for line in lines]


def test_a_copy_seen_while_still_empty_is_not_read_from_its_start(tmp_path: Path) -> None:
    """logrotate (and shutil.copyfile) create the copy empty, then fill it, then truncate the
    original: a poll between the first two steps must not take the copy for a new file (read
    from 0, every line already read from the original would come again)."""
    from hvdlog.query.follow import Follower

    original, copy = tmp_path / "rank-1.jsonl", tmp_path / "rank-1.jsonl.1"
    original.write_bytes(_lines(0, 100))
    follower = Follower(lambda: sorted(tmp_path.iterdir()), print)
    follower.start()
    with original.open("ab") as handle:
        handle.write(_lines(100, 160))
    assert _read_all(follower) == _lines(100, 160).splitlines()
    copy.write_bytes(b"")  # the copy, created: empty
    assert _read_all(follower) == []
    with original.open("ab") as handle:
        handle.write(_lines(160, 170))
    copy.write_bytes(original.read_bytes())  # filled
    original.write_bytes(_lines(170, 172))  # the original truncated, written on
    assert sorted(_read_all(follower, 2)) == sorted(_lines(160, 172).splitlines())


def test_a_copy_recognised_after_its_original_was_truncated(tmp_path: Path) -> None:
    """The copy is seen still empty, then filled and the original truncated before the same
    poll reads the original: the next poll recognises the copy by the original's former first
    bytes and reads it on from where the original was read to."""
    from hvdlog.query.follow import Follower

    original, copy = tmp_path / "rank-1.jsonl", tmp_path / "rank-1.jsonl.1"
    original.write_bytes(_lines(0, 100))
    rotate = False

    def discover() -> Iterator[Path]:
        if copy.exists():
            yield copy
        if rotate and copy.stat().st_size == 0:  # between looking at the copy and reading the original
            with original.open("ab") as handle:
                handle.write(_lines(100, 110))
            copy.write_bytes(original.read_bytes())
            original.write_bytes(_lines(110, 112))
        yield original

    follower = Follower(discover, print)
    follower.start()
    copy.write_bytes(b"")
    rotate = True
    first = _read_all(follower)
    rotate = False
    assert sorted(first + _read_all(follower, 2)) == sorted(_lines(100, 112).splitlines())

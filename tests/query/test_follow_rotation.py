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

"""Following a file applies the line bound, as the one-shot read does (issue 45).

A real ``hvdlog grep -f`` follows a real file that grows by a 640 MiB line in four steps (sparse:
no disk), under an address space capped far below it. ``watch`` follows through the same
:class:`hvdlog.query.follow.Follower`.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CAP = 512 * 2**20  # below the line, well above what a bounded follow needs
STEP = 160 * 2**20  # the long line grows by 160 MiB per step (640 MiB in all)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def _event(message: str) -> bytes:
    return json.dumps({"@timestamp": "2026-11-30T14:00:01.000000Z", "log.level": "error", "message": message, "rank": 1, "job": "j"}).encode() + b"\n"


def test_a_line_growing_past_the_bound_while_followed_is_cut(tmp_path: Path) -> None:
    """The followed line is held only as its two ends (4 KiB bound here): ``grep -f`` prints it
    as one error event tagged ``_hvdlog_truncated``, says so once, and goes on. It read the
    growth whole at every poll (``MemoryError`` under the cap)."""
    path = tmp_path / "j" / "h" / "rank-1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(_event("before following"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC", "NO_COLOR": "", "HVDLOG_MAX_LINE_BYTES": "4096"}
    process = subprocess.Popen(
        [sys.executable, "-m", "hvdlog", "grep", "-f", "--json", "--interval", "0.2", str(path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=_capped, stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None and process.stderr is not None
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()

    printed: dict[str, dict[str, object]] = {}

    def printed_all(*texts: str, seconds: float = 300) -> bool:
        """Until a document whose message starts with each text was printed (in any order: ``grep -f`` sorts a batch by time)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and process.poll() is None and not all(text in printed for text in texts):
            try:
                doc = json.loads(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            printed[next((text for text in texts if str(doc.get("message", "")).startswith(text)), "other")] = doc
        return all(text in printed for text in texts)

    def wait_for(*texts: str) -> None:
        if not printed_all(*texts):
            process.kill()
            raise AssertionError(f"{texts} not all printed (exit {process.returncode}): {process.stderr.read().decode()[-3000:] if process.stderr else ''}")

    try:
        wait_for("before following")  # what the file held, printed by the search that precedes following
        for attempt in range(60):  # a marker appended after the follower started is printed: following from then on
            with path.open("ab") as handle:
                handle.write(_event(f"marker {attempt}"))
            if printed_all("marker", seconds=2):
                break
        head = b'{"@timestamp":"2026-11-30T14:00:02.000000Z","log.level":"error","message":"long ' + b"x" * 8192
        with path.open("ab") as handle:
            handle.write(head)
        for _ in range(4):  # sparse growth, seen by the polls in between (160 MiB each)
            with path.open("r+b") as handle:
                handle.truncate(path.stat().st_size + STEP)
            time.sleep(0.5)
        with path.open("ab") as handle:
            handle.write(b"x" * 8192 + b' end of the long line","rank":1,"job":"j"}\n' + _event("after the long line"))
        wait_for("long x", "after the long line")  # reading 640 MiB of zeros takes ~30 s on a loaded machine
    finally:
        process.kill()
        stderr = process.stderr.read().decode()
        process.wait(timeout=30)
    long, after = printed["long x"], printed["after the long line"]
    assert "MemoryError" not in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert long["log"]["level"] == "error" and long["rank"] == 1, long  # type: ignore[index]
    assert "_hvdlog_truncated" in long["tags"] and str(long["message"]).endswith("end of the long line"), long.get("tags")  # type: ignore[operator]
    assert long["hvdlog"]["truncated"]["bytes"] > 4 * STEP - 8192, long["hvdlog"]  # type: ignore[index]
    assert after["rank"] == 1
    assert stderr.count("1 line(s) longer than 4096 bytes were cut") == 1, stderr[-3000:]


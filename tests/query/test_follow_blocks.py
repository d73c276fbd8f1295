"""``grep -f`` keeps each native file's parser across polls (issue 39): a traceback written in two
halves, with polls between them, is one document, as when the file is read at once.

A real ``hvdlog grep -f`` process follows a job folder. Probe lines in another file tell the test
when the follower has polled: a poll prints only after reading every file, so once a probe written
after the traceback's first half is printed, that half has been read, alone; the second half is
written only then.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import BinaryIO

from hvdlog.parse import LineStream, parse_lines

TRACEBACK = [
    b"Traceback (most recent call last):\n",
    b'  File "train.py", line 120, in <module>\n',
    b"    main()\n",
    b"RuntimeError: CUDA error: an illegal memory access\n",
]


class TestLineStream:
    def test_a_block_fed_in_two_parts_is_the_block_read_at_once(self) -> None:
        """Fed 2 + 2 lines, then closed, the stream gives what parse_lines gives for the 4 lines."""
        path = "/r/job/node1/rank-3.stderr.log"
        whole = list(parse_lines(TRACEBACK, path=path, timezone="UTC"))
        stream = LineStream(path=path, timezone="UTC")
        first = list(stream.feed(TRACEBACK[:2]))
        parts = first + list(stream.feed(TRACEBACK[2:])) + list(stream.close())
        assert first == [] and len(whole) == 1 and parts == whole
        assert whole[0]["error"]["type"] == "RuntimeError"

    def test_a_console_line_wrapped_across_parts_is_joined(self) -> None:
        """A console (no rank in its path) joins a terminal-wrapped line whose pieces come in two feeds."""
        lines = [b"[1]<stderr>:" + b"x" * 68 + b"\n", b"[1]<stderr>:" + b"y" * 68 + b"\n", b"[1]<stderr>:tail\n", b"[0]<stdout>:done\n"]
        whole = list(parse_lines(lines, path="/r/console.log"))
        stream = LineStream(path="/r/console.log")
        parts = [*stream.feed(lines[:1]), *stream.feed(lines[1:]), *stream.close()]
        assert parts == whole


def _reader(process: subprocess.Popen[bytes], out: queue.Queue[dict[str, object]]) -> None:
    assert process.stdout is not None
    for raw in process.stdout:
        out.put(json.loads(raw))


def _until(out: queue.Queue[dict[str, object]], message: str, seen: list[dict[str, object]]) -> None:
    while True:
        try:
            doc = out.get(timeout=20)
        except queue.Empty:
            raise AssertionError(f"no {message!r} printed; printed: {[doc.get('message') for doc in seen]}") from None
        seen.append(doc)
        if doc.get("message") == message:
            return


def _started(probe: BinaryIO, out: queue.Queue[dict[str, object]]) -> None:
    """The follower runs: grep -f first prints what the files hold, then follows from their end
    (lines written in between are not new to it), so a probe written after the first output
    and printed was read by the follower. Probes differ: grep -f prints a repeated document once."""
    written, first = 0, None
    for _ in range(600):
        probe.write(f"start {written}\n".encode())
        written += 1
        try:
            doc = out.get(timeout=0.2)
        except queue.Empty:
            continue
        if first is None:
            first = written
        elif int(str(doc["message"]).split()[-1]) >= first:
            return
    raise AssertionError("grep -f followed no probe in 2 minutes")


def test_grep_follow_joins_a_traceback_written_across_polls(tmp_path: Path) -> None:
    """Two halves with polls between: one uncaught-exception document, with the whole stack."""
    folder = tmp_path / "job" / "node1"
    folder.mkdir(parents=True)
    stderr, probes = folder / "rank-3.stderr.log", folder / "rank-0.stdout.log"
    stderr.write_bytes(b"")
    probes.write_bytes(b"")
    grep = subprocess.Popen([sys.executable, "-m", "hvdlog", "grep", "-f", "--json", "--interval", "0.05", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "TZ": "UTC"})
    out: queue.Queue[dict[str, object]] = queue.Queue()
    threading.Thread(target=_reader, args=(grep, out), daemon=True).start()
    seen: list[dict[str, object]] = []
    try:
        with probes.open("ab", buffering=0) as probe, stderr.open("ab", buffering=0) as log:
            _started(probe, out)
            log.write(b"".join(TRACEBACK[:2]))
            probe.write(b"probe 1\n")
            _until(out, "probe 1", seen)
            probe.write(b"probe 2\n")
            _until(out, "probe 2", seen)  # a whole poll began after the first half was written: it was read
            log.write(b"".join(TRACEBACK[2:]))
            probe.write(b"probe 3\n")
            while not any(doc.get("log", {}).get("file", {}).get("path") == str(stderr) for doc in seen):  # type: ignore[union-attr]
                seen.append(out.get(timeout=20))  # the block, complete once its file stays quiet
            probe.write(b"probe 4\n")
            _until(out, "probe 4", seen)
    except AssertionError as exc:
        grep.terminate()
        raise AssertionError(f"{exc}; grep -f said: {grep.communicate(timeout=30)[1].decode(errors='replace')[-2000:]}") from None
    finally:
        grep.terminate()
        grep.wait(timeout=30)
    from_stderr = [doc for doc in seen if doc.get("log", {}).get("file", {}).get("path") == str(stderr)]  # type: ignore[union-attr]
    assert len(from_stderr) == 1, [doc.get("message") for doc in from_stderr]
    error = from_stderr[0].get("error") or {}
    assert error.get("type") == "RuntimeError" and "main()" in error.get("stack_trace", ""), from_stderr  # type: ignore[union-attr,operator]

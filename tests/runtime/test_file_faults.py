"""What happens to a rank's own files behind its back: real processes, real faults (issue #45).

Each case runs a fresh Python process that calls ``hvdlog.configure()`` with native capture on
and meets one fault for real: a FIFO planted where its file goes, a signal handler that logs
while the file rotates, its job folder deleted mid-run, fd 1 re-pointed by the script before
``shutdown()``. Rows of docs/reliability.md's fault table.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

RANK_ENV = {"HOROVOD_RANK": "1", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_SIZE": "2"}


def command(root: Path, body: str, **configure: object) -> list[str]:
    settings = {"root": str(root), "job": "t", "stall_after": None, **configure}
    args = ", ".join(f"{key}={value!r}" for key, value in settings.items())
    source = "import hvdlog, os, sys, time, signal\n" f"config = hvdlog.configure({args})\n" "log = hvdlog.get_logger()\n" + textwrap.dedent(body)
    return [sys.executable, "-c", source]


def run(root: Path, body: str, timeout: float = 120, **configure: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command(root, body, **configure), capture_output=True, timeout=timeout, env={**os.environ, **RANK_ENV}, check=False)


def host_dir(root: Path) -> Path:
    return root / "t" / socket.gethostname()


def lines_of(paths: list[Path]) -> list[dict]:
    data = b"".join(path.read_bytes() for path in paths)
    assert not data or data.endswith(b"\n"), data[-80:]
    return [orjson.loads(line) for line in data.splitlines()]


class TestFifo:
    @pytest.fixture(name="reader", params=["no reader", "a reader"])
    def fixture_reader(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, list[int]]]:
        """A FIFO at ``rank-1.jsonl`` and ``rank-1.stdout.log``; with a reader, the test's open read ends."""
        directory = host_dir(tmp_path / "logs")
        directory.mkdir(parents=True)
        fifos = [directory / "rank-1.jsonl", directory / "rank-1.stdout.log"]
        for fifo in fifos:
            os.mkfifo(fifo)
        # A reader that stays open: a writer's non-blocking open then succeeds (no ENXIO).
        readers = [os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) for fifo in fifos] if request.param == "a reader" else []
        yield tmp_path / "logs", readers
        for fd in readers:
            os.close(fd)

    def test_a_fifo_at_the_rank_file_is_refused(self, reader: tuple[Path, list[int]]) -> None:
        """``configure()`` never blocks on a FIFO at the rank's file (it blocked for ever): one
        warning per file, events on stderr, prints on the console, exit 0."""
        root, _ = reader
        result = run(root, "log.info('hello')\nprint('printed', flush=True)\nlog.info('again')\nhvdlog.shutdown()", timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        refusals = [line for line in result.stderr.splitlines() if b"not a regular file: refusing it" in line]
        assert len(refusals) == 2, result.stderr[-2000:]  # the JSON writer and the capture, once each
        assert any(b"rank-1.jsonl" in line for line in refusals) and any(b"rank-1.stdout.log" in line for line in refusals)
        messages = [orjson.loads(line)["message"] for line in result.stderr.splitlines() if line.startswith(b"{")]
        assert messages[:2] == ["hello", "again"], result.stderr[-2000:]
        assert b"printed" in result.stdout

    def test_nothing_is_written_into_the_fifo(self, reader: tuple[Path, list[int]]) -> None:
        root, readers = reader
        result = run(root, "log.info('hello')\nprint('printed', flush=True)", timeout=60)
        assert result.returncode == 0, result.stderr[-2000:]
        received = []
        for fd in readers:
            with contextlib.suppress(BlockingIOError):
                while chunk := os.read(fd, 65536):
                    received.append(chunk)
        assert b"".join(received) == b""


def test_a_signal_handler_logging_during_rotation(tmp_path: Path) -> None:
    """SIGALRM every millisecond logs from its handler while the main thread logs through
    hundreds of rotations (each stats 100 backup names, so many signals land in one): every
    event of the kept files once and in order, none on the console, none dropped, and every
    rotated file full. The handler's write rotated again inside the rotation: near-empty
    files, events on the console, ``RecursionError`` drops (7,026 events on stderr, 5,808
    dropped in one run)."""
    root = tmp_path / "logs"
    body = """
    import itertools
    ids = itertools.count(1)
    def handler(signum, frame):
        k = next(ids)  # one C call: a handler that interrupts this one takes the next number
        log.info('sig', k=k)
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    for i in range(3000):
        log.info('main', i=i)
    signal.setitimer(signal.ITIMER_REAL, 0, 0)
    print('signals', next(ids) - 1, 'dropped', config.writer.total_dropped, flush=True)
    """
    max_bytes = 3000
    result = run(root, body, timeout=180, max_bytes=max_bytes, backups=100)
    assert result.returncode == 0, result.stderr[-2000:]
    words = result.stdout.split()
    signals, dropped = int(words[words.index(b"signals") + 1]), int(words[words.index(b"dropped") + 1])
    assert signals > 50 and dropped == 0, result.stdout[-500:]
    assert b'"message":"' not in result.stderr, result.stderr[-2000:]  # no event fell back to the console
    files = sorted(host_dir(root).glob("rank-1.jsonl*"), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    rotated = [path for path in files if path.name != "rank-1.jsonl"]
    assert len(rotated) == 100  # 3,000 events of ~270 bytes: ~300 rotations, the last 100 kept
    small = [(path.name, path.stat().st_size) for path in rotated if path.stat().st_size < max_bytes]
    assert not small, small[:5]  # a file rotated twice leaves one with a line or none
    evs = [e for e in lines_of(files) if e.get("event.action") != "process_exit"]
    main = [e["extra"]["i"] for e in evs if e["message"] == "main"]
    assert main == list(range(main[0], 3000)) and main[0] > 0
    sig = [e["extra"]["k"] for e in evs if e["message"] == "sig"]
    assert len(sig) == len(set(sig))  # (a handler interrupted by the next signal logs after it: order may differ)


def test_the_job_folder_deleted_mid_run(tmp_path: Path) -> None:
    """``rm -r`` of the job folder while the rank logs and prints: within a second the folder and
    files are made again (0750/0640), the rest of the lines are there, and the lines written to
    the deleted files since they were last seen are counted in ``log_dropped`` (reason
    ``deleted``), said once on stderr per file. Nothing was on disk after the deletion, and
    nothing said so."""
    root = tmp_path / "logs"
    body = """
    for i in range(50):
        log.info('before', i=i)
        print('n-before', i)
    print('written', flush=True)
    sys.stdin.readline()  # the test saw the lines on disk, then waited over a second: the next writes find the files in place
    log.info('sync')
    print('n-sync', flush=True)
    print('ready', flush=True)
    sys.stdin.readline()
    for i in range(300):
        log.info('after', i=i)
        print('n-after', i, flush=True)
        time.sleep(0.01)
    """
    process = subprocess.Popen(command(root, body), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **RANK_ENV})
    assert process.stdout is not None and process.stdin is not None
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(process.stderr.read() if process.stderr else b""), daemon=True)
    reader.start()
    out = b""
    native_file = host_dir(root) / "rank-1.stdout.log"
    deadline = time.monotonic() + 120
    # The capture process writes the console file on its own time: under load it lags the rank by
    # seconds. The writers look for a deletion at most once a second, so that second is counted from
    # when the lines are on disk, not from when the rank printed them (a fixed sleep in the rank).
    while not (native_file.exists() and b"written\n" in native_file.read_bytes()):
        assert time.monotonic() < deadline and process.poll() is None, "the first lines never reached the console file"
        time.sleep(0.05)
    time.sleep(1.2)
    process.stdin.write(b"go\n")
    process.stdin.flush()
    while b"ready\n" not in out:
        chunk = process.stdout.readline()
        assert chunk, out[-2000:]
        out += chunk
    shutil.rmtree(root / "t")
    process.stdin.write(b"go\n")
    process.stdin.flush()
    out += process.stdout.read()
    assert process.wait(timeout=120) == 0
    reader.join(timeout=60)
    stderr = b"".join(err)
    assert out.count(b"n-after") == 300  # the console lost nothing
    directory = host_dir(root)
    assert (directory.stat().st_mode & 0o777, (root / "t").stat().st_mode & 0o777) == (0o750, 0o750)
    assert (directory / "rank-1.jsonl").stat().st_mode & 0o777 == 0o640
    evs = lines_of([directory / "rank-1.jsonl"])
    after = [e["extra"]["i"] for e in evs if e["message"] == "after"]
    assert after == list(range(300 - len(after), 300)) and after, after[:5]
    json_notes = [e for e in evs if e.get("event.action") == "log_dropped" and "horovod.launcher.stream" not in e]
    # 'sync' and the 'after' lines that went to the deleted file before the writer looked.
    assert [(n["event.reason"], n["log.dropped"]) for n in json_notes] == [("deleted", 1 + 300 - len(after))]
    assert evs.index(json_notes[0]) < evs.index(next(e for e in evs if e["message"] == "after"))
    native = [line for line in (directory / "rank-1.stdout.log").read_bytes().splitlines() if b"n-after" in line]
    native_after = [int(line.split()[-1]) for line in native]
    assert native_after == list(range(300 - len(native_after), 300)) and native_after
    native_notes = [e for e in evs if e.get("event.action") == "log_dropped" and e.get("horovod.launcher.stream") == "stdout"]
    # 'n-sync' and 'ready', then the 'n-after' lines the deleted file took.
    assert [(n["event.reason"], n["log.dropped"]) for n in native_notes] == [("deleted", 2 + 300 - len(native_after))]
    for name in ("rank-1.jsonl", "rank-1.stdout.log"):
        assert stderr.count(f"{name} was deleted while in use; writing a new one".encode()) == 1, stderr[-2000:]


class TestRepointedStdout:
    """A script that points fd 1 at its own file keeps writing there: neither ``shutdown()``
    nor a second ``configure()`` puts the console back over it (they did)."""

    @pytest.mark.parametrize("then", ["hvdlog.shutdown()", "hvdlog.configure(root=config.path.parents[2].as_posix(), job='u', stall_after=None)"])
    def test_repointed_fd_1_is_left_alone(self, tmp_path: Path, then: str) -> None:
        mine = tmp_path / "mine.txt"
        body = f"""
        print('captured', flush=True)
        fd = os.open({str(mine)!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        {then}
        os.write(1, b'written after\\n')
        print('printed after', flush=True)
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        assert b"captured" in result.stdout
        assert b"after" not in result.stdout
        assert mine.read_bytes() == b"written after\nprinted after\n"

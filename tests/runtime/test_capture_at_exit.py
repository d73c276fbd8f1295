"""The native capture keeps every line a rank prints until the process ends (issue #40, M13).

Horovod prints ``[N]: Shutting down background thread`` from its own shutdown at interpreter
exit, after the script's ``hvdlog.shutdown()``: real processes print from atexit handlers
registered before and after ``configure()``, from the main thread and from a thread, and the
file must hold those lines; a real ``horovodrun`` job checks Horovod's own line.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from corpus.tools_required import horovodrun

RANK_ENV = {"HOROVOD_RANK": "1", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_SIZE": "2"}
TRAIN = Path(__file__).resolve().parents[2] / "training" / "train.py"

RANK = """
import atexit, os, sys, threading, time

def late(tag):
    def write():
        os.write(1, f"native {tag} out\\n".encode())
        os.write(2, f"native {tag} err\\n".encode())
        print(f"python {tag}", flush=True)
        # Horovod's line comes from its background thread while the main thread waits for it.
        thread = threading.Thread(target=lambda: os.write(1, f"thread {tag}\\n".encode()))
        thread.start()
        thread.join()
    return write

atexit.register(late("registered-before"))
import hvdlog
hvdlog.configure(root=sys.argv[1], job="t", stall_after=None)
atexit.register(late("registered-after"))
print("during", flush=True)
if sys.argv[2] == "shutdown":
    hvdlog.shutdown()
    os.write(1, b"after shutdown\\n")
"""


def run_rank(root: Path, how: str) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RANK), str(root), how],
        capture_output=True, timeout=120, env={**os.environ, **RANK_ENV}, check=False,
    )
    return result, time.monotonic() - started


def captured(root: Path, kind: str, expected: bytes) -> bytes:
    """The rank's native file once ``expected`` is in it: the capture process writes the last
    lines after the rank has exited (it never makes the rank wait), so allow it a moment."""
    deadline = time.monotonic() + 30
    while True:
        data = b"".join(path.read_bytes() for path in sorted((root / "t").glob(f"*/rank-1.{kind}.log*")))
        if expected in data or time.monotonic() > deadline:
            return data
        time.sleep(0.1)


@pytest.mark.parametrize("how", ["shutdown", "no-shutdown"])
def test_lines_printed_at_interpreter_exit_reach_the_files(tmp_path: Path, how: str) -> None:
    root = tmp_path / "logs"
    result, _ = run_rank(root, how)
    assert result.returncode == 0, result.stderr[-2000:]
    out = captured(root, "stdout", b"native registered-before out")
    err = captured(root, "stderr", b"native registered-before err")
    expected = [b"during"] + [b"after shutdown"] * (how == "shutdown")
    for tag in (b"registered-before", b"registered-after"):
        expected += [b"native " + tag + b" out", b"python " + tag, b"thread " + tag]
        assert b"native " + tag + b" err" in err, err[-1000:]
    for line in expected:
        assert line in out, (line, out[-1500:])
        assert line in result.stdout, (line, result.stdout[-1500:])  # the console still has it too


def test_a_new_configure_after_shutdown_takes_the_fds_back(tmp_path: Path) -> None:
    """shutdown() leaves the capture on; configure() again stops it first, so the second
    capture writes to its own files and the first capture process ends."""
    body = f"""
    import os, sys, hvdlog
    first = hvdlog.configure(root={str(tmp_path / "a")!r}, job="t", stall_after=None)
    tee = first.capture.process
    hvdlog.shutdown()
    second = hvdlog.configure(root={str(tmp_path / "b")!r}, job="t", stall_after=None)
    print("first tee exited:", tee.wait(timeout=30))
    os.write(1, b"into the second\\n")
    hvdlog.shutdown()
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], capture_output=True, timeout=120,
                            env={**os.environ, **RANK_ENV}, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert b"first tee exited: 0" in result.stdout, result.stdout[-1000:]
    second = captured(tmp_path / "b", "stdout", b"into the second")
    assert b"into the second" in second
    first = b"".join(path.read_bytes() for path in sorted((tmp_path / "a" / "t").glob("*/rank-1.stdout.log*")))
    assert b"into the second" not in first


@pytest.mark.horovod
def test_horovods_shutdown_line_reaches_the_rank_files(tmp_path: Path) -> None:
    """A real ``horovodrun --gloo -np 2`` job (the demo's settings): each rank's file ends with
    Horovod's ``Shutting down background thread``, printed after ``hvdlog.shutdown()``."""
    root = tmp_path / "logs"
    cmd = [str(Path(horovodrun())), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, str(TRAIN),
           "--log-root", str(root), "--job", "j", "--epochs", "1", "--steps-per-epoch", "3"]
    result = subprocess.run(cmd, capture_output=True, timeout=300, env={**os.environ, "HOROVOD_LOG_LEVEL": "debug"}, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        line = f"[{rank}]: Shutting down background thread".encode()
        assert line in result.stdout + result.stderr, (rank, result.stderr[-2000:])  # what the console showed
        folder = root / "j" / socket.gethostname()
        deadline = time.monotonic() + 30
        files = b""
        while line not in files and time.monotonic() < deadline:
            files = b"".join(path.read_bytes() for path in folder.glob(f"rank-{rank}.std*.log*"))
            time.sleep(0.1)
        assert line in files, (rank, files[-1500:])

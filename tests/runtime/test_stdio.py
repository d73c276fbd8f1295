"""stdio.WholeWriter: every byte written, a signal handler's write queued after the one it
interrupted, no lock left held in a forked child. Real pipes, real signals, real fork."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from hvdlog.runtime.stdio import WholeWriter

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")


def read_all(fd: int, into: bytearray, pace: float) -> None:
    """Read a pipe to its end, slowly (``pace`` seconds between 4 KiB reads)."""
    while chunk := os.read(fd, 4096):
        into += chunk
        time.sleep(pace)


def test_a_handler_write_during_a_blocked_write_follows_it_whole() -> None:
    """The main thread writes 256 KiB lines into a pipe read slowly, so each write blocks and is
    cut short by the signals; every handler line arrives whole, after a whole main line."""
    read_end, write_end = os.pipe()
    writer = WholeWriter(write_end, "<pipe>")
    received = bytearray()
    reader = threading.Thread(target=read_all, args=(read_end, received, 0.0005))
    reader.start()
    handled: list[int] = []

    def handler(signum: int, frame: object) -> None:
        handled.append(signum)
        writer.write(b"H%03d\n" % len(handled))

    previous = signal.signal(signal.SIGUSR1, handler)
    main, stop = threading.main_thread().ident, threading.Event()
    assert main is not None

    def shoot() -> None:
        while not stop.wait(0.005):
            signal.pthread_kill(main, signal.SIGUSR1)

    shooter = threading.Thread(target=shoot)
    shooter.start()
    try:
        line = b"M" * (256 * 1024 - 1) + b"\n"
        for _ in range(8):
            assert writer.write(line) == len(line)
    finally:
        stop.set()
        shooter.join()
        signal.signal(signal.SIGUSR1, previous)
        os.close(write_end)
        reader.join()
        os.close(read_end)
    lines = bytes(received).split(b"\n")[:-1]
    assert [len(x) for x in lines if x.startswith(b"M")] == [256 * 1024 - 1] * 8
    handler_lines = [x for x in lines if x.startswith(b"H")]
    assert handler_lines == [b"H%03d" % (i + 1) for i in range(len(handled))]
    assert len(handled) >= 3, len(handled)  # signals did arrive inside the blocked writes


def test_a_forked_child_can_write_while_a_thread_of_the_parent_held_the_lock() -> None:
    read_end, write_end = os.pipe()
    writer = WholeWriter(write_end, "<pipe>")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with writer._lock:  # the state a fork may copy
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            writer.write(b"child\n")
            os._exit(0)
        status = wait_or_kill(pid, 10.0)
    finally:
        release.set()
        holder.join()
    os.close(write_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(read_end, 100) == b"child\n"
    os.close(read_end)


def wait_or_kill(pid: int, patience: float) -> int:
    """The child's wait status; a child still running after ``patience`` seconds is killed
    (a lock the fork copied held), and the test fails instead of hanging."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child did not write within {patience} s")


def run_python(code: str, **env: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, **env}, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_configure_replaces_only_the_standard_streams_and_shutdown_puts_them_back(tmp_path: object) -> None:
    code = f"""
    import io, sys, hvdlog
    before, encoding, errors = sys.stdout, sys.stdout.encoding, sys.stdout.errors
    config = hvdlog.configure(root={str(tmp_path)!r}, job="t", stall_after=None)
    during = sys.stdout
    same = (during.encoding, during.errors) == (encoding, errors) and during.line_buffering
    kind = type(during.buffer).__name__
    hvdlog.shutdown()
    print(kind, same, sys.stdout is before)
    mine = io.StringIO()
    sys.stdout = mine
    hvdlog.configure(root={str(tmp_path)!r}, job="t", stall_after=None)
    kept = sys.stdout is mine
    hvdlog.shutdown()
    sys.stdout = sys.__stdout__
    print(kept)
    """
    ranked = {"HOROVOD_RANK": "0", "HOROVOD_SIZE": "1", "PYTHONIOENCODING": "latin-1:backslashreplace"}
    assert run_python(code, **ranked).split() == ["WholeWriter", "True", "True", "True"]


def test_whole_writer_reports_its_fd_and_terminal() -> None:
    read_end, write_end = os.pipe()
    writer = WholeWriter(write_end, "<pipe>")
    stream = io.TextIOWrapper(writer, encoding="utf-8", line_buffering=True)
    assert (stream.fileno(), stream.isatty(), stream.writable()) == (write_end, False, True)
    stream.write("é\n")
    assert os.read(read_end, 10) == "é\n".encode()
    os.close(write_end)
    os.close(read_end)

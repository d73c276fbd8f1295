"""``hvdlog watch``'s delivery against receivers that misbehave, and a spool under real faults (issue 45).

Every test runs the real watcher as a process over a finished job's files
(:func:`~support.watch_harness.crashed_job`: two alerts, a failure then job_finished, and the
watcher ends by itself). The receivers are real sockets on 127.0.0.1 (an SSH banner, a
redirect, a byte every 2 s, an answer of 128 MB); the read-only and full directories are real
tmpfs mounts (the suite runs as root).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.watch_harness import RawServer, Receiver, crashed_job, read_only, tmpfs, wait_for, watcher

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")  # the suite runs as root

SPOOL = "job7.hvdlog-watch.spool"


class _Run:
    """One watcher over ``root`` until it ends by itself: its exit status, alerts printed and stderr."""

    def __init__(self, tmp_path: Path, root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180) -> None:
        stderr = tmp_path / f"watch-{time.monotonic_ns()}.stderr"
        started = time.monotonic()
        process = watcher("--from-start", "--exit-when-finished", "--silent-after", "1", "--interval", "0.3", "--retries", "1",
                          *args, str(root), stderr=stderr, env=env)
        try:
            self.out, _ = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        self.seconds = time.monotonic() - started
        self.status = process.returncode
        self.err = stderr.read_text()
        self.printed = [json.loads(line) for line in self.out.splitlines() if line.startswith("{")]


def _spooled(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line)["alert"] for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _ssh_banner(connection: socket.socket) -> None:
    connection.sendall(b"SSH-2.0-x\r\n")


def test_a_bad_answer_never_stops_delivery(tmp_path: Path) -> None:
    """High 1: a receiver answering an SSH banner fails each try; its alerts are spooled, the other target still gets every alert."""
    crashed_job(tmp_path / "logs")
    bad, good = RawServer(_ssh_banner), Receiver()
    try:
        run = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(tmp_path / "spool"), "--webhook", bad.url, "--webhook", good.url)
    finally:
        bad.stop()
        good.stop()
    assert [a["kind"] for a in good.alerts()] == ["failure", "job_finished"], run.err
    assert [a["kind"] for a in _spooled(tmp_path / "spool" / SPOOL)] == ["failure", "job_finished"], run.err
    assert run.err.count("BadStatusLine") == 2 and run.status == 0, run.err


def test_an_alert_neither_delivered_nor_spooled_sets_the_exit_status(tmp_path: Path) -> None:
    """High 1: the receiver is down and the spool directory is read-only: said on stderr, exit 3 (was 0)."""
    crashed_job(tmp_path / "logs")
    receiver = Receiver(up=False)
    with tmpfs(tmp_path / "spool") as spool:
        read_only(spool)
        run = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), "--webhook", receiver.url)
    assert run.status == 3, run.err
    assert run.err.count("could not be delivered to webhook http://127.0.0.1:") == 2 and "nor spooled" in run.err
    assert "2 alert(s) could be neither delivered nor spooled" in run.err and "s3cr3t" not in run.err


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    """Medium 6: `302 Location: /target` is a failure that says so (no GET is sent, nothing counts as delivered); the alert is spooled."""
    crashed_job(tmp_path / "logs")
    server = RawServer(lambda c: c.sendall(b"HTTP/1.1 302 Found\r\nLocation: /target\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
    try:
        run = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(tmp_path / "spool"), "--webhook", server.url)
    finally:
        server.stop()
    methods = {head.split(b" ", 1)[0] for head in server.requests}
    assert methods == {b"POST"} and len(server.requests) >= 2, server.requests  # the spool is tried again: POSTs only
    assert run.err.count("HTTP 302: a redirect to http://127.0.0.1:") == 2 and "not followed" in run.err
    assert [a["kind"] for a in _spooled(tmp_path / "spool" / SPOOL)] == ["failure", "job_finished"]


def test_a_dripping_receiver_blocks_no_other_and_loses_nothing(tmp_path: Path) -> None:
    """Medium 7: a receiver sending one byte every 2 s is cut after 30 s and its alerts are spooled,
    the one in flight at exit too; the other target has both alerts at once (it had none)."""
    crashed_job(tmp_path / "logs")

    def drip(connection: socket.socket) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
            connection.sendall(bytes([byte]))
            time.sleep(2)

    slow, good = RawServer(drip), Receiver()
    stderr = tmp_path / "w.stderr"
    process = watcher("--from-start", "--exit-when-finished", "--silent-after", "1", "--interval", "0.3", "--retries", "1",
                      "--spool-dir", str(tmp_path / "spool"), "--webhook", slow.url, "--webhook", good.url, str(tmp_path / "logs"), stderr=stderr)
    try:
        wait_for(lambda: len(good.alerts()) == 2, 120, "both alerts at the other receiver")
        early = stderr.read_text()  # the slow receiver's first try is still running: it ends 30 s after it began
        process.wait(150)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        slow.stop()
        good.stop()
    err = stderr.read_text()
    assert "no complete answer" not in early and "not delivered" not in early, early
    assert process.returncode == 0, err
    assert "no complete answer within 30 s" in err and "the watcher stopped before it was sent" in err, err
    assert sorted(a["kind"] for a in _spooled(tmp_path / "spool" / SPOOL)) == ["failure", "job_finished"], err


def test_a_huge_answer_is_not_read(tmp_path: Path) -> None:
    """Medium 7: a 2xx answer of 128 MB: the watcher reads 64 KiB of it and hangs up (it read it all, holding it in memory)."""
    crashed_job(tmp_path / "logs")
    sent = [0]

    def huge(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (128 << 20))
        chunk = b"0" * (1 << 20)
        for _ in range(128):
            connection.sendall(chunk)
            sent[0] += len(chunk)

    server = RawServer(huge)
    try:
        run = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(tmp_path / "spool"), "--webhook", server.url)
    finally:
        server.stop()
    assert run.status == 0 and "not delivered" not in run.err, run.err
    assert sent[0] < 40 << 20, sent[0]  # two answers: what the socket buffers took before the watcher hung up
    assert not (tmp_path / "spool" / SPOOL).exists()


def test_a_read_only_spool_is_delivered_once(tmp_path: Path) -> None:
    """Medium 8: spooled alerts in a spool that became read-only are delivered once, not every 5 s."""
    crashed_job(tmp_path / "logs")
    receiver = Receiver(up=False)
    with tmpfs(tmp_path / "spool") as spool:
        first = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), "--webhook", receiver.url)
        assert len(_spooled(spool / SPOOL)) == 2, first.err
        read_only(spool)
        receiver.start()
        stderr = tmp_path / "again.stderr"
        process = watcher("--interval", "0.3", "--spool-dir", str(spool), "--webhook", receiver.url, str(tmp_path / "logs"), stderr=stderr)
        try:
            wait_for(lambda: len(receiver.bodies) >= 2, 60, "the spooled alerts")
            time.sleep(12)  # two more retry rounds (every 5 s)
        finally:
            process.terminate()
            process.wait(60)
            receiver.stop()
    assert [a["kind"] for a in receiver.alerts()] == ["failure", "job_finished"], stderr.read_text()
    assert "cannot rewrite" in stderr.read_text()


def test_a_half_line_left_by_a_full_disk_swallows_nothing(tmp_path: Path) -> None:
    """Low 22: a run whose spool disk is full (exit 3), then one with space: every alert spooled whole is delivered."""
    crashed_job(tmp_path / "logs", message="CUDA error: " + "x" * 3000)  # each entry is longer than a page: a full disk cuts one
    receiver = Receiver(up=False)
    args = ["--webhook", receiver.url]
    with tmpfs(tmp_path / "spool", size="64k") as spool:
        runs = [_Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), *args)]
        filler = spool / "filler"
        with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
            while True:  # every page taken; the spool file's last page keeps its free end
                handle.write(b"\0" * 4096)
        runs.append(_Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), *args))
        filler.unlink()
        runs.append(_Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), *args))
        receiver.start()
        runs.append(_Run(tmp_path, tmp_path / "logs", "--spool-dir", str(spool), *args))
    receiver.stop()
    kinds = [a["kind"] for a in receiver.alerts()]
    # failures: run 1's and run 3's spooled, run 4's live (run 2's cut entry swallowed run 3's); run 2's short
    # job_finished entry may still have fitted the last page
    assert kinds.count("failure") == 3 and kinds.count("job_finished") in (3, 4), [run.err for run in runs]
    assert [run.status for run in runs] == [0, 3, 0, 0], [run.err for run in runs]


def test_the_spool_is_the_watchers_own(tmp_path: Path) -> None:
    """Medium 11: with the job's folder read-only to the watcher, and no --spool-dir, undeliverable alerts are spooled
    in the watcher's state directory (they could not be spooled at all)."""
    receiver = Receiver(up=False)
    state = tmp_path / "state"
    with tmpfs(tmp_path / "logs") as root:
        crashed_job(root)
        read_only(root)
        run = _Run(tmp_path, root, "--webhook", receiver.url, env={"XDG_STATE_HOME": str(state)})
    spool = state / "hvdlog" / "watch-spool"
    assert run.status == 0 and [a["kind"] for a in _spooled(spool / SPOOL)] == ["failure", "job_finished"], run.err
    assert oct(spool.stat().st_mode & 0o777) == "0o700" and oct((spool / "hvdlog-watch.key").stat().st_mode & 0o777) == "0o600"


def test_planted_and_malformed_spool_entries_are_never_delivered(tmp_path: Path) -> None:
    """Medium 10 and High 1: a forged alert planted in the job's folder or in the spool, for the webhook's
    (public) key, is never sent; malformed entries are skipped and counted; real alerts still go out."""
    crashed_job(tmp_path / "logs")
    receiver = Receiver()
    state = tmp_path / "state"
    key = "webhook:" + hashlib.sha256(receiver.url.encode()).hexdigest()[:16]  # what `ps` lets a user compute
    forged = {"kind": "failure", "status": "firing", "job": "job7", "ranks": [0], "summary": "FORGED", "episode": "x", "time": "2026-01-01T00:00:00Z"}
    lines = [json.dumps({"target": key, "alert": forged}), json.dumps({"target": key, "alert": {}}), '{"target": "webh']
    (tmp_path / "logs" / "job7" / "hvdlog-watch.spool").write_text("\n".join(lines) + "\n")
    spool = state / "hvdlog" / "watch-spool"
    spool.mkdir(parents=True, mode=0o700)
    (spool / SPOOL).write_text("\n".join(lines) + "\n")
    try:
        run = _Run(tmp_path, tmp_path / "logs", "--webhook", receiver.url, "--webhook-format", "slack", env={"XDG_STATE_HOME": str(state)})
    finally:
        receiver.stop()
    texts = [body["text"] for body in receiver.bodies]
    assert len(texts) == 2 and not any("FORGED" in text for text in texts), (texts, run.err)
    assert "3 entries of" in run.err and "malformed or not signed by this watcher" in run.err and run.status == 0, run.err


def test_exec_whose_child_keeps_stdout_open(tmp_path: Path) -> None:
    """Low 24: a command that leaves a child holding its output is delivered when the command exits (it waited 60 s and failed)."""
    crashed_job(tmp_path / "logs")
    pids = tmp_path / "pids"
    command = f"cat >> {tmp_path / 'got'}; echo >> {tmp_path / 'got'}; sleep 100 & echo $! >> {pids}"
    try:
        run = _Run(tmp_path, tmp_path / "logs", "--spool-dir", str(tmp_path / "spool"), "--exec", command)
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            subprocess.run(["kill", pid], check=False)
    assert run.status == 0 and "not delivered" not in run.err and run.seconds < 40, (run.seconds, run.err)
    assert [json.loads(line)["kind"] for line in (tmp_path / "got").read_text().splitlines() if line] == ["failure", "job_finished"]

"""Logging must never hurt training: real processes, real faults (issue #10).

Each case runs a fresh Python process that calls ``hvdlog.configure()`` with native
capture on, injects one fault, and checks: the process exits 0 (or with its own code), the
console kept flowing, what was written before the fault is on disk in whole lines, drops
are counted and reported, and logging resumes when the cause goes away. Full and read-only
disks are real tmpfs mounts (we run as root); the table in docs/reliability.md is this file.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import orjson
import pytest
from corpus.tools_required import horovodrun
from support.tmpfs import tmpfs

from hvdlog import documents, layout

RANK_ENV = {"HOROVOD_RANK": "1", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_SIZE": "2", "HOROVOD_LOCAL_SIZE": "2"}
ARRIVAL = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")  # the suite runs as root


@pytest.fixture(name="small_disk")
def fixture_small_disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk") as disk:
        yield disk


def script(root: Path, body: str, **configure: object) -> str:
    settings = {"root": str(root), "job": "t", "stall_after": None, **configure}
    args = ", ".join(f"{key}={value!r}" for key, value in settings.items())
    return (
        "import hvdlog, os, sys, time, signal, subprocess\n"
        f"config = hvdlog.configure({args})\n"
        "log = hvdlog.get_logger()\n" + textwrap.dedent(body)
    )


def run(root: Path, body: str, env: dict[str, str] | None = None, timeout: float = 120, **configure: object) -> subprocess.CompletedProcess[bytes]:
    """One rank's process; returns its console output (stdout, stderr)."""
    return subprocess.run(
        [sys.executable, "-c", script(root, body, **configure)],
        capture_output=True, timeout=timeout, env={**os.environ, **RANK_ENV, **(env or {})}, check=False,
    )


def rank_files(root: Path, kind: str = "events") -> list[Path]:
    """The rank's files of one kind, oldest rotation first."""
    files = list((root / "t").glob(f"*/rank-1.{layout.KINDS[kind]}*"))
    return sorted(files, key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)


def events(root: Path) -> list[dict]:
    """Every JSON line of the rank, in order, but its exit record (tests/runtime/test_config.py checks it); fails on a partial line."""
    data = b"".join(p.read_bytes() for p in rank_files(root))
    assert not data or data.endswith(b"\n"), f"partial last line: {data[-80:]!r}"
    return [event for line in data.splitlines() if (event := orjson.loads(line)).get("event.action") != "process_exit"]


def native(root: Path, kind: str) -> list[bytes]:
    """Native lines of the rank without their arrival prefix; every line is whole and stamped."""
    data = b"".join(p.read_bytes() for p in rank_files(root, kind))
    assert not data or data.endswith(b"\n"), f"partial last line: {data[-80:]!r}"
    lines = data.splitlines()
    assert all(ARRIVAL.match(line) or line.startswith(b"[") for line in lines), lines[:5]
    return [ARRIVAL.sub(b"", line) for line in lines]


def numbered(lines: list[bytes] | list[str], pattern: str) -> list[int]:
    regex = re.compile(pattern)
    return [int(m.group(1)) for line in lines if (m := regex.search(line if isinstance(line, str) else line.decode()))]


def dropped_events(evs: list[dict], stream: str | None = None) -> list[dict]:
    return [e for e in evs if e.get("event.action") == "log_dropped" and e.get("horovod.launcher.stream") == stream]


class TestFullDisk:
    def test_disk_full(self, small_disk: Path) -> None:
        """The disk fills: no exception, no fragment, console keeps flowing, the loss is told once."""
        body = """
        for i in range(4000):
            log.info('line', i=i, pad='x' * 100)
            if i % 100 == 0:
                print('progress', i)
        print('finished', config.writer.total_dropped)
        """
        result = run(small_disk, body, max_bytes=0)
        assert result.returncode == 0, result.stderr[-2000:]
        assert b"finished" in result.stdout and numbered(result.stdout.splitlines(), r"progress (\d+)") == list(range(0, 4000, 100))
        evs = events(small_disk)
        # The log_dropped note is shorter than a line: it can fit in the space a dropped line
        # left in the last page (whether it does depends on line lengths, e.g. the pid's digits).
        notes = dropped_events(evs)
        assert len(notes) <= 1 and all(note["log.dropped"] >= 1 for note in notes)
        written = [e["extra"]["i"] for e in evs if e not in notes]
        assert written == list(range(len(written))) and 0 < len(written) < 4000  # whole lines, no gap before the fault
        dropped = int(result.stdout.split(b"finished ")[1].split()[0])
        assert dropped == 4000 - len(written)
        # One warning per episode: a note that got through ended one, and the next line began another.
        warnings = result.stderr.count(b"rank-1.jsonl: No space left on device; dropping lines")
        assert warnings == 1 + len(notes), result.stderr[-2000:]

    def test_disk_full_then_freed(self, small_disk: Path) -> None:
        """Space comes back: the JSON and native files resume, each with a log_dropped event giving the exact count."""
        (small_disk / "filler").write_bytes(b"\0" * 150_000)
        body = f"""
        i = 0
        while config.writer.total_dropped < 50:
            log.info('line', i=i); print('native', i); i += 1
        for _ in range(50):
            log.info('line', i=i); print('native', i); i += 1
        time.sleep(0.5)  # the capture process meets the full disk too
        os.remove({str(small_disk / 'filler')!r})
        for _ in range(100):
            log.info('line', i=i); print('native', i); i += 1
        time.sleep(0.3)
        print('total', i)
        """
        result = run(small_disk, body)
        assert result.returncode == 0, result.stderr[-2000:]
        total = int(result.stdout.split(b"total ")[1].split()[0])
        assert numbered(result.stdout.splitlines(), r"^native (\d+)$") == list(range(total))  # the console lost nothing
        evs = events(small_disk)
        lines = [e["extra"]["i"] for e in evs if e["message"] == "line"]
        missing = sorted(set(range(total)) - set(lines))
        assert missing and lines[-100:] == list(range(total - 100, total))  # resumed, last lines all there
        notes = dropped_events(evs)
        assert notes and sum(e["log.dropped"] for e in notes) == len(missing)
        assert all(e["event.reason"] == "ENOSPC" and e["log.level"] == "warning" for e in notes)
        native_seen = numbered(native(small_disk, "stdout"), r"^native (\d+)$")
        native_missing = sorted(set(range(total)) - set(native_seen))
        assert native_seen[-100:] == list(range(total - 100, total))
        assert sum(e["log.dropped"] for e in dropped_events(evs, "stdout")) == len(native_missing) > 0
        assert b"again;" in result.stderr  # the console is told when writing works again

    def test_watchdog_survives_a_full_disk(self, small_disk: Path) -> None:
        """Stall events lost while the disk is full do not stop the watchdog: the next stall is logged."""
        (small_disk / "filler").write_bytes(b"\0" * 200_000)
        body = f"""
        with hvdlog.step(1):
            pass
        while config.writer.total_dropped < 1:
            log.info('fill', pad='x' * 500)
        time.sleep(1.0)  # stalls while full
        os.remove({str(small_disk / 'filler')!r})
        with hvdlog.step(2):
            pass
        time.sleep(1.0)  # stalls again, with space
        """
        result = run(small_disk, body, stall_after=0.3)
        assert result.returncode == 0, result.stderr[-2000:]
        stalls = [e for e in events(small_disk) if e.get("event.action") == "stall"]
        assert any(e["step"] == 2 for e in stalls), [e.get("step") for e in stalls]
        assert b"Traceback" not in result.stderr


class TestReadOnly:
    def test_read_only_then_writable(self, small_disk: Path) -> None:
        """A read-only log root: events go to stderr, native lines are counted; both files start once writable."""
        (small_disk / "t").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        body = f"""
        for i in range(20):
            log.info('line', i=i); print('native', i)
        subprocess.run(['mount', '-o', 'remount,rw', {str(small_disk)!r}], check=True)
        time.sleep(1.1)  # the writers retry opening once a second
        for i in range(20, 40):
            log.info('line', i=i); print('native', i)
        time.sleep(1.1)
        print('native', 40)
        time.sleep(0.3)
        """
        result = run(small_disk, body)
        assert result.returncode == 0, result.stderr[-2000:]
        assert numbered(result.stdout.splitlines(), r"^native (\d+)$") == list(range(41))
        on_console = [orjson.loads(line)["extra"]["i"] for line in result.stderr.splitlines() if line.startswith(b"{")]
        in_file = [e["extra"]["i"] for e in events(small_disk) if e["message"] == "line"]
        assert on_console[:20] == list(range(20)) and in_file and sorted(on_console + in_file) == list(range(40))
        assert result.stderr.count(b"rank-1.jsonl: Read-only file system") == 1  # said once, not at every retry
        assert result.stderr.count(b"rank-1.stdout.log: Read-only file system") == 1
        evs = events(small_disk)
        seen = numbered(native(small_disk, "stdout"), r"^native (\d+)$")
        assert 40 in seen and sum(e["log.dropped"] for e in dropped_events(evs, "stdout")) == 41 - len(seen)


class TestCaptureProcess:
    def test_tee_killed_repeatedly(self, tmp_path: Path) -> None:
        """SIGKILL the capture process three times: prints never fail, a new one takes over each time."""
        body = """
        for i in range(300):
            print('p', i)
            log.info('step', i=i)
            if i in (50, 150, 250):
                time.sleep(0.1)
                os.kill(config.capture.process.pid, signal.SIGKILL)
                print('right after kill', i)
            time.sleep(0.005)
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        assert b"BrokenPipe" not in result.stderr and b"Traceback" not in result.stderr
        assert numbered(result.stdout.splitlines(), r"^p (\d+)$") == list(range(300))
        assert numbered(result.stdout.splitlines(), r"^right after kill (\d+)$") == [50, 150, 250]
        assert numbered(native(tmp_path / "logs", "stdout"), r"^p (\d+)$") == list(range(300))  # nothing lost in the file either
        restarts = [e for e in events(tmp_path / "logs") if e.get("event.action") == "capture_restarted"]
        assert [e["event.reason"] for e in restarts] == ["signal 9"] * 3

    def test_capture_that_keeps_dying_gives_the_console_back(self, tmp_path: Path) -> None:
        """Six deaths in a row: after five restarts fds 1 and 2 go back to the console; prints keep working."""
        body = """
        for kill in range(6):
            print('before kill', kill)
            time.sleep(0.4)
            os.kill(config.capture.process.pid, signal.SIGKILL)
        time.sleep(0.5)
        for i in range(50):
            print('after', i)
        os.write(2, b'stderr still works\\n')
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        assert numbered(result.stdout.splitlines(), r"^before kill (\d+)$") == list(range(6))
        assert numbered(result.stdout.splitlines(), r"^after (\d+)$") == list(range(50))
        assert b"stderr still works" in result.stderr and b"Traceback" not in result.stderr
        actions = [e.get("event.action") for e in events(tmp_path / "logs")]
        assert actions.count("capture_restarted") == 5 and actions.count("capture_stopped") == 1

    def test_console_gone(self, tmp_path: Path) -> None:
        """The launcher's end of stdout closes (terminal gone): prints never fail, the file keeps everything."""
        read_end, write_end = os.pipe()
        body = """
        time.sleep(0.3)
        for i in range(200):
            print('line', i)
        log.info('done')
        """
        rank = subprocess.Popen([sys.executable, "-c", script(tmp_path / "logs", body)], stdout=write_end, stderr=subprocess.PIPE,
                                env={**os.environ, **RANK_ENV})
        os.close(write_end)
        os.close(read_end)  # nobody reads the console any more
        _, err = rank.communicate(timeout=60)
        assert rank.returncode == 0, err[-2000:]
        assert b"BrokenPipe" not in err and b"Traceback" not in err
        assert numbered(native(tmp_path / "logs", "stdout"), r"^line (\d+)$") == list(range(200))
        assert events(tmp_path / "logs")[-1]["message"] == "done"

    def test_forked_child_holds_the_pipes_at_shutdown(self, tmp_path: Path) -> None:
        """shutdown() returns in < 1 s while a child keeps the pipes; nothing already written is lost."""
        body = """
        child = os.fork()
        if child == 0:
            time.sleep(2.0)
            print('child after parent shutdown', flush=True)
            os._exit(0)
        for i in range(100):
            print('parent', i)
        sys.stdout.write('no newline at the end'); sys.stdout.flush()
        os.write(2, b'stderr line\\n')
        started = time.monotonic()
        hvdlog.shutdown()
        print('shutdown took', time.monotonic() - started)
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        took = float(result.stdout.split(b"shutdown took ")[1].split()[0])
        assert took < 1.0
        root = tmp_path / "logs"
        deadline = time.monotonic() + 10
        while b"child after" not in b"".join(native(root, "stdout")) and time.monotonic() < deadline:
            time.sleep(0.1)
        lines = native(root, "stdout")
        assert numbered(lines, r"^parent (\d+)$") == list(range(100))
        assert b"no newline at the end" in lines and b"child after parent shutdown" in lines
        assert native(root, "stderr") == [b"stderr line"]

    def test_one_light_capture_process(self, tmp_path: Path) -> None:
        """One capture process per rank for both streams, running the stdlib-only script."""
        body = """
        import glob
        def parent_of(p):
            try:  # a process of the busy machine may end between the listing and the read
                return open(p + '/stat').read().rsplit(') ', 1)[1].split()[1]
            except OSError:
                return None
        children = [p for p in glob.glob('/proc/[0-9]*') if parent_of(p) == str(os.getpid())]
        tees = [p for p in children if b'runtime/tee.py' in open(p + '/cmdline', 'rb').read()]
        rss = [int(line.split()[1]) for line in open(tees[0] + '/status') if line.startswith('VmRSS')][0]
        print('children', len(children), 'tees', len(tees), 'rss_kb', rss)
        print('cmd', open(tees[0] + '/cmdline', 'rb').read().split(b'\\0')[1:3])
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        assert b"children 1 tees 1" in result.stdout
        assert b"cmd [b'-I', b'-S']" in result.stdout
        assert int(result.stdout.split(b"rss_kb ")[1].split()[0]) < 20_000

    def test_capture_imports_only_the_stdlib(self, tmp_path: Path) -> None:
        """The capture script, run as the capture runs it, imports no hvdlog package, structlog or orjson."""
        from hvdlog.runtime.capture import TEE_SCRIPT

        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        control_read, control_write = os.pipe()
        status_read, status_write = os.pipe()
        spec = {"stdout_fd": out_read, "stderr_fd": err_read, "control_fd": control_read, "status_fd": status_write,
                "stdout_file": str(tmp_path / "o.log"), "stderr_file": str(tmp_path / "e.log")}
        tee = subprocess.Popen([sys.executable, "-I", "-S", "-X", "importtime", TEE_SCRIPT, orjson.dumps(spec).decode()],
                               pass_fds=(out_read, err_read, control_read, status_write), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for fd in (out_read, err_read, control_read, status_write):
            os.close(fd)
        os.write(out_write, b"hello\n")
        for fd in (out_write, err_write, control_write):
            os.close(fd)
        _, imports = tee.communicate(timeout=30)
        os.close(status_read)
        assert tee.returncode == 0 and b"| select" in imports
        modules = {line.rsplit(b"|", 1)[1].strip().split(b".")[0] for line in imports.splitlines() if line.startswith(b"import time:")}
        assert not modules & {b"hvdlog", b"structlog", b"orjson", b"torch", b"horovod"}, modules
        assert ARRIVAL.match((tmp_path / "o.log").read_bytes())


    def test_fork_while_another_thread_logs(self, tmp_path: Path) -> None:
        """Forked children (DataLoader workers) log even if a thread held the writer's lock at the fork."""
        body = """
        import threading
        done = threading.Event()
        def spam():
            while not done.is_set():
                log.info('thread')
        thread = threading.Thread(target=spam); thread.start()
        for n in range(30):
            pid = os.fork()
            if pid == 0:
                log.info('child', n=n); os._exit(0)
            os.waitpid(pid, 0)
        done.set(); thread.join()
        """
        result = run(tmp_path / "logs", body, timeout=90)
        assert result.returncode == 0, result.stderr[-2000:]
        assert sorted(e["extra"]["n"] for e in events(tmp_path / "logs") if e["message"] == "child") == list(range(30))


    def test_sigterm_while_logging(self, tmp_path: Path) -> None:
        """SIGTERM arriving mid-write: the hook's event is written and the rank still dies of SIGTERM."""
        body = """
        import threading
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
        while True:
            log.info('busy', pad='x' * 2000)
        """
        result = run(tmp_path / "logs", body, timeout=60)
        assert result.returncode == -signal.SIGTERM, result.stderr[-2000:]
        evs = events(tmp_path / "logs")
        assert evs[-1]["event.action"] == "signal" or any(e.get("event.action") == "signal" for e in evs)


class TestBadInput:
    def test_surrogates_and_invalid_utf8(self, tmp_path: Path) -> None:
        """Undecodable file names (surrogates), lone surrogates and invalid UTF-8 never raise."""
        body = r"""
        name = os.fsdecode(b'bad\xff.txt')
        log.warning(name, path=name, lone='\ud800', raw=b'\xfe\xff')
        log.warning('after', i=1)
        os.write(1, b'native \xff\xfe invalid\n')
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        first, after = events(tmp_path / "logs")
        assert first["message"] == "bad\\xff.txt" and first["extra"]["path"] == "bad\\xff.txt"
        assert first["extra"]["lone"] == "\\ud800" and after["message"] == "after"
        assert native(tmp_path / "logs", "stdout") == [b"native \xff\xfe invalid"]

    def test_ten_megabyte_field(self, tmp_path: Path) -> None:
        """A 10 MB field gives one whole, shippable line (strings cut, tagged), and logging goes on."""
        result = run(tmp_path / "logs", "log.info('big', blob='x' * 10_000_000)\nlog.info('next')")
        assert result.returncode == 0, result.stderr[-2000:]
        big, following = events(tmp_path / "logs")
        assert "_hvdlog_truncated" in big["tags"] and len(big["extra"]["blob"]) < 100_000
        assert "characters cut" in big["extra"]["blob"] and following["message"] == "next"
        assert max(len(line) for line in rank_files(tmp_path / "logs")[0].read_bytes().splitlines()) <= 1 << 20

    def test_unserialisable_objects(self, tmp_path: Path) -> None:
        """Objects whose str() raises, cycles, huge ints, non-str keys, a bad format: all logged, none raise."""
        body = """
        class Evil:
            def __str__(self): raise RuntimeError('no str for you')
            def tolist(self): raise KeyError('nope')
        loop = {}; loop['self'] = loop
        log.info('evil', obj=Evil())
        log.info('cycle', loop=loop)
        log.info('huge', n=2 ** 100, keys={1: 'a', (2, 3): 'b'})
        log.info('bad format %d', 'not a number')
        logging_ok = hvdlog.get_logger().bind(x=Evil()); logging_ok.error('bound evil')
        log.info('still fine')
        """
        result = run(tmp_path / "logs", body)
        assert result.returncode == 0, result.stderr[-2000:]
        evs = events(tmp_path / "logs")
        assert [e["message"] for e in evs] == ["evil", "cycle", "huge", "bad format %d", "bound evil", "still fine"]
        assert evs[0]["extra"]["obj"] == "<unrepresentable Evil>"
        assert evs[2]["extra"]["n"] == str(2**100)
        assert b"<nested too deep>" in orjson.dumps(evs[1])
        assert "_hvdlog_render_failure" in evs[3]["tags"]


class TestRedaction:
    SECRET = "hf_s3cr3t/Value+xyz=42"  # noqa: S105 - a made-up secret the tests must see redacted

    def test_split_url_and_base64_forms(self, tmp_path: Path) -> None:
        """A secret split 200 ms apart, URL-encoded, base64 and inside Basic auth: redacted in files and on the console."""
        secret = self.SECRET
        basic = base64.b64encode(f"alice:{secret}".encode()).decode()
        body = f"""
        os.write(1, b'env dump: HF_TOKEN={secret[:7]}')
        time.sleep(0.2)
        os.write(1, b'{secret[7:]} end\\n')
        print('url: https://x/?t={quote(secret, safe="")}&u={quote_plus(secret)}')
        print('Authorization: Basic {basic}')
        print('plain b64 {base64.b64encode(secret.encode()).decode()}')
        print('agent at', os.environ['SSH_AUTH_SOCK'], 'note', os.environ['NOTE_PASSWORD'])
        log.info('header', auth='Basic {basic}', url='{quote_plus(secret)}', message2='{secret}')
        log.info('message', value='message')
        """
        env = {"HF_TOKEN": secret, "SSH_AUTH_SOCK": "/tmp/ssh-abcdefgh/agent.4242", "NOTE_PASSWORD": "message"}
        result = run(tmp_path / "logs", body, env=env)
        assert result.returncode == 0, result.stderr[-2000:]
        root = tmp_path / "logs"
        files = b"".join(p.read_bytes() for kind in ("events", "stdout", "stderr") for p in rank_files(root, kind))
        for text in (files, result.stdout, result.stderr):
            for form in (secret, quote(secret, safe=""), quote_plus(secret), basic, base64.b64encode(secret.encode()).decode()):
                assert form.encode() not in text, form
        lines = native(root, "stdout")
        assert lines[0] == b"env dump: HF_TOKEN=[REDACTED] end"
        assert b"/tmp/ssh-abcdefgh/agent.4242" in lines[-1] and lines[-1].endswith(b"note message")
        header, message = events(root)
        assert header["extra"]["message2"] == "[REDACTED]" and "[REDACTED]" in header["extra"]["auth"]
        assert message["message"] == "message" and message["extra"] == {"value": "message"}  # keys and common words kept


class TestFiles:
    def test_rotation_never_splits_a_line(self, tmp_path: Path) -> None:
        """Lines written in odd-sized pieces through 10,000 rotations: every rotated file holds whole lines."""
        root = tmp_path / "logs"
        seen: list[bytes] = []
        stop = threading.Event()

        def watch() -> None:  # read each rotated file as it appears (it never changes after rotation)
            last = None
            path = root / "t" / socket.gethostname() / "rank-1.stdout.log.1"
            while not stop.is_set():
                with contextlib.suppress(OSError), open(path, "rb") as handle:
                    info = os.fstat(handle.fileno())
                    if (info.st_ino, info.st_ctime_ns) != last:
                        last = (info.st_ino, info.st_ctime_ns)
                        seen.append(handle.read())

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        body = """
        line = lambda n: b'line %06d ' % n + b'x' * 40 + b'\\n'
        data = b''.join(line(n) for n in range(60_000))
        offset, step = 0, 1
        while offset < len(data):
            os.write(1, data[offset:offset + 97 * step]); offset += 97 * step; step = step % 7 + 1
        """
        # ~69 bytes per stamped line, 6 lines per file: 10,000 rotations.
        result = run(root, body, max_bytes=400, backups=2)
        stop.set()
        watcher.join()
        assert result.returncode == 0, result.stderr[-2000:]
        whole = re.compile(rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z line \d{6} x{40}\n)+")
        files = [content for content in seen + [p.read_bytes() for p in rank_files(root, "stdout")] if content]
        assert len(seen) > 50  # the watcher saw many of the ~12,000 rotations, not just the last few
        split = [content[:120] + b" ... " + content[-120:] for content in files if not whole.fullmatch(content)]
        assert not split, split[:3]

    def test_planted_symlink_is_not_followed(self, tmp_path: Path) -> None:
        """A symlink where the rank's file goes: never followed; one warning; events to stderr."""
        host_dir = tmp_path / "logs" / "t" / socket.gethostname()
        host_dir.mkdir(parents=True)
        victim = tmp_path / "victim"
        victim.write_bytes(b"precious\n")
        (host_dir / "rank-1.jsonl").symlink_to(victim)
        (host_dir / "rank-1.stdout.log").symlink_to(victim)
        result = run(tmp_path / "logs", "log.info('hello')\nprint('printed')\nlog.info('again')")
        assert result.returncode == 0, result.stderr[-2000:]
        assert victim.read_bytes() == b"precious\n"
        assert result.stderr.count(b"is a symbolic link: refusing to follow it") == 2  # JSON writer and capture, once each
        assert [orjson.loads(line)["message"] for line in result.stderr.splitlines() if line.startswith(b"{")] == [
            "hello", "again", "process exit: status 0 (the script ended)"]
        assert b"printed" in result.stdout

    def test_foreign_owned_root_is_refused(self, tmp_path: Path) -> None:
        """A log root owned by another (non-root) user is not used: one warning, events on stderr, no capture there."""
        root = tmp_path / "logs"
        root.mkdir()
        os.chown(root, 4242, 4242)
        result = run(root, "log.info('hello')\nprint('printed')")
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stderr.count(b"belongs to another user (uid 4242)") == 1
        assert list(root.iterdir()) == []
        assert b'"message":"hello"' in result.stderr and b"printed" in result.stdout

    @pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o640, 0o750), (0o077, 0o600, 0o700)])
    def test_modes(self, tmp_path: Path, umask: int, file_mode: int, dir_mode: int) -> None:
        """Files 0640 and directories 0750, or stricter when the umask says so."""
        result = run(tmp_path / "logs", f"os.umask({umask})\nhvdlog.configure(root={str(tmp_path / 'logs2')!r}, job='t')\nhvdlog.get_logger().info('x')")
        assert result.returncode == 0, result.stderr[-2000:]
        for path in (tmp_path / "logs2").rglob("*"):
            assert path.stat().st_mode & 0o777 == (dir_mode if path.is_dir() else file_mode), path


def test_job_id_never_starts_with_a_dash() -> None:
    """`python -c` (argv[0] == '-c') and odd HVDLOG_JOB values still give a usable path component."""
    import hvdlog

    assert hvdlog.default_job_id({}, script="-c").startswith("c-")
    # a name that had to change to be path-safe carries its hash: `--rm -rf` and `rm -rf` stay apart
    assert re.fullmatch(r"rm--rf-[0-9a-f]{10}", hvdlog.default_job_id({"HVDLOG_JOB": "--rm -rf"}))
    assert re.fullmatch(r"job-[0-9a-f]{10}", hvdlog.default_job_id({"HVDLOG_JOB": "../.."}))  # nothing readable: unique by its hash


@pytest.mark.horovod
def test_horovodrun_log_disk_fills_mid_training(tmp_path: Path) -> None:
    """A real 2-rank `horovodrun` whose log root fills up mid-training (then frees): training completes."""
    train = Path(__file__).resolve().parents[2] / "training" / "train.py"
    with tmpfs(tmp_path / "disk", size="1m") as disk:
        cmd = [
            str(Path(horovodrun())), "-np", "2", "-H", "localhost:2", "--gloo",
            sys.executable, str(train), "--log-root", str(disk), "--job", "full", "--epochs", "1",
            "--steps-per-epoch", "60", "--straggler-rank", "0", "--straggler-delay", "0.1",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "HOROVOD_LOG_LEVEL": "trace"})
        try:
            rank0 = disk / "full" / socket.gethostname() / "rank-0.jsonl"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (rank0.exists() and b'"step":5,' in rank0.read_bytes()):
                time.sleep(0.1)
            filler = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)  # fill the disk for real
            with contextlib.suppress(OSError):
                while True:
                    os.write(filler, b"\0" * 4096)
            os.close(filler)
            full_at = time.monotonic()
            time.sleep(1.5)
            (disk / "filler").unlink()
            out, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, (out[-2000:] + err[-3000:]).decode(errors="replace")
        assert b"Traceback" not in out + err
        for rank in (0, 1):
            (path,) = (disk / "full").glob(f"*/rank-{rank}.jsonl")
            data = path.read_bytes()
            assert data.endswith(b"\n")
            evs = [orjson.loads(line) for line in data.splitlines()]  # whole lines only
            steps = [e["step"] for e in evs if e["message"] == "train step"]
            assert steps[-1] == 60 and any(e["message"] == "training done" for e in evs)  # finished, and logged again
            assert len(steps) < 60, f"rank {rank}: nothing was lost: the disk never filled during training"
            dropped = [e for e in evs if e.get("event.action") == "log_dropped"]
            # Only train steps were logged while the disk was full: the note counts exactly those.
            assert sum(e["log.dropped"] for e in dropped if "horovod.launcher.stream" not in e) == 60 - len(steps)
        assert full_at


def test_grep_orders_native_and_json_events_by_time(tmp_path: Path) -> None:
    """Native lines carry their arrival time, so `hvdlog grep` interleaves them with JSON events in real order.
    (A second between the writes: under load the capture process may read a line a few hundred ms late.)"""
    body = """
    log.info('json 1'); time.sleep(1.0)
    print('native print 2'); time.sleep(1.0)
    log.warning('json 3'); time.sleep(1.0)
    os.write(2, b'Traceback (most recent call last):\\n  File "x.py", line 1, in <module>\\nValueError: native 4\\n'); time.sleep(1.0)
    log.error('json 5'); time.sleep(1.0)
    print('native print 6')
    """
    result = run(tmp_path / "logs", body)
    assert result.returncode == 0, result.stderr[-2000:]
    grep = subprocess.run(
        [sys.executable, "-c", "from hvdlog.cli.main import main; main()", "grep", "--json", str(tmp_path / "logs")],
        capture_output=True, text=True, check=False,
    )
    assert grep.returncode == 0, grep.stderr
    docs = [orjson.loads(line) for line in grep.stdout.splitlines()]
    order = [re.search(r"(json|native print|ValueError: native) (\d)", d["message"]) for d in docs]
    assert [int(m.group(2)) for m in order if m] == [1, 2, 3, 4, 5, 6], [d["message"] for d in docs]
    times = [d["@timestamp"] for d in docs]
    assert all(t.endswith("Z") for t in times), times
    # Every source orders by the millisecond (documents.sort_key, as Elasticsearch's `date` does):
    # within one millisecond, the exit record and the last native line keep their file order.
    millis = [documents.timestamp_millis(t) for t in times]
    assert millis == sorted(millis), times

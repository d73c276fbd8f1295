"""Real parts for the ``hvdlog watch`` tests: a webhook receiver on loopback, a training job, the watcher.

:class:`Receiver` is ``http.server`` in a thread on 127.0.0.1 that keeps every JSON body it
gets; it can start down (its port reserved, nothing listening) and come up later on the same
port. :func:`training_job` starts ``training/train.py`` under ``horovodrun --gloo``;
:func:`watcher` starts the in-tree ``hvdlog watch``. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from corpus.tools_required import horovodrun
from support.tmpfs import read_only
from support.tmpfs import tmpfs as real_tmpfs

REPO = Path(__file__).resolve().parents[2]
#: SIGINT is Ctrl-C's KeyboardInterrupt in the watcher whoever started the suite: a suite run as a
#: background job (`make test &`, `nohup`) hands its children SIGINT ignored, and Python keeps that.
IN_TREE = [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); from hvdlog.cli.main import main; main()"]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC"}

__all__ = ["ENV", "IN_TREE", "REPO", "IndependentRanks", "RawServer", "Receiver", "Shipper", "crashed_job", "free_port", "rank_events",
           "read_only", "tmpfs", "training_job", "wait_for", "watcher"]


def free_port() -> int:
    """A loopback port nothing listens on (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Receiver:
    """A webhook receiver: every POSTed JSON body, in order, with the path it came to."""

    def __init__(self, port: int | None = None, up: bool = True) -> None:
        self.port = port or free_port()
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        if up:
            self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/s3cr3t-token"

    def start(self) -> None:
        """Listen (again) on the port."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                owner.bodies.append(json.loads(self.rfile.read(length)))
                owner.paths.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="webhook receiver").start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def alerts(self, kind: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        """The alerts received so far, of one kind and status when given."""
        return [b for b in list(self.bodies) if (kind is None or b.get("kind") == kind) and (status is None or b.get("status") == status)]


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.2) -> Any:
    """Poll until ``predicate()`` is truthy (and return it); fail after ``timeout`` seconds saying what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def training_job(root: Path, job: str, *flags: str, np: int = 2) -> subprocess.Popen[bytes]:
    """``horovodrun -np 2 --gloo python training/train.py`` writing under ``root``; console in ``root/<job>.console``."""
    exe = Path(horovodrun())
    root.mkdir(parents=True, exist_ok=True)
    command = [str(exe), "-np", str(np), "--gloo", sys.executable, str(REPO / "training" / "train.py"),
               "--log-root", str(root), "--job", job, "--epochs", "1", *flags]
    with open(root / f"{job}.console", "wb") as console:
        return subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)


def watcher(*args: str, stderr: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The in-tree ``hvdlog watch --json ...``; its stderr goes to a file (read it for the warnings)."""
    with open(stderr, "w") as err:
        return subprocess.Popen([*IN_TREE, "watch", "--json", *args], stdout=subprocess.PIPE, stderr=err, text=True, env={**ENV, **(env or {})})


class RawServer:
    """A TCP server on 127.0.0.1 for the receivers an HTTP library will not play: each connection's
    request (head and body) is read and kept, then ``answer(connection)`` writes whatever it likes."""

    def __init__(self, answer: Callable[[socket.socket], None]) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True, name="raw receiver").start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/s3cr3t-token"

    def _serve(self) -> None:
        self._server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data and (chunk := connection.recv(65536)):
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length and (chunk := connection.recv(65536)):
                body += chunk
            self.requests.append(head)
            self.answer(connection)

    def stop(self) -> None:
        self._stop.set()
        self._server.close()


def crashed_job(root: Path, job: str = "job7", message: str = "CUDA error: an illegal memory access") -> None:
    """A finished 2-rank job's files under ``root``: four steps each, then rank 1's uncaught exception.

    Watched with ``--from-start --exit-when-finished --silent-after 1`` it gives two alerts (the
    failure, then job_finished) and the watcher ends by itself.
    """
    start = datetime.now(timezone.utc) - timedelta(seconds=30)
    for rank in (0, 1):
        path = root / job / f"node{rank}" / f"rank-{rank}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        base = {"rank": rank, "size": 2, "job": job, "host.name": f"node{rank}", "process.pid": 40 + rank}
        lines = [{"@timestamp": _stamp(start, step), "log.level": "info", "message": "train step", "step": step, **base} for step in range(1, 5)]
        if rank == 1:
            lines.append({"@timestamp": _stamp(start, 5), "log.level": "critical", "message": "uncaught exception", "step": 5,
                          "event.action": "uncaught_exception", "error.type": "RuntimeError", "error.message": message, **base})
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _stamp(start: datetime, seconds: float) -> str:
    return (start + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def tmpfs(path: Path, size: str = "1m") -> contextlib.AbstractContextManager[Path]:
    """A real small filesystem at ``path``, only for its owner (the watcher's spool dirs)."""
    return real_tmpfs(path, size, mode="0700")


def rank_events(root: Path, job: str, rank: int) -> list[dict[str, Any]]:
    """The JSON events a rank wrote so far (whole lines only)."""
    events = []
    for path in root.glob(f"{job}/*/rank-{rank}.jsonl"):
        data = path.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].splitlines():
            events.append(json.loads(line))
    return events


class IndependentRanks:
    """Ranks started one by one around Horovod's own rendezvous server, as ``srun`` (without
    ``--kill-on-bad-exit``) would: when one dies, nothing tears the others down, so a hung rank
    keeps logging its stall reports while a killed one is silent. ``horovodrun`` instead
    terminates every rank as soon as one exits."""

    def __init__(self, root: Path, job: str, *flags: str, np: int = 2) -> None:
        from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
        from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars
        from horovod.runner.http.http_server import RendezvousServer

        root.mkdir(parents=True, exist_ok=True)
        self.rendezvous = RendezvousServer(False)
        plan = get_host_assignments(parse_hosts(f"localhost:{np}"), np)
        port = self.rendezvous.start()
        self.rendezvous.init(plan)
        common = {k: str(v) for k, v in create_run_env_vars("127.0.0.1", ["lo"], port).items()}
        command = [sys.executable, str(REPO / "training" / "train.py"), "--log-root", str(root), "--job", job, "--epochs", "1", *flags]
        self.processes: list[subprocess.Popen[bytes]] = []
        for slot in plan:
            env = {**ENV, **common, **create_slot_env_vars(slot), "PYTHONUNBUFFERED": "1"}
            with open(root / f"{job}.rank{slot.rank}.console", "wb") as console:
                self.processes.append(subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, env=env))

    def stop(self) -> None:
        """Kill what is left and stop the rendezvous server."""
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait(30)
        self.rendezvous.stop()


class Shipper:
    """Files to Elasticsearch while the job runs: what Filebeat + Logstash do, with hvdlog's own parser.

    A thread follows the job's files (the parser ``hvdlog parse`` and the Logstash filter share)
    and bulk-indexes each poll's documents into ``index``, as a shipper would, a little late.
    """

    def __init__(self, es_url: str, index: str, root: Path, interval: float = 1.0) -> None:
        from elasticsearch import Elasticsearch
        from hvdlog.elastic.templates import mappings
        from hvdlog.query.files import FileSource

        self.es = Elasticsearch(es_url, request_timeout=60)
        self.index = index
        self.es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
        self.source = FileSource([root], timezone="UTC", warn=lambda _m: None)
        self.interval = interval
        self.shipped = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="shipper")
        self.thread.start()

    def _run(self) -> None:
        import queue

        from elasticsearch.helpers import bulk

        found: queue.Queue[dict[str, Any]] = queue.Queue()

        def read() -> None:
            for doc in self.source.follow(self.source_spec(), self.interval / 2, from_start=True, wait=True):
                found.put(doc)

        threading.Thread(target=read, daemon=True, name="shipper reader").start()
        while not self._stop.wait(self.interval):
            batch = []
            while not found.empty():
                doc = found.get()
                if doc.get("@timestamp"):
                    batch.append(doc)
            if batch:
                bulk(self.es, ({"_op_type": "index", "_index": self.index, "_source": d} for d in batch), refresh=True)
                self.shipped += len(batch)

    @staticmethod
    def source_spec() -> Any:
        from hvdlog.query.spec import Filter

        return Filter()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.es.indices.delete(index=self.index, ignore_unavailable=True)
        self.es.close()

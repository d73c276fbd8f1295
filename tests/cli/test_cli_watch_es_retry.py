"""``watch --es`` through an Elasticsearch outage, and where it spools (issue 45, Medium 12 and Low 25).

The real test Elasticsearch sits behind a TCP forwarder that is down when the watcher starts
(connection refused on every poll, as while Elasticsearch restarts). The watcher must say it
retries and keep going; once the forwarder is up, a crash indexed then is alerted. The crash's
``log.file.path`` names an existing job folder: an alert for a dead webhook is spooled in the
watcher's own state directory, never there.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from support.tcp_forwarder import forwarder
from support.watch_harness import Receiver, free_port, wait_for, watcher


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _doc(rank: int, step: int, path: Path, **extra: Any) -> dict[str, Any]:
    return {"@timestamp": _now(), "message": "train step", "rank": rank, "size": 2, "job": "esjob", "step": step,
            "host": {"name": f"node{rank}"}, "process": {"pid": 40 + rank}, "log": {"level": "info", "file": {"path": str(path)}}, **extra}


def test_watch_es_retries_and_never_spools_into_a_documents_folder(tmp_path: Path, es_url: str) -> None:
    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings

    index = f"hvdlog-watch-retry-{os.getpid()}"
    host, _, port = es_url.split("//", 1)[1].rstrip("/").partition(":")
    victim = tmp_path / "victim" / "esjob" / "node1"
    victim.mkdir(parents=True)
    (victim / "rank-1.jsonl").write_text("")
    receiver, dead = Receiver(), Receiver(up=False)
    proxy = free_port()
    stderr, state = tmp_path / "watch.stderr", tmp_path / "state"
    es = Elasticsearch(es_url, request_timeout=120)
    es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    process = watcher("--interval", "0.5", "--retries", "1", "--silent-after", "60", "--es", f"http://127.0.0.1:{proxy}", "--index", index,
                      "--webhook", receiver.url, "--webhook", dead.url, stderr=stderr, env={"XDG_STATE_HOME": str(state)})
    try:
        wait_for(lambda: "retrying in 2 s" in stderr.read_text(), 90, "the watcher to say it retries")
        assert process.poll() is None, stderr.read_text()  # it used to end at the first failed poll
        with forwarder(proxy, (host, int(port))):
            wait_for(lambda: stderr.read_text().count("retrying in") < 30 and "watching job" in _index_steps(es, index, victim, stderr),
                     120, "the watcher to see the job after the outage", poll=1.0)
            crash = _doc(1, 3, victim / "rank-1.jsonl", message="uncaught exception", event={"action": "uncaught_exception"},
                         error={"type": "RuntimeError", "message": "CUDA error: after the outage"})
            crash["log"]["level"] = "critical"
            es.index(index=index, document=crash, refresh=True)
            wait_for(lambda: receiver.alerts("failure"), 120, "the failure alert")
            wait_for(lambda: (state / "hvdlog" / "watch-spool" / "esjob.hvdlog-watch.spool").exists(), 60, "the dead webhook's spool")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)
        receiver.stop()
        es.options(ignore_status=404).indices.delete(index=index)
        es.close()
    assert "CUDA error: after the outage" in receiver.alerts("failure")[0]["summary"]
    assert sorted(p.name for p in victim.parent.rglob("*")) == ["node1", "rank-1.jsonl"]  # nothing spooled in the document's folder


def _index_steps(es: Any, index: str, victim: Path, stderr: Path) -> str:
    """One step from each rank (the watcher picks the job up), then what the watcher said so far."""
    for rank in (0, 1):
        es.index(index=index, document=_doc(rank, 1, victim.parent / f"node{rank}" / f"rank-{rank}.jsonl"), refresh=True)
    return stderr.read_text()

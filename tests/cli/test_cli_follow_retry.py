"""``grep -f --es`` keeps following through an Elasticsearch outage (issue #23).

A real Elasticsearch behind a plain TCP forwarder on another port: the forwarder is down when
``grep -f`` starts (connection refused, as while Elasticsearch restarts), so every poll fails;
grep must say it retries, with growing delays, and print an event indexed once the forwarder
is up. It used to give up at the first failed poll.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from support.tcp_forwarder import forwarder

REPO = Path(__file__).resolve().parents[2]
INDEX = "hvdlog-retry-test"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_following(port: int) -> tuple[subprocess.Popen[str], queue.Queue[str], queue.Queue[str]]:
    """``grep -f --es`` on 127.0.0.1:port, with its stdout and stderr lines in queues."""
    command = [sys.executable, "-m", "hvdlog", "grep", "-f", "--interval", "0.2", "--timeout", "30", "--json",
               "after the outage", "--es", f"http://127.0.0.1:{port}", "--index", INDEX]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    errors: queue.Queue[str] = queue.Queue()
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [errors.put(line) for line in process.stderr], daemon=True).start()  # type: ignore[union-attr]
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    return process, lines, errors


def wait_for_retries(process: subprocess.Popen[str], errors: queue.Queue[str]) -> list[str]:
    """stderr until grep said it retries after 1 s and after 2 s (or 60 s passed)."""
    said: list[str] = []
    deadline = time.monotonic() + 60
    while not any("retrying in 2 s" in line for line in said) and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            said.append(errors.get(timeout=1))
    assert any("retrying in 1 s" in line for line in said) and any("retrying in 2 s" in line for line in said), said
    assert process.poll() is None, said  # still following
    return said


def test_follow_keeps_retrying_while_unreachable() -> None:
    """Connection refused on every poll: grep says so with growing delays and keeps following."""
    process, _, errors = start_following(free_port())
    try:
        said = wait_for_retries(process, errors)
        assert all(line.startswith("hvdlog: warning:") or "retrying" not in line for line in said), said
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.horovod
def test_follow_prints_events_after_the_outage(es_url: str) -> None:
    """The same, then Elasticsearch is reachable again: an event indexed then is printed."""
    from elasticsearch import Elasticsearch

    host, _, port = es_url.split("//", 1)[1].rstrip("/").partition(":")
    with Elasticsearch(es_url, request_timeout=120) as es:  # made now: indexing later is quick, so the event's time is "now"
        es.options(ignore_status=400).indices.create(index=INDEX, mappings={"properties": {"@timestamp": {"type": "date"}}})
    proxy = free_port()
    process, lines, errors = start_following(proxy)
    try:
        wait_for_retries(process, errors)
        with forwarder(proxy, (host, int(port))):
            now = datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")
            with Elasticsearch(es_url, request_timeout=120) as es:  # a new index on a loaded machine
                document = {"@timestamp": now, "message": "after the outage", "rank": 3, "log": {"level": "info"}}
                es.index(index=INDEX, document=document, refresh=True)
            try:
                line = lines.get(timeout=90)
            except queue.Empty:
                raise AssertionError(f"nothing printed; stderr: {list(errors.queue)[-5:]}") from None
            assert '"after the outage"' in line and '"rank":3' in line.replace(" ", ""), line
    finally:
        process.terminate()
        process.wait(timeout=10)
        with Elasticsearch(es_url, request_timeout=120) as es:
            es.options(ignore_status=404).indices.delete(index=INDEX)

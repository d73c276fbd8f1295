"""``hvdlog history --es`` over 10,000 jobs: whole-call time (p50 of repeats), CPU seconds of the
client and of the server (the part a loaded machine cannot inflate), and bytes received.

    HVDLOG_ES_HOME=~/.cache/hvdlog/elasticsearch-8.19.21 python bench/bench_history_es.py [--jobs 10000] [--repeats 5]
    python bench/bench_history_es.py --es URL [--es-pid PID] [--indexed]   # a server of your own

Jobs of 8 ranks on 8 of 64 hosts, one step each (the aggregation's cost grows with jobs and
hosts; events only feed min/max/cardinality), 20 % failed: an ECC error on one bad host,
one code bug, and other failures (one of six kinds). Documents are made by
tests/support/seeded_jobs.py's ``job_documents``, then bulk-indexed into a throw-away
Elasticsearch (or ``--es URL``). The answer is checked: the bad host is the one suspect.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
INDEX = "hvdlog-bench-history"


def documents(jobs: int, seed: int = 44) -> list[dict[str, Any]]:
    """Every job's events as hvdlog's runtime writes them, nested as Elasticsearch stores them
    (not run through ``hvdlog.parse``, which would take longer than the measurement: the failure
    model classifies the evidence itself)."""
    from support.seeded_jobs import BASE, CODE_BUG, ECC, ONE_OFFS, job_documents

    from hvdlog.documents import expand

    rng = random.Random(seed)
    hosts = [f"gpu{index:03d}" for index in range(64)]
    bad = hosts[7]
    out: list[dict[str, Any]] = []
    for index in range(jobs):
        job_hosts = rng.sample(hosts, 8)
        roll = rng.random()
        failure, culprit = None, 0
        if roll < 0.3 and bad in job_hosts:
            failure, culprit = ECC, job_hosts.index(bad)
        elif roll < 0.05:
            failure, culprit = CODE_BUG, rng.randrange(8)
        elif roll < 0.16:
            failure, culprit = ONE_OFFS[index % len(ONE_OFFS)], rng.randrange(8)
        if failure is not None:
            numbers = {"a": rng.randint(0, 7), "b": rng.randint(1, 4000), "c": rng.randint(1, 99)}
            failure = (failure[0], failure[1].format(**numbers), failure[2])
        for doc in job_documents(f"job-{index:05d}", BASE + timedelta(minutes=index), job_hosts, failure, culprit, 1, rng, steps=1):
            out.append(expand(doc))
    return out


def index(url: str, docs: list[dict[str, Any]]) -> None:
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings

    es = Elasticsearch(url, request_timeout=300)
    es.options(ignore_status=404).indices.delete(index=INDEX)
    es.indices.create(index=INDEX, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1"})
    ok, errors = bulk(es, ({"_index": INDEX, "_source": doc} for doc in docs), chunk_size=5000, raise_on_error=False)
    assert not errors and ok == len(docs), errors[:3]
    es.indices.refresh(index=INDEX)
    es.indices.forcemerge(index=INDEX, max_num_segments=1)
    es.close()


def _server_cpu(root: int | None) -> float | None:
    """CPU seconds used so far by ``root`` and its descendants (the server JVM), from /proc; None elsewhere."""
    if root is None or not Path("/proc").is_dir():
        return None
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    family, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _) in stats.items() if parent in family} - family
        family |= more
        grew = bool(more)
    return sum(stats[pid][1] for pid in family if pid in stats)


def measure(url: str, repeats: int, server_pid: int | None = None) -> None:
    from hvdlog.analyses.history import analyse
    from hvdlog.analyses.history_read import from_elasticsearch
    from hvdlog.query.es import ElasticsearchSource

    times, client, server = [], [], []
    for _ in range(repeats):
        source = ElasticsearchSource(url, index=INDEX, timeout=60)
        before = _server_cpu(server_pid)
        cpu, started = time.process_time(), time.perf_counter()
        found = analyse(from_elasticsearch(source))
        times.append(time.perf_counter() - started)
        client.append(time.process_time() - cpu)
        if before is not None and (after := _server_cpu(server_pid)) is not None:
            server.append(after - before)
    print(f"{found.jobs} jobs, {found.failed} failed; suspects {[entry['host'] for entry in found.suspect_hosts]}; "
          f"recurring {[(entry['fingerprint']['error_type'], entry['count']) for entry in found.recurring]}")
    print(f"history --es: p50 {statistics.median(times):.2f} s, min {min(times):.2f} s, max {max(times):.2f} s over {repeats} runs; "
          f"{source.requests} requests, {source.bytes_received / 1e6:.1f} MB received; load average {os.getloadavg()[0]:.1f}")
    print(f"CPU per call (p50): client {statistics.median(client):.2f} s" +
          (f", server {statistics.median(server):.2f} s" if server else " (server: not measured, --es)"))
    assert [entry["host"] for entry in found.suspect_hosts] == ["gpu007"], found.suspect_hosts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--es", help="an Elasticsearch to use instead of a throw-away one")
    parser.add_argument("--es-pid", type=int, help="with --es: the server's process id, to measure its CPU (a local server)")
    parser.add_argument("--indexed", action="store_true", help="with --es: the documents are there already (an earlier run)")
    args = parser.parse_args()
    if args.es and args.indexed:
        measure(args.es, args.repeats, args.es_pid)
        return
    started = time.perf_counter()
    docs = documents(args.jobs)
    print(f"{len(docs)} documents for {args.jobs} jobs made in {time.perf_counter() - started:.0f} s")
    if args.es:
        index(args.es, docs)
        measure(args.es, args.repeats, args.es_pid)
        return
    from support.elasticsearch import ElasticsearchServer

    with ElasticsearchServer(heap="1g") as server:
        started = time.perf_counter()
        index(server.url, docs)
        print(f"indexed in {time.perf_counter() - started:.0f} s")
        measure(server.url, args.repeats, server.process.pid if server.process else None)


if __name__ == "__main__":
    main()

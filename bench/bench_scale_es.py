"""Whole-job analyses over Elasticsearch at scale: ``stragglers``, ``first-failure`` and ``stalls``
with ``--es`` on a job of about 5 million events, each answer checked against the files'.

    python bench/bench_scale_es.py [--ranks 1024] [--events 4883] [--es-data DIR] [--queries 20]

The job is :mod:`bench_scale`'s (per-rank ``.jsonl`` plus native captures with Horovod lines,
rank 0's stall block, one culprit and everyone else's collateral). Its documents, as ``hvdlog
parse`` makes them (the Python twin of the Logstash pipeline), are bulk-indexed once into the
data stream ``logs-horovod.scale-bench`` through the contract's templates, on the harness's
Elasticsearch (``--es-data`` keeps the data directory, so later runs reuse the index).

Each command runs in this process through the CLI (click), ``--queries`` times after a warm-up:
the time of the whole call (connection, every request, the analysis, the JSON output), p50 and
p99, with the bytes of the answers received from Elasticsearch and the number of requests. The
baseline, run in the same process on the same index, is the documents path the aggregation
replaced (``step_tally`` answering None: every step event fetched and tallied in the client).
Every answer must equal the files' answer, or the benchmark fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from bench_grep import fresh_stream, machine, percentile  # noqa: E402
from bench_scale import check, generate  # noqa: E402

STREAM = "logs-horovod.scale-bench"
COMMANDS: dict[str, list[str]] = {
    "stragglers": ["stragglers", "--json", "--no-timeline"],
    "first-failure": ["first-failure", "--json"],
    "stalls": ["stalls", "--json"],
}


def index_job(url: str, job: Path, data: Path | None) -> tuple[int, float]:
    """Bulk-index the job's documents into :data:`STREAM`, unless ``data`` already holds them.

    Returns (documents in the stream, seconds the indexing took, then or now)."""
    import orjson

    from elasticsearch import Elasticsearch
    from hvdlog.parse import parse_paths

    es = Elasticsearch(url, request_timeout=300)
    marker = data / f".indexed-{job.name}" if data is not None else None
    if marker is not None and marker.exists() and es.indices.exists(index=STREAM):
        total, seconds = (float(part) for part in marker.read_text().split())
        if es.count(index=STREAM)["count"] == total:
            print(f"reusing {total:.0f} docs in {data}", file=sys.stderr)
            return int(total), seconds
    fresh_stream(es, STREAM)
    started, chunk = time.perf_counter(), list[bytes]()
    action = b'{"create":{}}\n'

    def flush() -> None:
        response = es.bulk(operations=b"".join(chunk), index=STREAM, refresh=False)  # type: ignore[arg-type]  # ndjson bytes are sent as they are
        if response["errors"]:
            raise SystemExit(f"bulk errors: {[item for item in response['items'] if 'error' in item['create']][:2]}")
        chunk.clear()

    for doc in parse_paths([str(job)]):
        chunk.append(action + orjson.dumps(doc) + b"\n")
        if len(chunk) >= 20_000:
            flush()
    if chunk:
        flush()
    seconds = time.perf_counter() - started
    es.indices.refresh(index=STREAM)
    total = es.count(index=STREAM)["count"]
    print(f"indexed {total} docs in {seconds:.0f} s", file=sys.stderr)
    if marker is not None:
        marker.write_text(f"{total} {seconds:.1f}")
    return total, seconds


@contextlib.contextmanager
def sources() -> Iterator[list[Any]]:
    """The Elasticsearch sources the command makes inside the block (for their transfer counts)."""
    from hvdlog.query.es import ElasticsearchSource

    made: list[Any] = []
    original = ElasticsearchSource.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    ElasticsearchSource.__init__ = init  # type: ignore[method-assign]
    try:
        yield made
    finally:
        ElasticsearchSource.__init__ = original  # type: ignore[method-assign]


def invoke(args: list[str]) -> tuple[float, int, int, int, str]:
    """One CLI call in this process: (milliseconds, exit code, bytes received, requests, stdout)."""
    from click.testing import CliRunner

    from hvdlog.cli.main import cli

    with sources() as made:
        begun = time.perf_counter()
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        elapsed = (time.perf_counter() - begun) * 1000
    return elapsed, result.exit_code, sum(s.bytes_received for s in made), sum(s.requests for s in made), result.stdout


@contextlib.contextmanager
def documents_path() -> Iterator[None]:
    """The baseline: ``stragglers --es`` as before the aggregation (every step event read)."""
    from hvdlog.analyses import step_es as es_steps

    original = es_steps.step_tally
    es_steps.step_tally = lambda source, spec: None
    try:
        yield
    finally:
        es_steps.step_tally = original


def _same(name: str, files: str, es: str) -> str | None:
    """What differs between the files' answer and Elasticsearch's (None when they agree)."""
    ours, theirs = [json.loads(line) for line in files.splitlines()], [json.loads(line) for line in es.splitlines()]
    if ours == theirs:
        return None
    return f"{name}: files gave {len(ours)} rows, Elasticsearch {len(theirs)}; first difference " + next(
        (f"{a} != {b}" for a, b in zip(ours, theirs, strict=False) if a != b), "in length")


def main() -> None:
    """Index (or reuse) the job, check every answer against the files', time each command; markdown rows on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--events", type=int, default=4883, help="events per rank (default: about 5 M in all at 1,024 ranks)")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "hvdlog-bench-scale")
    parser.add_argument("--es-data", type=Path, default=None, help="keep the server's data here (index once, reuse)")
    parser.add_argument("--es-url", default=None, help="an Elasticsearch already holding the index (default: start the harness's)")
    parser.add_argument("--es-heap", default="2g")
    parser.add_argument("--queries", type=int, default=20, help="timed calls per command")
    parser.add_argument("--baseline-queries", type=int, default=2, help="timed calls of the documents path (0: not timed)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from support.elasticsearch import ElasticsearchServer  # type: ignore[import-not-found]

    job = generate(args.root, args.ranks, args.events)
    rows, failed = [], False
    with contextlib.ExitStack() as stack:
        url = args.es_url or stack.enter_context(
            ElasticsearchServer(heap=args.es_heap, data_dir=args.es_data and args.es_data / "data")).url
        total, index_seconds = index_job(url, job, args.es_data)
        print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
        es_flags = ["--es", url, "--index", STREAM]
        plans: list[tuple[str, str, Callable[[], contextlib.AbstractContextManager[None]], int]] = [
            (name, "aggregation" if name == "stragglers" else "filtered query", contextlib.nullcontext, args.queries) for name in COMMANDS]
        if args.baseline_queries:
            plans.insert(1, ("stragglers", "documents (before)", documents_path, args.baseline_queries))
        from_files = {name: invoke([*command, str(job)])[4] for name, command in COMMANDS.items()}  # each read once
        for name, path, context, queries in plans:
            with context():
                invoke([*COMMANDS[name], *es_flags])  # warm-up: imports, connection, the server's caches
                runs = [invoke([*COMMANDS[name], *es_flags]) for _ in range(queries)]
            loads = os.getloadavg()[0]
            wrong = _same(name, from_files[name], runs[0][4]) or check(name, runs[0][4], runs[0][1], args.ranks)
            failed = failed or wrong is not None
            times = [run[0] for run in runs]
            rows.append(f"| {total:,} | `{name} --es` | {path} | {statistics.median(times):,.0f} ms | {percentile(times, 0.99):,.0f} ms "
                        f"| {runs[0][2]:,} B in {runs[0][3]} requests | {len(runs)} | {loads:.1f} | {wrong or 'right, = files'} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print(f"indexing: {total:,} documents in {index_seconds:.0f} s ({total / max(index_seconds, 1e-9):,.0f}/s)")
    print("| documents | command | path | p50 | p99 | received from Elasticsearch | calls | load | answer |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if failed:
        raise SystemExit("a wrong answer (see the table)")


if __name__ == "__main__":
    main()

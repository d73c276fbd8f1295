"""`hvdlog grep --rank R --level error` against `grep -F` and `jq` on >= 1 GB of per-rank files,
and the same query's latency on Elasticsearch over >= 5 million documents. One command:

    python bench/bench_grep.py [--gb 1.0] [--ranks 8] [--es-docs 5000000] [--skip-es]
    python bench/bench_grep.py --skip-files --es-data /tmp/esbench --baseline /work/main --queries 30

Files: per-rank ``.jsonl`` files in the contract format are generated under a temporary
directory (reused when already there), then each tool selects rank R's events at level error
or worse, in the same run, on the same files, output to a pipe that counts lines:

* tree: the whole job directory (hvdlog prunes other ranks' files by path; grep and jq
  must read every file and select the rank from the content);
* one file: rank R's file alone, so the path shortcut gives hvdlog no advantage.

Each tool's match count must agree, or the benchmark fails. Throughput is input bytes over
wall time (best of --repeat). Elasticsearch: the harness server (bigger heap) gets
--es-docs documents bulk-indexed into a data stream through the contract's templates
(time bounded by --es-budget; the time taken is reported), then the same filter runs through
the Elasticsearch source --queries times; p50/p99 of the whole call (PIT, pages, close).
--es-data keeps the server's data directory, so the corpus is indexed once and reused;
--baseline times another checkout's client (its own process, same server, interleaved query
by query) and fails unless both return the same documents.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LEVELS = ["debug"] * 10 + ["info"] * 85 + ["warning"] * 4 + ["error"] * 4 + ["critical"]
MESSAGES = [
    "train step",
    "checkpoint saved to /scratch/ckpt/model-{i}.pt",
    "allreduce of fc{j}.weight took {i} us",
    "data loader worker {j} refilled its queue",
    "gradient norm {i}.{j} above clip threshold",
]


def machine() -> str:
    """nproc, CPU model and RAM, for the record."""
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor())
    ram = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))) / 2**20
    return f"{os.cpu_count()} CPU ({model}), {ram:.0f} GiB RAM, Python {platform.python_version()}"


def event_line(rank: int, size: int, i: int, base: float) -> str:
    """One contract event as our writer renders it (flat dotted keys, compact JSON)."""
    level = LEVELS[(i * 7 + rank * 13) % len(LEVELS)]
    seconds = base + i * 0.01
    whole = int(seconds)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1e6):06d}Z"
    message = MESSAGES[i % len(MESSAGES)].format(i=i, j=i % 7)
    return (
        f'{{"@timestamp":"{stamp}","log.level":"{level}","message":"{message}","rank":{rank},"local_rank":{rank % 4},'
        f'"size":{size},"local_size":4,"host.name":"node{rank // 4}","process.pid":{4000 + rank},"job":"bench",'
        f'"event.dataset":"horovod.app","log.logger":"hvdlog.train","step":{i // 5},"epoch":{i // 50000},'
        f'"loss":{1.0 / (1 + i / 1000):.6f},"lr":0.01,"samples_per_sec":{800 + (i * 37 + rank) % 100}.5}}\n'
    )


def generate(root: Path, gigabytes: float, ranks: int) -> list[Path]:
    """Per-rank files totalling ``gigabytes``, reused when a previous run made the same."""
    marker = root / f".made-{gigabytes}-{ranks}"
    files = [root / "bench" / f"node{rank // 4}" / f"rank-{rank}.jsonl" for rank in range(ranks)]
    if marker.exists():
        return files
    shutil.rmtree(root, ignore_errors=True)
    per_rank = int(gigabytes * 1e9 / ranks)
    base = 1_795_000_000.0
    started = time.perf_counter()
    for rank, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        written = 0
        i = 0
        with open(path, "w") as handle:
            while written < per_rank:
                chunk = "".join(event_line(rank, ranks, i + k, base) for k in range(10000))
                handle.write(chunk)
                written += len(chunk)
                i += 10000
    marker.touch()
    print(f"generated {sum(p.stat().st_size for p in files) / 1e9:.2f} GB in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return files


def timed(command: str, repeat: int) -> tuple[float, int]:
    """Best wall time of a shell pipeline and the number of lines it printed."""
    best = float("inf")
    count = -1
    for _ in range(repeat):
        started = time.perf_counter()
        out = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | wc -l"], capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - started
        if out.returncode not in (0, 1):
            raise SystemExit(f"benchmark command failed ({out.returncode}): {command}\n{out.stderr}")
        best = min(best, elapsed)
        count = int(out.stdout.strip())
    return best, count


def file_bench(root: Path, files: list[Path], rank: int, repeat: int) -> list[str]:
    """The three tools on the tree and on one file; returns markdown table rows."""
    hvdlog = Path(sys.executable).with_name("hvdlog")
    jq_filter = f'select(.rank == {rank} and (.["log.level"] == "error" or .["log.level"] == "critical"))'
    one = files[rank]
    tree_files = " ".join(str(p) for p in files)
    cases = {
        "tree": (
            root / "bench",
            sum(p.stat().st_size for p in files),
            {
                "hvdlog grep": f"{hvdlog} grep --json --rank {rank} --level error {root / 'bench'}",
                "grep -F": f"grep -hF -e '\"log.level\":\"error\"' -e '\"log.level\":\"critical\"' {tree_files} | grep -F '\"rank\":{rank},'",
                "jq": f"jq -c '{jq_filter}' {tree_files}",
            },
        ),
        "one file": (
            one,
            one.stat().st_size,
            {
                "hvdlog grep": f"{hvdlog} grep --json --level error {one}",
                "grep -F": f"grep -hF -e '\"log.level\":\"error\"' -e '\"log.level\":\"critical\"' {one}",
                "jq": f"jq -c '{jq_filter}' {one}",
            },
        ),
    }
    rows = []
    for case, (_, size, commands) in cases.items():
        results = {tool: timed(command, repeat if tool != "jq" else 1) for tool, command in commands.items()}
        counts = {tool: count for tool, (_, count) in results.items()}
        if len(set(counts.values())) != 1:
            raise SystemExit(f"tools disagree on {case}: {counts}")
        hv = results["hvdlog grep"][0]
        for tool, (seconds, count) in results.items():
            rows.append(
                f"| {case} | {tool} | {size / 1e9:.2f} GB | {count} | {seconds:.2f} s | {size / seconds / 1e6:.0f} MB/s | {seconds / hv:.2f}× |"
            )
        print("\n".join(rows[-3:]), file=sys.stderr)
    return rows


def percentile(values: list[float], share: float) -> float:
    """The value at ``share`` of the sorted values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def fresh_stream(es: Any, stream: str) -> None:
    """Delete the data stream ``stream`` if there, and install the contract's templates that make it again."""
    from hvdlog.elastic.templates import COMPONENT_MAPPINGS, COMPONENT_SETTINGS, component_templates, index_template

    if es.indices.exists(index=stream):
        es.indices.delete_data_stream(name=stream)
    templates = component_templates()
    for name in (COMPONENT_MAPPINGS, COMPONENT_SETTINGS):
        es.cluster.put_component_template(name=name, **templates[name])
    es.indices.put_index_template(name="logs-horovod", **index_template())


def _index_corpus(url: str, docs: int, ranks: int, budget: float, data: Path | None) -> tuple[int, float]:
    """Bulk-index ``docs`` events into the bench data stream, unless ``data`` already holds them.

    Returns (documents in the stream, seconds the indexing took, then or now).
    """
    from elasticsearch import Elasticsearch

    es = Elasticsearch(url, request_timeout=300)
    stream = "logs-horovod.app-bench"
    marker = data / f".indexed-{docs}-{ranks}" if data is not None else None
    if marker is not None and marker.exists() and es.indices.exists(index=stream):
        total = es.count(index=stream)["count"]
        if total == docs:
            print(f"reusing {total} docs in {data}", file=sys.stderr)
            return total, float(marker.read_text())
    fresh_stream(es, stream)
    action = '{"create":{}}\n'
    started = time.perf_counter()
    indexed = 0
    base = 1_795_000_000.0
    chunk = 20000
    while indexed < docs and time.perf_counter() - started < budget:
        body = "".join(action + event_line(i % ranks, ranks, i // ranks, base) for i in range(indexed, min(indexed + chunk, docs)))
        response = es.bulk(operations=body, index=stream, refresh=False)
        if response["errors"]:
            raise SystemExit(f"bulk errors: {[item for item in response['items'] if 'error' in item['create']][:2]}")
        indexed += len(response["items"])
    index_seconds = time.perf_counter() - started
    es.indices.refresh(index=stream)
    total = es.count(index=stream)["count"]
    print(f"indexed {total} docs in {index_seconds:.0f} s", file=sys.stderr)
    if marker is not None and total == docs:
        marker.write_text(f"{index_seconds:.1f}")
    return total, index_seconds


#: What each timed call fetches, by name (the worker runs them).
VARIANTS: dict[str, str] = {
    "first": "first page (time to first 2,000)",
    "last": "last 100 (`-n 100`)",
    "all": "all matches (every page)",
}


def worker(url: str, rank: int) -> None:
    """``--worker``: one client process (whatever hvdlog PYTHONPATH gives) timing calls asked on stdin.

    Each stdin line names a variant; the answer is one line: milliseconds, matches, and a digest
    of the documents (so trees can be checked to give the same answers).
    """
    import hashlib

    import orjson

    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.spec import Filter

    source = ElasticsearchSource(url, timeout=60)
    spec = Filter(ranks=frozenset({rank}), min_level="error")
    calls = {
        "first": lambda: list(itertools.islice(source.search(spec), 2000)),
        "last": lambda: list(source.search(spec, last=100)),
        "all": lambda: list(source.search(spec)),
    }
    for line in sys.stdin:
        begun = time.perf_counter()
        documents = calls[line.strip()]()
        elapsed = (time.perf_counter() - begun) * 1000
        digest = hashlib.sha256(b"\n".join(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) for doc in documents)).hexdigest()[:12]
        print(f"{elapsed:.3f} {len(documents)} {digest}", flush=True)


def es_bench(args: argparse.Namespace) -> list[str]:
    """Index (or reuse) the corpus, then time the grep query through each client tree, interleaved."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.elasticsearch import ElasticsearchServer

    with contextlib.ExitStack() as stack:
        url = args.es_url
        if url is None:
            url = stack.enter_context(ElasticsearchServer(heap=args.es_heap, data_dir=args.es_data and args.es_data / "data")).url
        total, index_seconds = _index_corpus(url, args.es_docs, args.ranks, args.es_budget, args.es_data)
        trees = [REPO, *args.baseline]
        workers = {}
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            workers[tree] = stack.enter_context(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", url, "--rank", str(args.rank)],
                    env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )
            )

        def ask(tree: Path, variant: str) -> tuple[float, int, str]:
            process = workers[tree]
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(variant + "\n")
            process.stdin.flush()
            answer = process.stdout.readline().split()
            if len(answer) != 3:
                raise SystemExit(f"the client in {tree} failed")
            return float(answer[0]), int(answer[1]), answer[2]

        for tree in trees:  # warm-up: imports, connection, caches
            for variant in VARIANTS:
                ask(tree, variant)
        latencies: dict[tuple[Path, str], list[float]] = {(tree, variant): [] for tree in trees for variant in VARIANTS}
        answers: dict[str, set[tuple[int, str]]] = {variant: set() for variant in VARIANTS}
        loads = [os.getloadavg()[0]]
        for round_ in range(args.queries):
            for variant in VARIANTS:
                for tree in trees if round_ % 2 == 0 else trees[::-1]:
                    ms, count, digest = ask(tree, variant)
                    latencies[tree, variant].append(ms)
                    answers[variant].add((count, digest))
            loads.append(os.getloadavg()[0])
        for process in workers.values():
            assert process.stdin is not None
            process.stdin.close()
        disagree = {variant: found for variant, found in answers.items() if len(found) != 1}
        if disagree:
            raise SystemExit(f"the client trees disagree: {disagree}")
        matches = next(iter(answers["all"]))[0]
        print(f"load average (1 min) during the queries: {min(loads):.1f}-{max(loads):.1f}", file=sys.stderr)
        lines = []
        rate = f"{index_seconds:.0f} s ({total / index_seconds:,.0f} docs/s)"
        for variant, name in VARIANTS.items():
            for tree in trees:
                values = latencies[tree, variant]
                p50, p99 = statistics.median(values), percentile(values, 0.99)
                label = "this tree" if tree == REPO else str(tree)
                lines.append(f"| {total:,} docs | {rate} | {name} | {label} | {matches} | {len(values)} | {p50:.0f} ms | {p99:.0f} ms |")
                print(lines[-1], file=sys.stderr)
    return lines


def main() -> None:
    """Run and print markdown rows for docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the generated job tree in GB (default: %(default)s)")
    parser.add_argument("--ranks", type=int, default=8, help="ranks in the generated job, one file each (default: %(default)s)")
    parser.add_argument("--rank", type=int, default=3, help="the rank whose errors every tool selects (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best is reported (default: %(default)s)")
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()) / "hvdlog-bench-grep",
        help="where the generated files live; reused when already there (default: %(default)s)",
    )
    parser.add_argument("--es-docs", type=int, default=5_000_000, help="documents bulk-indexed into Elasticsearch (default: %(default)s)")
    parser.add_argument(
        "--es-budget", type=float, default=1800.0, help="seconds allowed for bulk indexing; the count reached is reported (default: %(default)s)",
    )
    parser.add_argument("--queries", type=int, default=100, help="timed Elasticsearch queries for p50/p99 (default: %(default)s)")
    parser.add_argument(
        "--es-data", type=Path, default=None,
        help="keep the Elasticsearch data under DIR/data and reuse the indexed corpus on later runs (default: a throw-away directory)",
    )
    parser.add_argument("--es-url", default=None, help="use this running Elasticsearch instead of starting one (corpus reused when complete)")
    parser.add_argument("--es-heap", default="2g", help="heap of the started Elasticsearch (default: %(default)s)")
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[],
        help="another checkout whose client is timed too, interleaved with this one (e.g. /work/main); repeatable",
    )
    parser.add_argument("--worker", metavar="URL", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--skip-es", action="store_true", help="only the file benchmark")
    parser.add_argument("--skip-files", action="store_true", help="only the Elasticsearch benchmark")
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, args.rank)
        return
    for tool in ("jq", "grep"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing: apt-get install {tool}")
    print(f"machine: {machine()}")
    if not args.skip_files:
        files = generate(args.dir, args.gb, args.ranks)
        print("| input | tool | bytes | matches | wall (best) | throughput | time vs hvdlog |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(file_bench(args.dir, files, args.rank, args.repeat)))
    if not args.skip_es:
        print("| corpus | bulk indexing | result fetched | client | matches | queries | p50 | p99 |")
        print("|---|---|---|---|---|---|---|---|")
        print("\n".join(es_bench(args)))


if __name__ == "__main__":
    main()

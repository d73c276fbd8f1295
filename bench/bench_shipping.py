"""Sizing numbers for docs/deploy.md: what one rank writes per training step at each
Horovod log level, and how many events per second a real Filebeat (shipper/filebeat.yml)
reads from per-rank files. One command:

    python bench/bench_shipping.py [--steps N] [--events N]

1. Runs tests/shipping/rank_job.py under `horovodrun -np 2 --gloo` with HOROVOD_LOG_LEVEL
   warning, info, debug and trace, once with 2 steps and once with 2+N, and reports lines
   (and bytes) per step per rank of each file: the difference of the two runs divided by N,
   so start-up and shutdown lines cancel out.
2. Writes N JSON event lines and N native TRACE lines per rank file for 4 ranks and times
   Filebeat (output to a file) from start until every event is out; reports events per
   wall second and per Filebeat CPU second.
3. Starts the tests' single-node Elasticsearch (512 MB heap), installs hvdlog's templates
   with `hvdlog install`, and bulk-indexes N training events into logs-horovod.app-bench
   (batches of 2,000, as Logstash's output sends them); reports documents per second.
Parts: --part volume|filebeat|elasticsearch (default: all). Needs the project's venv on
PATH, HVDLOG_FILEBEAT (scripts/install-filebeat.sh) and HVDLOG_ES_HOME.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOB = REPO / "tests" / "shipping" / "rank_job.py"
FILEBEAT_YML = REPO / "shipper" / "filebeat.yml"
LEVELS = ("warning", "info", "debug", "trace")


def _run_job(root: Path, job: str, level: str, steps: int) -> dict[str, tuple[int, int]]:
    """(lines, bytes) per file kind for rank 0 of one real 2-rank job."""
    env = {**os.environ, "HVDLOG_ROOT": str(root), "HVDLOG_JOB": job, "HOROVOD_LOG_LEVEL": level, "JOB_STEPS": str(steps)}
    subprocess.run(["horovodrun", "-np", "2", "--gloo", "python", str(JOB)], env=env, capture_output=True, timeout=600, check=True)
    (host,) = (root / job).iterdir()
    out = {}
    for kind in ("jsonl", "stdout.log", "stderr.log"):
        data = (host / f"rank-0.{kind}").read_bytes()
        out[kind] = (data.count(b"\n"), len(data))
    return out


def volume(steps: int) -> list[dict[str, object]]:
    """Lines and bytes per step per rank, by level and file."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for level in LEVELS:
            short = _run_job(Path(tmp), f"{level}-short", level, 2)
            long = _run_job(Path(tmp), f"{level}-long", level, 2 + steps)
            for kind in short:
                rows.append({
                    "level": level, "file": kind,
                    "lines_per_step": (long[kind][0] - short[kind][0]) / steps,
                    "bytes_per_step": (long[kind][1] - short[kind][1]) / steps,
                })
    return rows


def filebeat_rate(events: int, ranks: int = 4) -> dict[str, float]:
    """Events per second a real Filebeat ships from per-rank files (file output)."""
    binary = os.environ.get("HVDLOG_FILEBEAT") or "filebeat"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        trace_line = "[2026-11-29 16:04:24.  9244: T /src/horovod/common/operations.cc:780] [0]: Sent 4 tensor(s) to the coordinator"
        for rank in range(ranks):
            node = root / "bench-job" / "node1"
            node.mkdir(parents=True, exist_ok=True)
            record = {"@timestamp": "2026-11-29T15:47:55.123456Z", "log.level": "info", "message": "train step", "rank": rank,
                      "host.name": "node1", "job": "bench-job", "event.dataset": "horovod.app", "step": 1, "loss": 0.5}
            (node / f"rank-{rank}.jsonl").write_text((json.dumps(record) + "\n") * events)
            (node / f"rank-{rank}.stdout.log").write_text((trace_line + "\n") * events)
        total = 2 * ranks * events
        out = Path(tmp) / "out"
        env = {**os.environ, "HVDLOG_ROOT": str(root), "NODE_NAME": "node1", "LOGSTASH_HOSTS": "localhost:5044", "HVDLOG_TLS_DIR": tmp}
        command = [binary, "-c", str(FILEBEAT_YML), "--strict.perms=false", "--path.home", str(out), "--path.data", str(out / "data"),
                   "-E", "output.logstash.enabled=false", "-E", f"output.file.path={out / 'events'}", "-E", "output.file.filename=events",
                   "-E", "output.file.rotate_every_kb=10000000", "-E", "queue.disk.max_size=4GB", "-E", "http.enabled=false",
                   "-E", "filebeat.inputs.0.prospector.scanner.check_interval=1s", "-E", "filebeat.inputs.1.prospector.scanner.check_interval=1s"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        events_file = out / "events" / "events"
        shipped = 0
        while time.monotonic() - start < 600:
            if events_file.exists():
                with open(events_file, "rb") as handle:
                    shipped = sum(1 for _ in handle)
                if shipped >= total:
                    break
            time.sleep(0.5)
        wall = time.monotonic() - start
        process.terminate()
        process.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {"events": shipped, "expected": total, "wall_s": wall, "cpu_s": cpu, "per_wall_s": shipped / wall, "per_cpu_s": shipped / cpu}


def elasticsearch_rate(events: int) -> dict[str, float]:
    """Documents per second one Elasticsearch node (the tests' server) indexes into our data stream."""
    import sys

    from elasticsearch import Elasticsearch, helpers

    sys.path.insert(0, str(REPO / "tests"))
    from support.elasticsearch import ElasticsearchServer

    with ElasticsearchServer() as server:
        subprocess.run(["hvdlog", "install", "--es", server.url, "--namespace", "bench"], check=True, capture_output=True, timeout=300)
        client = Elasticsearch(server.url, request_timeout=120)
        docs = ({"_index": "logs-horovod.app-bench", "_op_type": "create", "_source": {
            "@timestamp": "2026-11-29T15:47:55.123456Z", "log": {"level": "info", "logger": "hvdlog.train"}, "message": "train step",
            "rank": i % 64, "local_rank": i % 8, "size": 64, "host": {"name": f"node{i % 8}"}, "process": {"pid": 4242},
            "job": "bench-job", "event": {"dataset": "horovod.app"}, "data_stream": {"type": "logs", "dataset": "horovod.app", "namespace": "bench"},
            "step": i // 64, "epoch": 0, "loss": 0.42, "lr": 0.01, "samples_per_sec": 812.5}} for i in range(events))
        start = time.monotonic()
        ok, errors = helpers.bulk(client, docs, chunk_size=2000, stats_only=True)
        wall = time.monotonic() - start
        client.indices.refresh(index="logs-horovod.app-bench")
        stored = client.count(index="logs-horovod.app-bench")["count"]
        size = client.indices.stats(index="logs-horovod.app-bench")["_all"]["primaries"]["store"]["size_in_bytes"]
        client.close()
    return {"indexed": ok, "errors": errors, "stored": stored, "wall_s": wall, "per_wall_s": ok / wall, "bytes_per_doc": size / max(stored, 1)}


def main() -> None:
    """Print both tables as JSON lines, with the machine."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="extra training steps whose lines are counted per log level (default: %(default)s)")
    parser.add_argument(
        "--events", type=int, default=50_000, help="event lines per rank file for the Filebeat part; 4x that for Elasticsearch (default: %(default)s)",
    )
    parser.add_argument(
        "--part", choices=("all", "volume", "filebeat", "elasticsearch"), default="all", help="run one part only (default: %(default)s)",
    )
    args = parser.parse_args()
    print(json.dumps({"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "load": os.getloadavg()}))
    if args.part in ("all", "volume"):
        for row in volume(args.steps):
            print(json.dumps(row))
    if args.part in ("all", "filebeat"):
        print(json.dumps({"filebeat": filebeat_rate(args.events)}))
    if args.part in ("all", "elasticsearch"):
        print(json.dumps({"elasticsearch": elasticsearch_rate(4 * args.events)}))


if __name__ == "__main__":
    main()

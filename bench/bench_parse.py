"""`hvdlog parse` throughput, lines per second on one core: JSON event lines, native
DEBUG/TRACE lines and the consoles users posted (real lines from tests/corpus, repeated).
One command:

    python bench/bench_parse.py [--lines N] [--repeat R] [--breakdown]

Measures parse_lines() end to end (decode, tag strip, grok, documents) plus NDJSON
serialisation with orjson, which is what `hvdlog parse` does per line, and the real
command. Reports the best of R runs as lines per CPU-second of the process (what one core
does, robust when other work shares the machine) and per wall-clock second. Pin to one
core with `taskset -c 1` for the documented numbers.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from hvdlog.parse import parse_lines

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"


def _json_lines() -> list[bytes]:
    lines = (CORPUS / "horovod.app" / "rank1-events.log").read_bytes().splitlines(keepends=True)
    return [line for line in lines if line.startswith(b'{"@timestamp"') and line.rstrip().endswith(b"}")]


def _native_lines() -> list[bytes]:
    """Core DEBUG/TRACE lines of a per-rank capture (untagged, as hvdlog writes them)."""
    lines = []
    for name in ("mpi-trace-tree-rank0-stdout.log", "gloo-debug-tree-rank0-stdout.log"):
        for line in (CORPUS / "horovod.core" / name).read_bytes().splitlines(keepends=True):
            payload = line.split(b">:", 1)[-1]
            if (payload.startswith(b"[20") and b": D " in payload[:40]) or b": T " in payload[:40]:
                lines.append(payload)
    return lines


def _console_lines() -> list[bytes]:
    """Every line of the real-world corpus's consoles (launcher tags, prefixes, prints, tracebacks,
    stall reports: what a console's lines cost, prefix learning and wrap joining included)."""
    return [line for path in sorted((CORPUS / "realworld").glob("*/*.log")) for line in path.read_bytes().splitlines(keepends=True)]


def _run(lines: list[bytes], path: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) to parse and serialise ``lines``."""
    started, cpu = time.perf_counter(), time.process_time()
    dumps = orjson.dumps
    for doc in parse_lines(lines, path=path, timezone="UTC"):
        dumps(doc)
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    """Print lines/s for each kind of input."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=300_000, help="lines per kind (JSON events, native DEBUG/TRACE, consoles) (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is reported (default: %(default)s)")
    parser.add_argument("--breakdown", action="store_true", help="only where the time of a JSON line goes, stage by stage (ns per line)")
    args = parser.parse_args()
    if args.breakdown:
        _breakdown(args.lines, args.repeat)
        return
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.processor() or 'cpu'}; "
          f"cores usable: {affinity}; {args.lines} lines, best of {args.repeat}")
    for kind, sample, path in (
        ("json", _json_lines(), "bench/node1/rank-0.jsonl"),
        ("native-debug", _native_lines(), "bench/node1/rank-0.stdout.log"),
        ("console", _console_lines(), "bench/console.log"),
    ):
        lines = (sample * (args.lines // len(sample) + 1))[: args.lines]
        runs = [_run(lines, path) for _ in range(args.repeat)]
        wall, cpu = min(run[0] for run in runs), min(run[1] for run in runs)
        print(f"{kind:16s} {len(lines) / cpu:10,.0f} lines/s per CPU-second  {len(lines) / wall:10,.0f} wall  "
              f"({len(sample)} distinct real lines)")
        clis = [_cli(lines, path) for _ in range(args.repeat)]
        wall, cpu = min(run[0] for run in clis), min(run[1] for run in clis)
        print(f"{kind + ' (cli)':16s} {len(lines) / cpu:10,.0f} lines/s per CPU-second  {len(lines) / wall:10,.0f} wall  "
              "(`hvdlog parse FILE > /dev/null`, process start included)")
    print(f"load average: {os.getloadavg()[0]:.2f}")


def _breakdown(count: int, repeat: int) -> None:
    """CPU ns per JSON line of each stage of parse_lines + serialisation, stages added one by
    one (interleaved rounds, best of ``repeat``): decode, key-set lookup, layout, dumps."""
    from hvdlog.parse.jsonl import event_builder, event_builders

    sample = _json_lines()
    lines = (sample * (count // len(sample) + 1))[:count]
    path = "bench/node1/rank-0.jsonl"
    loads, dumps = orjson.loads, orjson.dumps
    for line in sample:
        event_builder(tuple(loads(line)), with_path=True)
    builders = event_builders(with_path=True)

    def decode() -> None:
        for line in lines:
            loads(line)

    def lookup() -> None:
        for line in lines:
            builders[tuple(loads(line))]

    def layout() -> None:
        for line in lines:
            flat = loads(line)
            builders[tuple(flat)](flat, path)

    def serialise() -> None:
        for line in lines:
            flat = loads(line)
            dumps(builders[tuple(flat)](flat, path))

    def whole() -> None:
        for doc in parse_lines(lines, path=path, timezone="UTC"):
            dumps(doc)

    stages = {"orjson.loads": decode, "+ key-set lookup": lookup, "+ layout (builder)": layout, "+ orjson.dumps": serialise,
              "parse_lines + dumps": whole}
    best = dict.fromkeys(stages, float("inf"))
    for _ in range(repeat):
        for name, stage in stages.items():
            cpu = time.process_time()
            stage()
            best[name] = min(best[name], time.process_time() - cpu)
    for name, seconds in best.items():
        print(f"{name:22s} {seconds / len(lines) * 1e9:7,.0f} ns/line  ({len(lines) / seconds:9,.0f} lines per CPU-second)")


def _cli(lines: list[bytes], path: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the real command on a file of ``lines`` under a per-rank path."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, path)
        target.parent.mkdir(parents=True)
        target.write_bytes(b"".join(lines))
        command = [sys.executable, "-c", "from hvdlog.cli.main import main; main()", "parse", "-q", "--timezone", "UTC", str(target)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        # from this checkout's root: `-c` puts the working directory first on sys.path
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True, cwd=Path(__file__).resolve().parent.parent)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


if __name__ == "__main__":
    main()

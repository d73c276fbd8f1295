"""Capture overhead of the timeline and resources events on a training step, plus their unit costs.

    python bench/bench_timeline.py [--steps S] [--rounds R] [--part job|micro]

job: real `horovodrun -np 2 --gloo` runs of training/train.py (no straggler), rounds of four
configurations interleaved so a burst of load hits all alike: baseline; Horovod's response
cache off (what configure(timeline=True) sets); Horovod writing a timeline with the cache off
(HOROVOD_TIMELINE, no hvdlog export); HVDLOG_TIMELINE=1 (the same plus rank 0 exporting
documents every 5 s); HVDLOG_RESOURCES=1 (one resources event per rank per second); both. Reports the median
`step_seconds` over steps 4..S of both ranks, per configuration (median over rounds), and the
CPU seconds the whole job used (horovodrun and both ranks, from getrusage of the children),
which a loaded machine disturbs less than wall time.
micro: one ResourceSampler.sample() in µs; timeline reading+analysis and export in events/s
on the committed real capture (tests/timeline/), repeated.
Machine figures are printed first; on a shared machine, read ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONFIGS = {
    "baseline": {},
    "cache off": {"HOROVOD_CACHE_CAPACITY": "0"},
    "horovod timeline": {"HOROVOD_CACHE_CAPACITY": "0", "HOROVOD_TIMELINE": "{job_dir}/trace.json"},
    "hvdlog timeline": {"HVDLOG_TIMELINE": "1"},
    "resources (1 s)": {"HVDLOG_RESOURCES": "1"},
    "timeline + resources": {"HVDLOG_TIMELINE": "1", "HVDLOG_RESOURCES": "1"},
}


def one_job(root: Path, job: str, steps: int, env: dict[str, str]) -> tuple[list[float], float]:
    """step_seconds of steps 4.. of both ranks, and the CPU seconds of the job's processes."""
    cmd = [str(Path(sys.executable).with_name("horovodrun")), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
           str(REPO / "training" / "train.py"), "--log-root", str(root), "--job", job, "--epochs", "1", "--steps-per-epoch", str(steps)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HVDLOG_", "HOROVOD_TIMELINE", "HOROVOD_CACHE"))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    (root / job).mkdir(parents=True, exist_ok=True)
    env = {key: value.format(job_dir=root / job) for key, value in env.items()}
    result = subprocess.run(cmd, capture_output=True, text=True, env={**clean, **env}, timeout=600, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode:
        raise SystemExit(f"{job} failed:\n{result.stderr[-2000:]}")
    times = []
    for path in (root / job).glob("*/rank-*.jsonl"):
        for line in path.read_bytes().splitlines():
            event = orjson.loads(line)
            if event.get("message") == "train step" and event["step"] > 3:
                times.append(event["step_seconds"])
    return times, cpu


def job_part(steps: int, rounds: int) -> None:
    medians: dict[str, list[float]] = {name: [] for name in CONFIGS}
    cpus: dict[str, list[float]] = {name: [] for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(rounds):
            for index, (name, env) in enumerate(CONFIGS.items()):
                job = f"r{round_}-c{index}"
                times, cpu = one_job(Path(tmp), job, steps, env)
                medians[name].append(statistics.median(times))
                cpus[name].append(cpu)
                print(f"  round {round_} {name}: {medians[name][-1] * 1000:.1f} ms/step, {cpu:.1f} CPU-s (load {os.getloadavg()[0]:.1f})", flush=True)
    base = statistics.median(medians["baseline"])
    print(f"\nmedian step time over {rounds} rounds, {steps} steps, 2 ranks:")
    for name, values in medians.items():
        median = statistics.median(values)
        print(f"  {name:<22} {median * 1000:8.1f} ms  ({(median / base - 1) * 100:+.1f}% vs baseline; rounds: "
              + ", ".join(f"{v * 1000:.1f}" for v in values) + ")")
    base_cpu = statistics.median(cpus["baseline"])
    print("CPU seconds per job (median; all processes, start-up included):")
    for name, values in cpus.items():
        print(f"  {name:<22} {statistics.median(values):8.1f} s  ({statistics.median(values) - base_cpu:+.1f} s vs baseline; rounds: "
              + ", ".join(f"{v:.1f}" for v in values) + ")")


def micro_part() -> None:
    from hvdlog.runtime.resource_sampler import ResourceSampler
    from hvdlog.timeline.analysis import summarise
    from hvdlog.timeline_format.documents import documents, export_line
    from hvdlog.timeline_format.reader import read_events
    from hvdlog.timeline_format.records import RecordBuilder

    sampler = ResourceSampler(lambda *_: None, 1.0)
    sampler.sample()
    count = 2000
    started = time.perf_counter()
    for _ in range(count):
        sampler.sample()
    print(f"ResourceSampler.sample(): {(time.perf_counter() - started) / count * 1e6:.1f} µs per sample")

    data = (REPO / "tests" / "timeline" / "gloo-straggler-rank1-nocache.json").read_bytes()
    body = data.rstrip().rstrip(b"]").split(b"\n", 5)[-1]  # events after the start-time metadata
    big = data.rstrip().rstrip(b"]") + (b"," + body) * 40 + b"]"
    started = time.perf_counter()
    events = list(read_events(io.BytesIO(big)))
    read_s = time.perf_counter() - started
    builder = RecordBuilder()
    started = time.perf_counter()
    records = [r for e in events for r in builder.feed(e)]
    summarise(records)
    analyse_s = time.perf_counter() - started
    started = time.perf_counter()
    size = sum(len(export_line(d)) for d in documents(records, "job", "host"))
    export_s = time.perf_counter() - started
    print(f"timeline of {len(big) / 1e6:.1f} MB, {len(events)} events, {len(records)} records:")
    print(f"  read {len(events) / read_s:,.0f} events/s; analyse {len(events) / analyse_s:,.0f} events/s; "
          f"export {len(records) / export_s:,.0f} records/s ({size / len(big):.2f} bytes of NDJSON per timeline byte)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps per job (default: 30)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds over the configurations (default: 2)")
    parser.add_argument(
        "--part", choices=["job", "micro", "all"], default="all",
        help="job: step time of real 2-rank jobs per configuration; micro: unit costs; all: both (default)",
    )
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    if args.part in ("micro", "all"):
        micro_part()
    if args.part in ("job", "all"):
        job_part(args.steps, args.rounds)


if __name__ == "__main__":
    main()

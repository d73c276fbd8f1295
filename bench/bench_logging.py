"""Benchmark the training-side logging path against baselines measured in the same run.

    python bench/bench_logging.py [--calls N] [--repeat R] [--steps S]

Reports ns per call (best of R repeats of N calls) for:
  hvdlog enabled `info` with 6 fields, hvdlog disabled `debug`,
  (a) floor: f.write(orjson.dumps(d) + b"\\n"), one unbuffered write per line,
  (b) a no-op function call with the same arguments,
  (c) stdlib logging with a JSON formatter (FileHandler),
and the training step time of the example's CNN with and without one log call per step.
Ratios are what matter; absolute numbers depend on the machine (printed at the top).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hvdlog

FIELDS = {"loss": 0.4213, "lr": 0.01, "samples_per_sec": 5120.5, "epoch": 3, "batch": 17, "phase": "train"}


def best_ns(bodies: dict[str, tuple[Callable[[int], None], int]], repeat: int) -> dict[str, float]:
    """Best-of-`repeat` ns per call for each body; rounds interleave the variants so a
    burst of load on the machine hits all of them alike. ``body(n)`` runs n calls."""
    best = {name: float("inf") for name in bodies}
    for _ in range(repeat):
        for name, (body, calls) in bodies.items():
            start = time.perf_counter_ns()
            body(calls)
            best[name] = min(best[name], (time.perf_counter_ns() - start) / calls)
    return best


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as info:
        cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000, help="log calls per sample (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=5, help="samples per measurement; the best is reported (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=300, help="training steps of the CNN with and without a log call (default: %(default)s)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hvdlog-bench-"))
    print(f"machine: {machine()}")
    print(f"calls per sample: {args.calls}, best of {args.repeat}; files under {work}\n")

    os.environ.setdefault("HOROVOD_RANK", "0")
    hvdlog.configure(root=work, job="bench", level="info", console=False, capture_native=False, stall_after=None, install_hooks=False)
    log = hvdlog.get_logger()
    f = open(work / "floor.jsonl", "ab", buffering=0)  # noqa: SIM115 - closed below
    floor_doc = {"@timestamp": "2026-11-29T15:47:55.123456Z", "log.level": "info", "message": "train step", **FIELDS}

    def enabled(n: int) -> None:
        info = log.info
        with hvdlog.step(12):
            for _ in range(n):
                info("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")

    def disabled(n: int) -> None:
        debug = log.debug
        for _ in range(n):
            debug("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")

    def floor(n: int) -> None:
        write, dumps = f.write, orjson.dumps
        for _ in range(n):
            write(dumps(floor_doc) + b"\n")

    def noop(*args: object, **kwargs: object) -> None:
        return None

    def noop_calls(n: int) -> None:
        for _ in range(n):
            noop("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")

    class JsonFormatter(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            fields = record.__dict__.get("fields", {})
            return json.dumps({"@timestamp": self.formatTime(record), "log.level": record.levelname.lower(), "message": record.getMessage(), **fields})

    std = logging.getLogger("bench.stdlib")
    std.propagate = False
    handler = logging.FileHandler(work / "stdlib.jsonl")
    handler.setFormatter(JsonFormatter())
    std.addHandler(handler)
    std.setLevel(logging.INFO)

    def stdlib_calls(n: int) -> None:
        for _ in range(n):
            std.info("train step", extra={"fields": FIELDS})

    results = best_ns(
        {
            "hvdlog enabled info (6 fields)": (enabled, args.calls),
            "(a) floor: orjson + one write": (floor, args.calls),
            "(c) stdlib logging + JSON formatter": (stdlib_calls, args.calls // 4),
            "hvdlog disabled debug": (disabled, args.calls * 5),
            "(b) no-op call, same args": (noop_calls, args.calls * 5),
        },
        args.repeat,
    )
    f.close()
    width = max(map(len, results))
    for name, ns in results.items():
        print(f"{name:<{width}}  {ns:9.1f} ns/call")
    enabled_ns, floor_ns = results["hvdlog enabled info (6 fields)"], results["(a) floor: orjson + one write"]
    print(f"\nenabled / floor (a)      = {enabled_ns / floor_ns:.2f}x   (target <= 2x)")
    print(f"stdlib (c) / enabled     = {results['(c) stdlib logging + JSON formatter'] / enabled_ns:.2f}x   (target >= 5x)")
    print(f"disabled / no-op (b)     = {results['hvdlog disabled debug'] / results['(b) no-op call, same args']:.2f}x   (target <= 1.2x)")
    step_overhead(log, args.steps, enabled_ns)
    hvdlog.shutdown()


def step_overhead(log: object, steps: int, call_ns: float) -> None:
    """Step time of the example's CNN (batch 32, 1 thread), alternating with and without a log call."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "training"))
    from train import SmallCNN, synthetic_mnist

    torch.set_num_threads(1)
    torch.manual_seed(0)
    images, labels = synthetic_mnist(1024, seed=0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def one_step(i: int, with_log: bool) -> float:
        start = time.perf_counter()
        with hvdlog.step(i):
            x, y = images[(i * 32) % 992 : (i * 32) % 992 + 32], labels[(i * 32) % 992 : (i * 32) % 992 + 32]
            optimizer.zero_grad()
            loss = F.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            if with_log:
                log.info("train step", loss=loss.item(), lr=0.01, samples_per_sec=1000.0)  # type: ignore[attr-defined]
            else:
                loss.item()
        return time.perf_counter() - start

    for i in range(20):
        one_step(i, True)
    with_log, without = [], []
    for i in range(steps):  # alternate which goes first, so order effects cancel
        if i % 2:
            with_log.append(one_step(i, True))
            without.append(one_step(i, False))
        else:
            without.append(one_step(i, False))
            with_log.append(one_step(i, True))
    a, b = statistics.median(with_log), statistics.median(without)
    print(f"\ntraining step (CNN, batch 32, CPU, 1 thread), median of {steps} each, interleaved:")
    print(f"  with one log call   {a * 1e3:8.3f} ms")
    print(f"  without logging     {b * 1e3:8.3f} ms")
    print(f"  overhead            {(a - b) / b * 100:+8.3f} %   (measured; the noise of a median is about +/-1 %)")
    print(f"  one call / step     {call_ns / (b * 1e9) * 100:8.3f} %   (the enabled call's cost over the step time; target <= 0.5 %)")


if __name__ == "__main__":
    main()

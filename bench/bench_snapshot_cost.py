"""What the snapshot trigger costs training: paired A/B blocks, CPU time per step, median of ratios.

    python bench/bench_snapshot_cost.py [--pairs 60] [--block 1.0] [--amplify 200] [--size 256]

One process, hvdlog configured as a rank is (events file, native capture, stall watchdog); each step
is a fixed CPU matmul (torch, one thread) plus ``hvdlog.step``. Wall time per step measures the
machine's load as much as the step (17.5 % noise between two halves of one setting on this shared
machine), so each block records both wall and CPU time per step (``time.process_time``: every
thread of the process, so a poll's own CPU counts, while other processes' do not).

Three experiments, each ``--pairs`` pairs of back-to-back blocks of ``--block`` seconds, the order
inside each pair drawn at random, summarised as the median over pairs of (on / off - 1) with a
bootstrap 95 % interval (resampling pairs):

* ``A/A``: both blocks without the trigger: the method's own noise floor (its interval must hold 0);
* ``real``: the watchdog polling ``<job>/.hvdlog-snapshot`` once a second (the default) vs not;
* ``amplified``: a thread polling the trigger ``--amplify`` times a second vs not. The cost is
  linear in the number of polls, so the real rate's cost is this figure divided by ``--amplify``:
  a cost far below what any A/B can resolve directly becomes measurable.

Also the time of one poll (10,000 in a row), which bounds the cost from above. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import machine


def _block(step: Callable[[], None], seconds: float) -> tuple[float, float]:
    """Steps for about ``seconds``: (wall s, CPU s) per step."""
    wall0, cpu0, steps = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - wall0 < seconds:
        step()
        steps += 1
    return (time.perf_counter() - wall0) / steps, (time.process_time() - cpu0) / steps


class _Poller(threading.Thread):
    """Calls ``poll`` ``rate`` times a second while ``on`` is set: the amplified trigger."""

    def __init__(self, poll: Callable[[], object], rate: float) -> None:
        super().__init__(daemon=True)
        self.poll, self.period = poll, 1.0 / rate
        self.on, self.done = threading.Event(), threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            if self.on.wait(0.1):
                self.poll()
                time.sleep(self.period)


def _summary(ratios: list[float], rng: random.Random) -> tuple[float, float, float]:
    """Median of the per-pair ratios minus one, in %, with a bootstrap 95 % interval."""
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return ((statistics.median(ratios) - 1) * 100, (medians[50] - 1) * 100, (medians[1949] - 1) * 100)


def _pairs(count: int, run: Callable[[bool], tuple[float, float]], rng: random.Random) -> tuple[list[float], list[float]]:
    """``count`` pairs (on, off) in random order: the per-pair ratios of wall and of CPU per step."""
    wall, cpu = [], []
    for _ in range(count):
        first = rng.random() < 0.5
        results = {first: run(first), not first: run(not first)}
        wall.append(results[True][0] / results[False][0])
        cpu.append(results[True][1] / results[False][1])
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60, help="pairs of blocks per experiment")
    parser.add_argument("--block", type=float, default=1.0, help="seconds per block (the real poll is once a second)")
    parser.add_argument("--amplify", type=float, default=200.0, help="polls per second in the amplified experiment")
    parser.add_argument("--size", type=int, default=256, help="matmul size: the step's compute")
    parser.add_argument("--seed", type=int, default=43)
    args = parser.parse_args()
    import torch

    import hvdlog

    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    rows: list[tuple[str, tuple[float, float, float], tuple[float, float, float]]] = []
    with tempfile.TemporaryDirectory() as root:
        config = hvdlog.configure(root=root, job="snapshot-cost", stall_after=30.0, console=False)
        watchdog = config.watchdog
        assert watchdog is not None and watchdog.snapshot is not None
        poll = watchdog.snapshot
        started = time.perf_counter()
        for _ in range(10_000):
            poll()
        poll_us = (time.perf_counter() - started) / 10_000 * 1e6
        a = torch.randn(args.size, args.size)
        counter = iter(range(10**9))

        def step() -> None:
            with hvdlog.step(next(counter)):
                (a @ a).sum().item()

        watchdog.snapshot = None
        rows.append(("A/A (no trigger either way)", *_summaries(_pairs(args.pairs, lambda _on: _block(step, args.block), rng), rng)))

        def real(on: bool) -> tuple[float, float]:
            watchdog.snapshot = poll if on else None
            return _block(step, args.block)

        rows.append(("real: watchdog polls once a second", *_summaries(_pairs(args.pairs, real, rng), rng)))
        watchdog.snapshot = None
        poller = _Poller(poll, args.amplify)
        poller.start()

        def amplified(on: bool) -> tuple[float, float]:
            (poller.on.set if on else poller.on.clear)()
            return _block(step, args.block)

        rows.append((f"amplified: {args.amplify:g} polls a second", *_summaries(_pairs(args.pairs, amplified, rng), rng)))
        poller.on.clear()
        poller.done.set()
        watchdog.snapshot = poll
        hvdlog.shutdown()
    print(f"machine: {machine()}; {args.pairs} pairs of {args.block:g} s blocks per experiment, step = {args.size}x{args.size} matmul")
    print("| experiment | CPU per step: median change (95 % CI) | wall per step: median change (95 % CI) |\n|---|---|---|")
    for name, cpu, wall in rows:
        print(f"| {name} | {cpu[0]:+.2f} % ({cpu[1]:+.2f} .. {cpu[2]:+.2f}) | {wall[0]:+.2f} % ({wall[1]:+.2f} .. {wall[2]:+.2f}) |")
    cpu_amp = rows[2][1]
    print(f"amplified CPU change / {args.amplify:g} = the real rate's cost: {cpu_amp[0] / args.amplify:+.4f} % "
          f"(95 % CI {cpu_amp[1] / args.amplify:+.4f} .. {cpu_amp[2] / args.amplify:+.4f} %)")
    print(f"one poll: {poll_us:.1f} us; once a second per rank: {poll_us / 1e4:.4f} % of one core (the upper bound)")


def _summaries(ratios: tuple[list[float], list[float]], rng: random.Random) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(CPU summary, wall summary) of one experiment."""
    wall, cpu = ratios
    return _summary(cpu, rng), _summary(wall, rng)


if __name__ == "__main__":
    main()

"""What the snapshot trigger costs training: step time with the watchdog polling the trigger, and without.

    python bench/bench_snapshot_cost.py [--blocks 40] [--steps 25] [--size 384]

One process, hvdlog configured as a rank is (events file, native capture, stall watchdog polling
every second); each step is a fixed CPU matmul (torch) plus ``hvdlog.step``. Blocks of ``--steps``
steps alternate between the watchdog polling ``<job>/.hvdlog-snapshot`` (the default) and not
(``watchdog.snapshot = None``), so both see the same load; the figure is the median block's mean
step time each way, and the difference with its spread (the difference between two halves of
the same kind). A poll is one ``stat`` a second in the watchdog thread; its own time is measured
too, which bounds the cost from above. Prints one markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--size", type=int, default=384, help="matmul size: the step's compute")
    args = parser.parse_args()
    import torch

    import hvdlog

    torch.set_num_threads(1)
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
        times: dict[bool, list[float]] = {True: [], False: []}
        step = 0
        for block in range(args.blocks):
            polling = block % 2 == 0
            watchdog.snapshot = poll if polling else None
            began = time.perf_counter()
            for _ in range(args.steps):
                with hvdlog.step(step):
                    (a @ a).sum().item()
                step += 1
            times[polling].append((time.perf_counter() - began) / args.steps)
        hvdlog.shutdown()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    half = args.blocks // 4
    noise = abs(statistics.median(times[False][:half]) - statistics.median(times[False][half:])) / off * 100
    print(f"machine: {machine()}")
    print("| polling | median step (ms) | blocks |\n|---|---|---|")
    print(f"| on | {on * 1e3:.3f} | {len(times[True])} |\n| off | {off * 1e3:.3f} | {len(times[False])} |")
    print(f"difference: {(on - off) / off * 100:+.2f} % (noise between two halves of the off blocks: {noise:.2f} %)")
    print(f"one poll: {poll_us:.1f} us, once a second per rank: {poll_us / 1e4:.4f} % of one core")


if __name__ == "__main__":
    main()

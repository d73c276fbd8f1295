"""A real Horovod job with one slow rank that logs throughput measured on its own compute time.

In synchronous training every rank ends a step together, so only a per-rank measure of the
rank's own work (taken before the allreduce wait) can name the slow rank; this job logs
``samples_per_sec`` that way. Usage: horovodrun -np 2 python straggler_job.py ROOT JOB SLOW_RANK DELAY STEPS
"""

from __future__ import annotations

import sys
import time

import horovod.torch as hvd
import torch

import hvdlog


def main() -> int:
    root, job, slow_rank, delay, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    hvdlog.configure(root=root, job=job, stall_after=None)
    log = hvdlog.get_logger("hvdlog.straggler_job")
    hvd.init()
    torch.set_num_threads(1)
    weights = torch.zeros(1000)
    for step in range(1, steps + 1):
        with hvdlog.step(step, epoch=0):
            started = time.perf_counter()
            if hvd.rank() == slow_rank:
                time.sleep(delay)
            # Real work (~30 ms of matmuls), so the fast ranks' own samples/s stays steady under CPU contention.
            x = torch.randn(256, 256)
            for _ in range(8):
                x = torch.tanh(x @ x / 16)
            grad = x.mean(dim=0).repeat(4)[:1000]
            computed = time.perf_counter() - started
            weights -= 0.01 * hvd.allreduce(grad, name="grad")
            log.info("train step", samples_per_sec=round(64 / computed, 1))
    log.info("training done", steps=steps)
    hvdlog.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

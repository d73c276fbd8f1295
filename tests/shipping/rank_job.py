"""A tiny real Horovod job that writes the per-rank files Filebeat ships (tests only).

Each rank configures hvdlog (JSON events + native stdout/stderr capture), runs a few
allreduce steps, and, on request, makes rank 1 late (Horovod's stall inspector prints
its multi-line block on rank 0 under MPI) and makes rank 1 die with a traceback.
Environment: HVDLOG_ROOT, HVDLOG_JOB, JOB_STEPS, JOB_TENSORS (allreduces per step),
JOB_LATE_SECONDS, JOB_CRASH.
"""

from __future__ import annotations

import os
import time

import horovod.torch as hvd
import torch

import hvdlog


class InjectedFault(RuntimeError):  # noqa: N818 - a name without "Error" is the point of the case
    """A class name that does not end in Error: the shipper must still join its traceback."""


hvdlog.configure(level="debug", stall_after=None)
hvd.init()
hvdlog.refresh_rank()
log = hvdlog.get_logger("tests.rank_job")
steps = int(os.environ.get("JOB_STEPS", "3"))
tensors = int(os.environ.get("JOB_TENSORS", "1"))
late = float(os.environ.get("JOB_LATE_SECONDS", "0"))
for step in range(steps):
    with hvdlog.step(step, epoch=0):
        if late and hvd.rank() == 1 and step == 1:
            time.sleep(late)
        total = hvd.allreduce(torch.ones(4) * (hvd.rank() + 1), name=f"grad.{step}")
        for extra in range(1, tensors):
            hvd.allreduce(torch.ones(4), name=f"grad.{step}.{extra}")
        log.info("train step", loss=float(total.sum()), lr=0.01)
        print(f"rank {hvd.rank()} finished step {step}", flush=True)
if os.environ.get("JOB_CRASH") and hvd.rank() == 1:
    raise InjectedFault("injected fault on rank 1")
hvdlog.shutdown()

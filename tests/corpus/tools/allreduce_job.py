"""A tiny Horovod job whose output feeds the parsing corpus (see record.sh).

CORPUS_STALL=N: rank 1 sleeps N seconds before the second allreduce (the stall inspector
on rank 0 then warns); CORPUS_CRASH=1: rank 1 raises before the second allreduce.
(Environment, not options: horovodrun takes `--stall...` prefixes as its own options.)
"""

import os
import sys
import time

import horovod.torch as hvd
import torch

STALL = float(os.environ.get("CORPUS_STALL", "0"))
CRASH = os.environ.get("CORPUS_CRASH") == "1"
STEPS = int(os.environ.get("CORPUS_STEPS", "3"))

hvd.init()
print(f"rank {hvd.rank()} of {hvd.size()} started", flush=True)
for step in range(STEPS):
    if step == 1 and hvd.rank() == 1:
        if CRASH:
            raise RuntimeError(f"injected fault on rank {hvd.rank()} at step {step}")
        if STALL:
            time.sleep(STALL)
    value = hvd.allreduce(torch.ones(4) * (hvd.rank() + 1), name=f"grad.step{step}")
    print(f"step {step} allreduce {value.tolist()}", flush=True)
print("done", file=sys.stderr, flush=True)
hvd.shutdown()

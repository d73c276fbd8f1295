"""A real elastic Horovod + PyTorch worker for tests/runtime/test_resets.py.

Every step does one allreduce and logs ``step`` with Horovod's own ``hvd.rank()``/
``hvd.size()``/``hvd.local_rank()`` read at that moment (under ``extra``), so the test can
compare each event's ``rank``/``size`` with the truth; the reset callback does the same.
Faults come from the environment, decided by the rank a worker was *spawned* as:

- ``ELASTIC_KILL_AT=<spawn rank>:<step>``: that worker SIGKILLs itself at that step (once:
  a marker file in ``ELASTIC_DIR`` keeps a respawned worker alive);
- ``ELASTIC_STEPS``: steps to run; ``ELASTIC_STEP_SECONDS``: sleep per step (gives the
  driver's host discovery, once a second, time to see a change); ``ELASTIC_COMMIT_EVERY``:
  ``state.commit()`` every N steps (the steps since are replayed after a failure), and
  ``state.check_host_updates()`` on the others;
- ``ELASTIC_HOSTS_AT=<step>:<text>``: rank 0 writes ``text`` (``;`` for newlines) to the
  discovery file ``ELASTIC_DIR/hosts`` at that step (a host added or removed mid-run);
  ``ELASTIC_FINAL_SIZE``: go on past ``ELASTIC_STEPS`` until the job has that many workers
  (every worker agrees: size and step are the same on all), so a host added or removed is
  always seen however slowly the driver and a new worker are.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import horovod.torch as hvd
import torch

import hvdlog

hvdlog.configure(stall_after=None)
log = hvdlog.get_logger()
SPAWN_RANK = int(os.environ.get("HOROVOD_RANK", "-1"))
WORK = Path(os.environ["ELASTIC_DIR"])
STEPS = int(os.environ.get("ELASTIC_STEPS", "20"))
PAUSE = float(os.environ.get("ELASTIC_STEP_SECONDS", "0.2"))
COMMIT_EVERY = int(os.environ.get("ELASTIC_COMMIT_EVERY", "1"))
FINAL_SIZE = int(os.environ.get("ELASTIC_FINAL_SIZE", "0"))
MAX_STEPS = 400


def truth() -> dict[str, int]:
    return {"hvd_rank": hvd.rank(), "hvd_size": hvd.size(), "hvd_local_rank": hvd.local_rank()}


def fault(name: str) -> tuple[int, str] | None:
    value = os.environ.get(name)
    if not value:
        return None
    key, _, rest = value.partition(":")
    return int(key), rest


def maybe_kill(step: int) -> None:
    kill = fault("ELASTIC_KILL_AT")
    marker = WORK / "killed"
    if kill and kill == (SPAWN_RANK, str(step)) and not marker.exists():
        marker.write_text(str(os.getpid()))
        print(f"spawn rank {SPAWN_RANK} kills itself at step {step}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_change_hosts(step: int) -> None:
    change = fault("ELASTIC_HOSTS_AT")
    marker = WORK / "hosts-changed"
    if change and change[0] == step and hvd.rank() == 0 and not marker.exists():
        marker.write_text("1")
        (WORK / "hosts").write_text(change[1].replace(";", "\n") + "\n")
        log.info("hosts changed", **truth())


hvd.init()
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
state = hvd.elastic.TorchState(model, optimizer, batch=0)
state.register_reset_callbacks([lambda: log.info("reset callback", **truth())])


@hvd.elastic.run
def train(state: hvd.elastic.TorchState) -> None:
    while state.batch < STEPS or (FINAL_SIZE and hvd.size() != FINAL_SIZE and state.batch < MAX_STEPS):
        step = state.batch
        with hvdlog.step(step):
            maybe_kill(step)
            hvd.allreduce(torch.ones(1), name="step")
            log.info("step", **truth())
            print(f"native line at step {step} rank {hvd.rank()}", flush=True)
            maybe_change_hosts(step)
            time.sleep(PAUSE)
        state.batch = step + 1
        if state.batch % COMMIT_EVERY == 0:
            state.commit()
        else:
            state.check_host_updates()


train(state)
log.info("done", **truth())
hvdlog.shutdown()
sys.exit(0)

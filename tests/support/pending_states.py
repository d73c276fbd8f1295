"""A real hvd.DistributedOptimizer, one process (size 1), walked through the states hvdlog.runtime.pending reads.

Runs in its own process (``hvd.init()`` would change the rank every other test reads) and
prints one JSON object: what :mod:`hvdlog.runtime.pending` saw in each state, for tests/runtime/test_pending.py.
At size 1 Horovod registers the gradient hooks only when ``HOROVOD_ELASTIC=1``, set after init.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict
from typing import Any

import horovod.torch as hvd
import torch
from torch import nn

from hvdlog.runtime import pending
from hvdlog.runtime.context import mark_progress, progress_state
from hvdlog.runtime.watchdog import StallWatchdog


class Net(nn.Module):
    """A body and a head: a loss on the head alone leaves the body's gradient hooks unfired."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


class Trainer:
    """Holds its optimizer as an attribute, like most training frameworks."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer


def make(factory: Any, model: Net) -> Any:
    return factory(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters())


def wait_complete(optimizer: Any) -> None:
    """Let Horovod's background thread finish every submitted allreduce (size 1: nothing to wait for)."""
    for handle, _ in list(optimizer._handles.values()):
        while handle is not None and not hvd.poll(handle):
            time.sleep(0.01)


def found(frame: Any, *optimizers: Any) -> list[bool]:
    ids = {id(o) for o in pending.find_optimizers(frame)}
    return [id(o) in ids for o in optimizers]


def stack_scan(optimizer: Any) -> dict[str, list[bool]]:
    """A made-before-configure optimizer is found on the stalled stack only: as a local, or one attribute down."""
    local = {"no frame": found(None, optimizer), "as a local": found(sys._getframe(), optimizer)}
    del optimizer

    def held_by_trainer(trainer: Trainer) -> list[bool]:
        return found(sys._getframe(), trainer.optimizer)

    local["as trainer.optimizer"] = held_by_trainer(Trainer(EARLY[0]))
    return local


EARLY: list[Any] = []


def main() -> int:
    hvd.init()
    os.environ["HOROVOD_ELASTIC"] = "1"
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    out: dict[str, Any] = {}

    original = hvd.DistributedOptimizer
    EARLY.append(make(original, Net()))  # made before hvdlog wrapped the factory
    out["early"] = stack_scan(EARLY[0])
    pending.track_distributed_optimizers()
    out["factory wrapped"] = hvd.DistributedOptimizer is not original and getattr(hvd.DistributedOptimizer, "__wrapped__", None) is original
    pending.track_distributed_optimizers()  # idempotent
    out["wrapped once"] = hvd.DistributedOptimizer.__wrapped__ is original
    out["one wrapper"] = hvd.DistributedOptimizer is sys.modules["horovod.torch.optimizer"].DistributedOptimizer

    model = Net()
    optimizer = make(hvd.DistributedOptimizer, model)
    out["registered"] = found(None, optimizer)
    out["fresh"] = asdict(pending.inspect_optimizer(optimizer))

    optimizer.zero_grad()
    model.head(x).sum().backward()  # only the head's hooks fire
    wait_complete(optimizer)
    out["head only"] = asdict(pending.inspect_optimizer(optimizer))
    out["mid-step, in a collective"] = in_a_collective()

    stale = dict(optimizer._handles)
    optimizer.synchronize()  # takes the results: Horovod clears the handles
    out["after synchronize"] = asdict(pending.inspect_optimizer(optimizer))
    optimizer._handles.update(stale)  # the watchdog may hold handles synchronize() just cleared
    out["cleared handles"] = asdict(pending.inspect_optimizer(optimizer))
    optimizer._handles.clear()
    with optimizer.skip_synchronize():
        optimizer.step()
    out["between steps, in a collective"] = in_a_collective()

    out["stall outside"] = watchdog_report(model, optimizer, x)
    out["race"] = race(model, optimizer, x)

    broken = make(hvd.DistributedOptimizer, Net())
    broken._handles = None  # a state hvdlog cannot read
    failures = sum(pending.FAILURES.values())
    fields: dict[str, Any] = {}
    pending.add_pending_tensors(fields, None)
    out["broken"] = {"fields": fields, "failures counted": sum(pending.FAILURES.values()) - failures}
    print(json.dumps(out))
    return 0


def in_a_collective() -> dict[str, Any]:
    """The fields for a rank the stack shows waiting in some Horovod collective."""
    fields: dict[str, Any] = {"horovod.stall.operation": "broadcast_parameters > synchronize"}
    pending.add_pending_tensors(fields, None)
    return fields


def watchdog_report(model: Net, optimizer: Any, x: torch.Tensor) -> dict[str, Any]:
    """The real watchdog on this thread, stuck mid-step after the head's gradients: its stall event."""
    emitted: list[tuple[str, str, dict[str, Any]]] = []
    mark_progress(7)
    watchdog = StallWatchdog(lambda *event: emitted.append(event), after=0.3, poll=0.05)
    watchdog.start()
    optimizer.zero_grad()
    model.head(x).sum().backward()
    time.sleep(1.0)  # stuck outside any collective, body gradients never submitted
    watchdog.stop()
    optimizer.step()
    stall = next(fields for _, _, fields in emitted if fields["event.action"] == "stall")
    message = next(message for _, message, fields in emitted if fields["event.action"] == "stall")
    shown = {k: v for k, v in stall.items() if k != "horovod.stall.stack"}
    return {"fields": shown, "message": message, "thread": progress_state.thread_id == threading.get_ident()}


def race(model: Net, optimizer: Any, x: torch.Tensor) -> dict[str, Any]:
    """Another thread inspects as fast as it can while this one trains: no failure, training unharmed."""
    failures = sum(pending.FAILURES.values())
    stop = threading.Event()
    inspections = [0]
    errors: list[str] = []

    def inspect_forever() -> None:
        while not stop.is_set():
            fields: dict[str, Any] = {}
            pending.add_pending_tensors(fields, None)
            if "horovod.stall.inspection_error" in fields:
                errors.append(fields["horovod.stall.inspection_error"])
            inspections[0] += 1

    thread = threading.Thread(target=inspect_forever)
    thread.start()
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = ((model(x) - 1) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    stop.set()
    thread.join()
    return {
        "inspections": inspections[0],
        "errors": errors,
        "failures counted": sum(pending.FAILURES.values()) - failures,
        "loss fell": losses[-1] < losses[0],
    }


if __name__ == "__main__":
    sys.exit(main())

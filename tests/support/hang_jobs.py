"""Synthetic hung jobs of any size, one per hang class, in hvdlog's file layout.

Each rank's ``<root>/<job>/node<r // 8>/rank-<r>.jsonl`` holds a few step events, then the
stall events the watchdog (hvdlog/runtime/watchdog.py) writes: the fields of a real report
(tests/corpus/horovod.app/train-rank1-events.log), the stack in ``traceback.format_list``'s
form. ``culprit`` is the rank the class is about.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import orjson

__all__ = ["CLASSES", "write_hung_job"]

BASE: Final = "2026-12-06T01:00:"
_LOOP: Final = '  File "/work/train.py", line 130, in main\n    loss = train_step(model, batch)\n'
_SYNC: Final = ('  File "/work/train.py", line 141, in train_step\n    optimizer.step()\n'
                '  File "/venv/lib/python3.11/site-packages/horovod/torch/optimizer.py", line 190, in step\n    self.synchronize()\n'
                '  File "/venv/lib/python3.11/site-packages/horovod/torch/optimizer.py", line 284, in synchronize\n'
                '    output = synchronize(handle)\n')
_LOADER: Final = ('  File "/work/data.py", line 88, in batches\n    yield next(iterator)\n'
                  '  File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 631, in __next__\n'
                  '    data = self._next_data()\n')

#: class -> what the culprit does (the others wait in the optimizer's allreduce).
CLASSES: Final = ("culprit_outside", "divergence", "dead_or_silent", "silent", "all_wedged", "capture_stuck")


def _event(job: str, rank: int, size: int, second: float, **fields: Any) -> bytes:
    head = {"@timestamp": f"{BASE}{second:06.3f}Z", "log.level": "info", "host.name": f"node{rank // 8}",
            "process.pid": 4000 + rank, "job": job, "event.dataset": "horovod.app", "rank": rank, "local_rank": rank % 8,
            "size": size}
    return orjson.dumps({**head, **fields})


def _waiting(tensors: list[str], seconds: float) -> dict[str, Any]:
    return {"log.level": "warning", "message": f"no progress for {seconds:.0f} s: waiting in horovod _DistributedOptimizer.step > synchronize",
            "event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": seconds, "step": 5,
            "horovod.stall.operation": "_DistributedOptimizer.step > synchronize", "horovod.stall.tensors": tensors,
            "log.origin.file.name": "/work/train.py", "log.origin.file.line": 141, "log.origin.function": "train_step",
            "horovod.stall.stack": _LOOP + _SYNC}


def _outside(seconds: float, **extra: Any) -> dict[str, Any]:
    return {"log.level": "warning", "message": f"no progress for {seconds:.0f} s outside any horovod collective", "event.action": "stall",
            "horovod.stall.source": "watchdog", "horovod.stall.seconds": seconds, "step": 5, "log.origin.file.name": "/work/data.py",
            "log.origin.file.line": 88, "log.origin.function": "batches", "horovod.stall.stack": _LOOP + _LOADER, **extra}


def _stalls(kind: str, rank: int, culprit: int) -> list[dict[str, Any]]:
    """The stall reports of one rank (two, 3 s apart), or none for a rank that says nothing."""
    if rank == culprit and kind in ("dead_or_silent", "silent"):
        return []
    reports = []
    for seconds in (3.0, 6.0):
        if rank == culprit and kind == "culprit_outside":
            reports.append(_outside(seconds))
        elif rank == culprit and kind == "capture_stuck":
            reports.append(_outside(seconds, **{"event.reason": "capture_stuck"}))
        elif rank == culprit and kind == "divergence":
            reports.append(_waiting(["allreduce.head.weight"], seconds))
        else:
            reports.append(_waiting(["allreduce.fc1.weight", "allreduce.fc1.bias"], seconds))
    return reports


def write_hung_job(root: Path, kind: str, size: int, culprit: int, job: str | None = None) -> Path:
    """Write one hung job of ``size`` ranks; return the job's folder."""
    job = job or f"hang-{kind}"
    for rank in range(size):
        folder = root / job / f"node{rank // 8}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [_event(job, rank, size, step * 0.5 + rank * 1e-4, message="train step", step=step) for step in range(1, 6)]
        lines += [_event(job, rank, size, 5.5 + seconds, **report)
                  for report in _stalls(kind, rank, culprit) for seconds in (report["horovod.stall.seconds"],)]
        if rank == culprit and kind == "dead_or_silent":
            lines.append(_event(job, rank, size, 3.2, **{"log.level": "error", "message": "killed by SIGTERM", "event.action": "signal",
                                                         "event.reason": "SIGTERM"}))
        (folder / f"rank-{rank}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return root / job

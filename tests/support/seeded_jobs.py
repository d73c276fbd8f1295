"""A seeded log root of synthetic jobs in hvdlog's own layout, with known failures planted.

``<root>/<job>/<host>/rank-N.jsonl``, events as hvdlog's runtime writes them. 40 jobs, one an
hour, 8 ranks each on 8 of 16 hosts (one rank per host):

* ``node13`` is a bad host: 6 jobs fail with an ECC error on it (numbers differ per job);
  4 more failed jobs ran on it and failed elsewhere (the code bug), so it is behind 6 of the
  10 failures it ran in;
* one code bug (``ValueError`` in ``train.py:load_batch``) fails 4 jobs, on 4 other hosts,
  with different numbers and paths in its message;
* 6 one-off failures, each on its own host (never node13);
* 24 jobs finish. The newest failed job is an ECC failure on node13.

"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

__all__ = ["BAD_HOST", "CODE_BUG", "ONE_OFFS", "job_documents", "seed_root"]

BAD_HOST = "node13"
HOSTS = [f"node{index:02d}" for index in range(1, 17)]
BASE = datetime(2026, 11, 1, tzinfo=timezone.utc)
CODE_BUG = ("ValueError", "expected {a} samples in /data/shards/part-{b:04d}, got {c}", "load_batch")
ECC = ("RuntimeError", "CUDA error: uncorrectable ECC error encountered on device {a} (0x{b:x})", "train_step")
ONE_OFFS = [
    ("KeyError", "'lr_decay'", "configure"),
    ("FileNotFoundError", "[Errno 2] No such file or directory: '/data/imagenet/val'", "open_dataset"),
    ("ZeroDivisionError", "division by zero", "average_loss"),
    ("AssertionError", "loss is nan", "check_loss"),
    ("OSError", "[Errno 28] No space left on device", "save_checkpoint"),
    ("TypeError", "forward() missing 1 required positional argument: 'mask'", "forward"),
]
STEPS = 30


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def _trace(kind: str, text: str, function: str, line: int) -> str:
    return (f'Traceback (most recent call last):\n  File "/home/ml/train.py", line 201, in <module>\n    main()\n'
            f'  File "/home/ml/train.py", line {line}, in {function}\n    run()\n'
            f'  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, in _call_impl\n'
            f"    return forward_call(*args)\n{kind}: {text}\n")


def job_documents(job: str, start: datetime, hosts: list[str], failure: tuple[str, str, str] | None, culprit: int,
                  fail_step: int, rng: random.Random, steps: int = STEPS) -> Iterator[dict[str, Any]]:
    """Every event of one job: steps on every rank, then the culprit's exception and the others' shutdown, or the end."""
    size = len(hosts)
    last = fail_step if failure is not None else steps
    for rank, host in enumerate(hosts):
        common = {"host.name": host, "job": job, "event.dataset": "horovod.app", "rank": rank, "size": size, "process.pid": 1000 + rank}
        yield {"@timestamp": _stamp(start), "log.level": "info", "message": "training starts", **common}
        for step in range(1, last + 1):
            loss = round(2.3 / step + rng.random() / 100, 4)
            yield {"@timestamp": _stamp(start + timedelta(seconds=step)), "log.level": "info",
                   "message": f"step {step}: loss {loss}, {rng.randint(500, 900)} samples/s on {host}", "step": step, "loss": loss, **common}
        end = start + timedelta(seconds=last + 1)
        if failure is None:
            yield {"@timestamp": _stamp(end), "log.level": "info", "message": "training done", "step": last, **common}
            yield {"@timestamp": _stamp(end), "log.level": "info", "message": "process exit", "event.action": "exit",
                   "process.exit_code": 0, **common}
        elif rank == culprit:
            kind, text, function = failure
            yield {"@timestamp": _stamp(end), "log.level": "critical", "message": f"uncaught {kind} in main thread: {text}",
                   "event.action": "uncaught_exception", "error.type": kind, "error.message": text,
                   "error.stack_trace": _trace(kind, text, function, rng.randint(40, 180)), "step": last, **common}
        else:
            message = ("Horovod has been shut down. This was caused by an exception on one of the ranks or an "
                       "asynchronous operation that was canceled")
            yield {"@timestamp": _stamp(end + timedelta(milliseconds=500 + rank)), "log.level": "critical",
                   "message": f"uncaught HorovodInternalError in main thread: {message}", "event.action": "uncaught_exception",
                   "error.type": "horovod.common.exceptions.HorovodInternalError", "error.message": message, "step": last, **common}


def _plan(rng: random.Random) -> list[tuple[str, Any, str | None]]:
    """(kind, failure, culprit host) per job, in time order; the newest failure is an ECC one."""
    others = [host for host in HOSTS if host != BAD_HOST]
    bug_hosts = rng.sample(others, 4)
    one_off_hosts = rng.sample([host for host in others if host not in bug_hosts], 6)
    plan: list[tuple[str, Any, str | None]] = [("ecc", ECC, BAD_HOST)] * 5
    plan += [("bug", CODE_BUG, host) for host in bug_hosts]
    plan += [("one-off", failure, host) for failure, host in zip(ONE_OFFS, one_off_hosts, strict=True)]
    plan += [("ok", None, None)] * 24
    rng.shuffle(plan)
    return [*plan, ("ecc", ECC, BAD_HOST)]


def seed_root(root: Path, seed: int = 44) -> dict[str, list[str]]:
    """Write the 40 jobs under ``root``; returns the jobs of each kind (ecc, bug, one-off, ok)."""
    rng = random.Random(seed)
    kinds: dict[str, list[str]] = {}
    others = [host for host in HOSTS if host != BAD_HOST]
    for index, (kind, failure, culprit_host) in enumerate(_plan(rng)):
        job = f"train-{index:03d}"
        kinds.setdefault(kind, []).append(job)
        if kind in ("ecc", "bug"):  # node13 runs in every job that failed on it or of the bug (its 10 failures)
            hosts = [BAD_HOST] + ([culprit_host] if culprit_host != BAD_HOST else [])
            hosts += rng.sample([host for host in others if host not in hosts], 8 - len(hosts))
        elif kind == "one-off":
            hosts = [culprit_host, *rng.sample([host for host in others if host != culprit_host], 7)]
        else:
            hosts = rng.sample(HOSTS, 8)
        rng.shuffle(hosts)
        culprit = hosts.index(culprit_host) if culprit_host else 0
        numbers = {"a": rng.randint(0, 7) if kind == "ecc" else rng.randint(100, 9000), "b": rng.randint(1, 4000), "c": rng.randint(1, 99)}
        filled = (failure[0], failure[1].format(**numbers), failure[2]) if failure is not None else None
        by_path: dict[Path, list[bytes]] = {}
        for doc in job_documents(job, BASE + timedelta(hours=index), hosts, filled, culprit, rng.randint(5, 25), rng):
            path = root / job / doc["host.name"] / f"rank-{doc['rank']}.jsonl"
            by_path.setdefault(path, []).append(orjson.dumps(doc))
        for path, lines in by_path.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"\n".join(lines) + b"\n")
    return kinds

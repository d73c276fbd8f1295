"""How close to the floor can a logging call written in Python get? One command:

    python bench/logging_floor_probe.py [--calls N] [--repeat R]

A probe, not hvdlog: the least a call with hvdlog's features must do, all in one function
with nothing else (no structlog, no fallbacks, no error handling): a call with 6 keyword
arguments, the plan for its key set (two keys moved under ``extra``), one ``orjson.dumps``, the
cached timestamp head, one join with pre-rendered static and bound fields, the quick secret
filter, a lock and one ``os.write``. Measured against the floor (``os.write(orjson.dumps(d) +
newline)``) in the same process, best of R interleaved rounds, CPU time. If this probe is
above 2.5x the floor, so is any pure-Python logging call with those features.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from typing import Any

import orjson

_dumps = orjson.dumps
_THOUSANDS = [f"{n:03d}".encode() for n in range(1000)]
_STATIC_AND_BOUND = (
    b',"host.name":"node1","process.pid":1234,"job":"bench","event.dataset":"horovod.app",'
    b'"rank":0,"local_rank":0,"size":1,"local_size":1,"step":12,'
)
_LEVEL = b'Z","log.level":"info","message":'
_SECRET_FORMS = (b"czNjcjN0LWJlbmNoLXRva2VuLXZhbHVl", b"MzY3IzdC1iZW5jaC10b2tlbi12YWx1", b"zM2NyM3QtYmVuY2gtdG9rZW4tdmFs", b"s3cr3t-bench-token-value")
_ALPHABET = set(b"".join(_SECRET_FORMS))
_TABLE = bytes(0x61 if byte in _ALPHABET else 0x20 for byte in range(256))
_RUN = b"a" * min(map(len, _SECRET_FORMS))
FIELDS = {"loss": 0.4213, "lr": 0.01, "samples_per_sec": 5120.5, "epoch": 3, "batch": 17, "phase": "train"}


def _layout(fields: dict[str, Any]) -> dict[str, Any]:
    fields["extra"] = {"samples_per_sec": fields.pop("samples_per_sec"), "phase": fields.pop("phase")}
    return fields


class Probe:
    """The minimal call: state in attributes, one method."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.RLock()
        self.plans = {tuple(FIELDS): _layout}
        self.messages = {"train step": b'"train step"'}
        self.second = (0, 0, b"")

    def info(self, event: str, **kw: Any) -> None:
        tail = _dumps(self.plans[tuple(kw)](kw), None, orjson.OPT_APPEND_NEWLINE)
        now = time.time_ns()
        start, end, head = self.second
        if not start <= now < end:
            start = now - now % 1_000_000_000
            head = b'{"@timestamp":"' + time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(start // 1_000_000_000)).encode()
            self.second = (start, start + 1_000_000_000, head)
        micros = (now - start) // 1000
        line = b"".join((head, _THOUSANDS[micros // 1000], _THOUSANDS[micros % 1000], _LEVEL, self.messages[event], _STATIC_AND_BOUND, tail[1:]))
        if tail.translate(_TABLE).find(_RUN) >= 0:
            raise AssertionError("the probe's fields hold no secret")
        with self.lock:
            os.write(self.fd, line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="hvdlog-probe-")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    floor_fd, probe_fd = os.open(f"{work}/floor.jsonl", flags, 0o640), os.open(f"{work}/probe.jsonl", flags, 0o640)
    doc = {"@timestamp": "2026-11-29T15:47:55.123456Z", "log.level": "info", "message": "train step", **FIELDS}
    info = Probe(probe_fd).info

    def floor(n: int) -> None:
        write, dumps = os.write, orjson.dumps
        for _ in range(n):
            write(floor_fd, dumps(doc) + b"\n")

    def probe(n: int) -> None:
        for _ in range(n):
            info("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")

    best = {"floor": float("inf"), "probe": float("inf")}
    for _ in range(args.repeat):
        for name, body in (("floor", floor), ("probe", probe)):
            started = time.thread_time_ns()
            body(args.calls)
            best[name] = min(best[name], (time.thread_time_ns() - started) / args.calls)
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"floor {best['floor']:,.0f} ns, minimal Python call {best['probe']:,.0f} ns: {best['probe'] / best['floor']:.2f}x the floor")


if __name__ == "__main__":
    main()

"""User-space instructions per logging call, under valgrind's callgrind: a measure the
machine's load does not move (kernel time is not counted). One command:

    python bench/bench_logging_instructions.py [--calls N]

Each variant runs in its own interpreter twice, with N calls and with none; the difference
over N is the cost of one call. Variants: the floor (``os.write(orjson.dumps(d) + newline)``),
hvdlog's ``log.info`` as in bench_logging.py (redaction on, inside ``hvdlog.step``, 2 of 6
keys undeclared), and structlog's fastest documented set-up. Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VARIANT = r'''
import os, sys, tempfile, logging
from pathlib import Path
import orjson
n, variant = int(sys.argv[1]), sys.argv[2]
work = Path(tempfile.mkdtemp())
fields = dict(loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")
if variant == "floor":
    fd = os.open(work / "floor", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    d = {"@timestamp": "2026-11-29T15:47:55.123456Z", "log.level": "info", "message": "train step", **fields}
    write, dumps = os.write, orjson.dumps
    for _ in range(n):
        write(fd, dumps(d) + b"\n")
elif variant == "hvdlog":
    os.environ["HVDLOG_BENCH_API_TOKEN"] = "s3cr3t-bench-token-value"
    import hvdlog
    hvdlog.configure(root=work, job="bench", level="info", console=False, capture_native=False, stall_after=None, install_hooks=False)
    info = hvdlog.get_logger().info
    with hvdlog.step(12):
        info("warm", loss=1.0)
        for _ in range(n):
            info("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")
else:
    import structlog
    log = structlog.wrap_logger(
        structlog.BytesLogger(open(work / "s", "ab", buffering=0)),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO), cache_logger_on_first_use=True,
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level, structlog.processors.format_exc_info,
                    structlog.processors.TimeStamper(fmt="iso", utc=True), structlog.processors.JSONRenderer(serializer=orjson.dumps)])
    info = log.info
    with structlog.contextvars.bound_contextvars(step=12):
        for _ in range(n):
            info("train step", loss=0.4213, lr=0.01, samples_per_sec=5120.5, epoch=3, batch=17, phase="train")
'''


def instructions(script: Path, calls: int, variant: str) -> int:
    result = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(script), str(calls), variant],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    return int(re.search(r"Collected : (\d+)", result.stderr).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "variant.py"
        script.write_text(VARIANT)
        counts = {v: (instructions(script, args.calls, v) - instructions(script, 0, v)) / args.calls for v in ("floor", "hvdlog", "structlog")}
    print("| variant | instructions per call | x floor |\n|---|---|---|")
    for variant, count in counts.items():
        print(f"| {variant} | {count:,.0f} | {count / counts['floor']:.2f} |")


if __name__ == "__main__":
    main()

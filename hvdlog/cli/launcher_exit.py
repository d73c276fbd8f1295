"""The launcher's exit status as an event of the job: ``hvdlog run`` knows it, nobody else does.

One JSON line in ``<root>/<job>/<host>/launcher.jsonl`` (the host ``hvdlog run`` ran on), read
by the file reader like a rank's events and shipped by Filebeat's ``hvdlog-events`` input
(its path gives job and host). It carries no rank: the launcher is evidence about the job,
never a culprit. Status 0 says the job finished for certain; 128+N says the launcher was
killed by signal N (an operator's Ctrl-C or ``timeout``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Final

import click

from hvdlog.fields import LAUNCHER_DATASET
from hvdlog.runtime.writer import FILE_MODE, make_private_dirs

__all__ = ["LAUNCHER_EVENTS", "exit_event", "record_exit"]

#: The file name, in ``<root>/<job>/<host>/``.
LAUNCHER_EVENTS: Final = "launcher.jsonl"
ACTION: Final = "launcher_exit"


def _signal_name(code: int) -> str | None:
    try:
        return signal.Signals(code - 128).name if 128 < code < 160 else None
    except ValueError:
        return None


def exit_event(job: str, code: int, launcher: str, host: str, now: float | None = None) -> dict[str, object]:
    """The event: when, which job, the status, and the signal a status of 128+N stands for."""
    seconds = time.time() if now is None else now
    millis = int(seconds * 1000)
    name = _signal_name(code)
    event: dict[str, object] = {
        "@timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis // 1000)) + f".{millis % 1000:03d}Z",
        "log.level": "info",
        "message": f"launcher {Path(launcher).name} exited with status {code}" + (f" ({name})" if name else ""),
        "job": job,
        "host.name": host,
        "event.dataset": LAUNCHER_DATASET,
        "event.action": ACTION,
        "hvdlog.launcher.exit_code": code,
    }
    if name:
        event["event.reason"] = name
    return event


def record_exit(job_dir: Path, job: str, code: int, launcher: str) -> None:
    """Append the event; a folder that cannot be written costs one sentence on stderr, never the exit status."""
    host = socket.gethostname()
    path = job_dir / host / LAUNCHER_EVENTS  # the ranks on this machine write beside it (runtime/config.py)
    try:
        make_private_dirs(path.parent)  # 0750, as the ranks make theirs
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
        with os.fdopen(fd, "ab") as handle:
            handle.write(json.dumps(exit_event(job, code, launcher, host), separators=(",", ":")).encode() + b"\n")  # stdlib: `hvdlog run` stays light
    except OSError as exc:
        click.echo(f"hvdlog run: cannot record the launcher's exit status in {path} ({exc.strerror})", err=True)


"""``hvdlog run -- horovodrun ...``: the launcher's own view joins the job's folder.

The elastic driver prints what it decides (``reset workers: 3``, ``record state: host[0] =
FAILURE``, ``blacklist failing host: h2``, ``rank and size: 1 3``) only on horovodrun's
console, and only at ``--log-level INFO``. This command runs the launcher with:

- ``HVDLOG_JOB`` (and ``HVDLOG_ROOT``) set, so every worker writes into the same job folder;
- ``--log-level INFO`` added to a ``horovodrun`` that does not choose a level itself;
- ``--autotune-log-file <root>/<job>/autotune.csv`` added when ``--autotune`` is on and no
  log file is named (read back as ``autotune`` documents, :mod:`hvdlog.parse.autotune`);
- its stdout and stderr passed through unchanged and also appended to
  ``<root>/<job>/launcher.log``, each line after the UTC time it arrived (as the ranks' tee
  does), so the driver's untimed lines can be put in order with the ranks' events. In an
  elastic job (``--host-discovery-script``, ``--min-np`` or ``--max-np``) the workers' own
  lines (``[i]<stdout>:``) are not copied there: the tag is the index the worker was spawned
  with, not its rank after a reset, and each worker's capture keeps those lines with the
  rank it had when it printed them.

SIGINT and SIGTERM are passed on to the launcher; the exit status is the launcher's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

import click

from hvdlog import layout

__all__ = ["LAUNCHER_LOG", "WORKER_LINE", "is_elastic_launch", "launcher_command", "run"]

#: The launcher's console in the job's folder (``<root>/<job>/launcher.log``).
LAUNCHER_LOG: Final = "launcher.log"
AUTOTUNE_LOG: Final = "autotune.csv"
_ARRIVAL_LENGTH: Final = len("2026-11-30T14:35:49.123456Z ")


def _option_given(arguments: Sequence[str], name: str) -> bool:
    return any(argument == name or argument.startswith(f"{name}=") for argument in arguments)


def launcher_command(command: Sequence[str], job_dir: Path) -> list[str]:
    """The command to run: a ``horovodrun`` gets ``--log-level INFO`` unless it sets a level, and
    an autotune log file in the job's folder when ``--autotune`` is on without one."""
    command = list(command)
    if not command or Path(command[0]).name != "horovodrun":
        return command
    added: list[str] = []
    if not _option_given(command, "--log-level"):
        added += ["--log-level", "INFO"]
    if _option_given(command, "--autotune") and not _option_given(command, "--autotune-log-file"):
        added += ["--autotune-log-file", str(job_dir / AUTOTUNE_LOG)]
    return [command[0], *added, *command[1:]]


#: A worker's line on horovodrun's console (Gloo's tag, or Open MPI's ``[1,0]<stderr>:``), matched
#: right after the arrival time. Elastic jobs keep these out of launcher.log; Filebeat's
#: hvdlog-launcher input leaves them out (shipper/filebeat.yml, checked against this rule).
WORKER_LINE: Final = re.compile(rb"\[\d+(?:,\d+)?\]<std(?:out|err)>:")


def is_elastic_launch(command: Sequence[str]) -> bool:
    """Whether a horovodrun command starts an elastic job."""
    return any(_option_given(command, name) for name in ("--host-discovery-script", "--min-np", "--max-np"))


def _arrival(seconds: float) -> bytes:
    micros = int(seconds * 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(micros // 1_000_000)).encode() + f".{micros % 1_000_000:06d}Z ".encode()


class _Tee:
    """Copies one of the launcher's streams to our own and, line by line, to launcher.log."""

    def __init__(self, log: IO[bytes], lock: threading.Lock, skip_workers: bool = False) -> None:
        self.log, self.lock, self.skip_workers = log, lock, skip_workers

    def copy(self, source: IO[bytes], console: IO[bytes]) -> None:
        partial, started = b"", 0.0
        while chunk := source.read1(65536):  # type: ignore[attr-defined]
            now = time.time()
            console.write(chunk)
            console.flush()
            data, lines = partial + chunk, []
            started = started or now
            while (end := data.find(b"\n")) >= 0:
                lines.append(_arrival(started) + data[: end + 1])
                data, started = data[end + 1 :], now
            partial = data
            if not partial:
                started = 0.0
            self._write(lines)
        if partial:
            self._write([_arrival(started or time.time()) + partial + b"\n"])

    def _write(self, lines: list[bytes]) -> None:
        if self.skip_workers:
            lines = [line for line in lines if not WORKER_LINE.match(line, _ARRIVAL_LENGTH)]
        if lines:
            with self.lock:
                try:
                    self.log.write(b"".join(lines))
                    self.log.flush()
                except OSError as exc:  # a full disk must not stop the job's console
                    click.echo(f"hvdlog run: cannot write the launcher log ({exc.strerror})", err=True)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None, help="Logs root (HVDLOG_ROOT, else ./hvdlog-logs).")
@click.option("--job", default=None, help="Job id for every worker (HVDLOG_JOB, else the command's name and the start time).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(root: Path | None, job: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND (e.g. ``-- horovodrun -np 4 python train.py``) as one hvdlog job.

    Sets HVDLOG_JOB/HVDLOG_ROOT for the workers, turns on horovodrun's INFO logging (the
    elastic driver's decisions), points an --autotune log into the job's folder, and keeps
    the launcher's console in <root>/<job>/launcher.log. Exits with COMMAND's status.
    """
    root = root or Path(os.environ.get("HVDLOG_ROOT") or layout.DEFAULT_ROOT)
    name = job or os.environ.get("HVDLOG_JOB") or f"{Path(command[-1]).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    job_id = layout.safe_job_id(name)
    job_dir = root.absolute() / job_id
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
        log = open(job_dir / LAUNCHER_LOG, "ab")  # noqa: SIM115 - closed after the launcher ends
    except OSError as exc:
        raise SystemExit(f"cannot write {job_dir / LAUNCHER_LOG}: {exc.strerror}") from None  # exit 2
    env = {**os.environ, "HVDLOG_JOB": job_id, "HVDLOG_ROOT": str(root.absolute())}
    arguments = launcher_command(command, job_dir)
    click.echo(f"hvdlog run: job {job_id}, launcher console in {job_dir / LAUNCHER_LOG}", err=True)
    try:
        process = subprocess.Popen(arguments, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        log.close()
        raise SystemExit(f"cannot run {arguments[0]}: {exc.strerror}") from None  # exit 2
    code = _follow(process, log, skip_workers=is_elastic_launch(arguments))
    sys.exit(code)


def _follow(process: subprocess.Popen[bytes], log: IO[bytes], *, skip_workers: bool) -> int:
    """Tee both streams until the launcher ends; signals go to it. Returns its exit status."""
    tee = _Tee(log, threading.Lock(), skip_workers)
    threads = [
        threading.Thread(target=tee.copy, args=(process.stdout, sys.stdout.buffer), daemon=True),
        threading.Thread(target=tee.copy, args=(process.stderr, sys.stderr.buffer), daemon=True),
    ]
    for thread in threads:
        thread.start()
    previous = {sig: signal.signal(sig, lambda signum, _frame: process.send_signal(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = process.wait()
        for thread in threads:
            thread.join(timeout=10)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.close()
    return code if code >= 0 else 128 - code

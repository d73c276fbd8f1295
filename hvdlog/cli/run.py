"""``hvdlog run -- horovodrun ...``: the launcher's own view joins the job's folder.

The elastic driver prints what it decides (``reset workers: 3``, ``record state: host[0] =
FAILURE``, ``blacklist failing host: h2``, ``rank and size: 1 3``) only on horovodrun's
console, and only at ``--log-level INFO``. This command runs the launcher with:

- ``HVDLOG_JOB`` (and ``HVDLOG_ROOT``) set, so every worker writes into the same job folder;
- ``--log-level INFO`` added to a ``horovodrun`` that does not choose a level itself;
- ``--autotune-log-file <root>/<job>/autotune.csv`` added when ``--autotune`` is on and no
  log file is named (read back as ``autotune`` documents, :mod:`hvdlog.parse.autotune`);
- its stdout and stderr passed through (secrets redacted, as in every file hvdlog writes) and
  also appended to ``<root>/<job>/launcher.log``, each line after the UTC time it arrived (as
  the ranks' tee does), so the driver's untimed lines can be put in order with the ranks'
  events. In an elastic job (``--host-discovery-script``, ``--min-np`` or ``--max-np``) the
  workers' own lines (``[i]<stdout>:``) are not copied there: the tag is the index the worker
  was spawned with, not its rank after a reset, and each worker's capture keeps those lines
  with the rank it had when it printed them.

The copying is done by a process of its own (:mod:`hvdlog.cli.run_tee`), started before the
launcher, so that logging never hurts the job: when our console goes away (``| head -1``, a
closed terminal) the launcher runs on and launcher.log still gets everything; when this
process is killed (SIGKILL) or hung up, the tee serves the launcher until it ends. A full disk
costs lines of launcher.log (whole lines, counted, said once on stderr), never the status.

The job's folder is made 0750 and launcher.log (and the autotune log) 0640, as the ranks make
theirs. SIGINT and SIGTERM are passed on to the launcher; a SIGHUP is not (a terminal that
hangs up sends the launcher its own), and we stay for its status. The exit status is always
the launcher's (128 + N when signal N ended it); 2 only when it could not be started.
The launcher's exit status is also recorded as a ``launcher_exit`` event in
``<root>/<job>/<host>/launcher.jsonl`` (:mod:`hvdlog.cli.launcher_exit`): a fact that says the job ended, and how.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import click

from hvdlog import layout
from hvdlog.cli.launcher_exit import record_exit
from hvdlog.runtime.writer import FILE_MODE, make_private_dirs

__all__ = ["EXIT_LINE", "GLUED_WORKER_LINE", "LAUNCHER_LOG", "WORKER_LINE", "is_elastic_launch", "launcher_command", "run"]

#: The launcher's console in the job's folder (``<root>/<job>/launcher.log``).
LAUNCHER_LOG: Final = "launcher.log"
AUTOTUNE_LOG: Final = "autotune.csv"
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
_TEE_START: Final = 60.0  # seconds the console tee may take to start (a loaded machine)
_TEE_GRACE: Final = 10.0  # seconds the tee may take to write out the console after the launcher ended


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


#: horovodrun --gloo's own exit lines: the grammar's HOROVOD_GLOO_EXIT_PRINT, written out here
#: because ``hvdlog run`` stays light (no hvdlog.parse); tests/cli/test_cli_run.py checks they are equal.
EXIT_LINE: Final = r"(?:Process \d+ exit with status code -?\d+\.|Terminating remaining workers after failure of Process \d+\.)"
#: A gloo worker's last piece with horovodrun's exit line glued behind it (HOROVOD_GLUED_LAUNCHER_LINE
#: after a gloo tag): the console tee writes the two as two lines of launcher.log, so the rule that
#: keeps the workers' lines out (elastic jobs, Filebeat's hvdlog-launcher input) leaves the exit line in.
GLUED_WORKER_LINE: Final = rf"\[\d+\]<(?:stdout|stderr|stddiag)>:[^\n]+?(?P<launcher_line>{EXIT_LINE})$"


def is_elastic_launch(command: Sequence[str]) -> bool:
    """Whether a horovodrun command starts an elastic job."""
    return any(_option_given(command, name) for name in ("--host-discovery-script", "--min-np", "--max-np"))


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None, help="Logs root (HVDLOG_ROOT, else ./hvdlog-logs).")
@click.option("--job", default=None, help="Job id for every worker (HVDLOG_JOB, else the command's name and the start time).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(root: Path | None, job: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND as one hvdlog job. For example: ``hvdlog run -- horovodrun -np 4 python train.py``.

    Sets HVDLOG_JOB/HVDLOG_ROOT for the workers, turns on horovodrun's INFO logging (the
    elastic driver's decisions), points an --autotune log into the job's folder, and keeps
    the launcher's console in <root>/<job>/launcher.log. Exits with COMMAND's status.
    """
    root = root or Path(os.environ.get("HVDLOG_ROOT") or layout.DEFAULT_ROOT)
    name = job or os.environ.get("HVDLOG_JOB") or f"{Path(command[-1]).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    job_id = layout.safe_job_id(name)
    job_dir = root.absolute() / job_id
    arguments = launcher_command(command, job_dir)
    _prepare(job_dir, arguments)
    env = {**os.environ, "HVDLOG_JOB": job_id, "HVDLOG_ROOT": str(root.absolute())}
    click.echo(f"hvdlog run: job {job_id}, launcher console in {job_dir / LAUNCHER_LOG}", err=True)
    status = _launch(arguments, env, job_dir / LAUNCHER_LOG, skip_workers=is_elastic_launch(arguments))
    # The one place the launcher's exit status is known (the run's result is recorded from here).
    record_exit(job_dir, job_id, status, arguments[0])
    sys.exit(status)


def _prepare(job_dir: Path, arguments: Sequence[str]) -> None:
    """The job's folder (0750) and our files in it (0640), as the ranks make theirs; exit 2 if
    they cannot be made. An autotune log is created here because Horovod keeps an existing
    file's mode (it opens it with ``trunc``) but creates a new one 0644."""
    files = [job_dir / LAUNCHER_LOG]
    if str(job_dir / AUTOTUNE_LOG) in arguments:
        files.append(job_dir / AUTOTUNE_LOG)
    path = job_dir
    try:
        make_private_dirs(job_dir)
        for path in files:
            os.close(os.open(path, _CREATE, FILE_MODE))
    except OSError as exc:
        raise SystemExit(f"cannot write {path}: {exc.strerror}") from None  # exit 2


def _launch(arguments: list[str], env: dict[str, str], log: Path, *, skip_workers: bool) -> int:
    """Start the console tee, then the launcher on the tee's pipes; returns the launcher's status."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:  # a hang-up is the launcher's to take (see _follow)
        signal.signal(signal.SIGHUP, _stay)  # a handler, unlike SIG_IGN, is not inherited: the launcher keeps SIG_DFL
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        tee = _start_tee(log, [(out_read, 1), (err_read, 2)], skip_workers=skip_workers)
    except OSError as exc:
        for fd in (out_write, err_write):
            os.close(fd)
        raise SystemExit(f"cannot start hvdlog run's console tee: {exc.strerror or exc}") from None  # exit 2
    finally:
        for fd in (out_read, err_read):  # the tee holds them now: a reader that outlives us
            os.close(fd)
    try:
        process = subprocess.Popen(arguments, env=env, stdout=out_write, stderr=err_write)
    except OSError as exc:
        failed: OSError | None = exc
    else:
        failed = None
    finally:
        for fd in (out_write, err_write):  # the launcher's own copies are the only writers left
            os.close(fd)
    if failed is not None:
        tee.wait()
        raise SystemExit(f"cannot run {arguments[0]}: {failed.strerror}") from None  # exit 2
    return _follow(process, tee, log)


def _stay(_signum: int, _frame: object) -> None:
    """SIGHUP: we stay to return the launcher's status (see _follow)."""


def _start_tee(log: Path, pipes: list[tuple[int, int]], *, skip_workers: bool) -> subprocess.Popen[bytes]:
    """``python -I -S run_tee.py`` on the pipes' read ends, once it says it is ready (it loads
    stdlib files only, so it never imports hvdlog or the CLI's libraries)."""
    ready_read, ready_write = os.pipe()
    spec = {"log": str(log), "pipes": pipes, "ready": ready_write, "skip": WORKER_LINE.pattern.decode() if skip_workers else None,
            "glued": GLUED_WORKER_LINE}
    script = Path(__file__).with_name("run_tee.py")
    try:
        tee = subprocess.Popen(
            [sys.executable, "-I", "-S", str(script), json.dumps(spec)],
            stdin=subprocess.DEVNULL, pass_fds=[ready_write, *(pipe for pipe, _ in pipes)],
        )
    finally:
        os.close(ready_write)
    try:
        ready, _, _ = select.select([ready_read], [], [], _TEE_START)
        answer = os.read(ready_read, 1) if ready else b""
    finally:
        os.close(ready_read)
    if answer != b"r":
        tee.kill()
        tee.wait()
        raise OSError(f"it did not start (status {tee.returncode})")
    return tee


def _follow(process: subprocess.Popen[bytes], tee: subprocess.Popen[bytes], log: Path) -> int:
    """Wait for the launcher (SIGINT and SIGTERM passed on to it), then for the tee to write out
    its console; returns the launcher's exit status (128 + N for signal N).

    A SIGHUP of ours is not passed on (a terminal that hangs up sends the launcher its own): we stay
    to return the launcher's status. Killed (SIGKILL), we leave the tee serving the launcher.
    """
    forward = {sig: lambda signum, _frame: process.send_signal(signum) for sig in (signal.SIGINT, signal.SIGTERM)}
    previous = {sig: signal.signal(sig, handler) for sig, handler in forward.items()}  # after the start: the launcher keeps our dispositions
    try:
        code = process.wait()
        try:
            tee.wait(timeout=_TEE_GRACE)
        except subprocess.TimeoutExpired:
            click.echo(f"hvdlog run: the launcher ended, but processes it started still hold its console (copied on to {log})", err=True)
        else:
            if tee.returncode:
                click.echo(f"hvdlog run: the console tee ended with status {tee.returncode}; {log} may miss lines", err=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code

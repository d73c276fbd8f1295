"""A real elastic Horovod job on this machine (issues 22 and 40), shared by the tests that need one.

Each job is a real ``horovodrun --gloo`` elastic launch through ``hvdlog run``: several one-slot
"hosts" that are all this machine (spellings of 127.0.0.1 that need no /etc/hosts, so each is a
local address and no ssh is used; a failing host is blacklisted whole), a real host discovery
script reading a file the job itself rewrites. :func:`run_example` runs README's elastic example
(``training/elastic_train.py``: rank 1 SIGKILLed at step 3, the survivor recovers); the
``elastic_example`` session fixture (tests/conftest.py) runs it once for every test that reads it.
Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from hvdlog.documents import Document
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

__all__ = ["EXAMPLE_EPOCHS", "EXAMPLE_STEPS", "HOSTS", "JOB_SCRIPT", "JOB_TIMEOUT", "ElasticRun", "hosts_text", "run_elastic", "run_example"]

JOB_SCRIPT = Path(__file__).resolve().parent / "elastic_job.py"
#: One slot each, all this machine (127.0.0.2 is not on lo and would go over ssh).
HOSTS = ("127.0.0.1", "127.0.1", "127.1", "0x7f000001", "localhost")
#: A job's own deadline: startup of 3 torch workers on a loaded 2-core machine, a reset, a new worker.
JOB_TIMEOUT = 420


@dataclass
class ElasticRun:
    """What one elastic launch left: its exit status, console and hvdlog's files."""

    returncode: int
    console: str
    root: Path
    job: str

    @property
    def directory(self) -> Path:
        return self.root / self.job

    def event_files(self) -> list[Path]:
        """The processes' events files (not the launcher's exit record hvdlog run keeps beside them)."""
        return sorted(path for path in self.directory.glob("*/*.jsonl") if path.name != "launcher.jsonl")

    def events(self) -> dict[Path, list[dict[str, Any]]]:
        """Each JSON file's events, as written (flat dotted keys), but the process's exit record (tests/runtime/test_config.py)."""
        return {path: [event for line in path.read_bytes().splitlines() if (event := orjson.loads(line)).get("event.action") != "process_exit"]
                for path in self.event_files()}

    def documents(self, spec: Filter) -> list[Document]:
        return list(FileSource([self.directory], warn=lambda _message: None).search(spec))


def hosts_text(count: int) -> str:
    return ";".join(f"{host}:1" for host in HOSTS[:count])


def run_elastic(tmp_path: Path, *, np: int, min_np: int, max_np: int, hosts: int, env: dict[str, str], extra: tuple[str, ...] = (),
                script: Path = JOB_SCRIPT, script_args: tuple[str, ...] = ()) -> ElasticRun:
    """One real elastic launch of ``script``; the discovery script prints ``tmp_path/hosts``."""
    (tmp_path / "hosts").write_text(hosts_text(hosts).replace(";", "\n") + "\n")
    discover = tmp_path / "discover.sh"
    discover.write_text(f"#!/bin/sh\ncat {tmp_path / 'hosts'}\n")
    discover.chmod(0o755)
    root, job = tmp_path / "logs", "elastic-test"
    command = [  # through `hvdlog run`, as the docs say: the driver's INFO lines land in <job>/launcher.log
        sys.executable, "-m", "hvdlog", "run", "--root", str(root), "--job", job, "--",
        "horovodrun", "--gloo", "-np", str(np), "--min-np", str(min_np), "--max-np", str(max_np),
        "--host-discovery-script", str(discover), "--network-interface", "lo",
        "--elastic-timeout", "20", *extra, sys.executable, str(script), *script_args,
    ]
    settings = {
        "ELASTIC_DIR": str(tmp_path),
        # Gloo's timeout bounds how long the others wait for a new worker to start (import torch,
        # join the rendezvous: over 30 s, Gloo's default, on a loaded 2-core machine), and how
        # long a survivor blocked in a receive from a killed peer waits before it resets.
        "HOROVOD_GLOO_TIMEOUT_SECONDS": "60",
        **env,
    }
    # Its own session, so a job that outlives the bound is killed whole (horovodrun, its workers and
    # their captures), not left running beside the rest of the suite after its folder is gone.
    job_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, **settings}, cwd=tmp_path, start_new_session=True)
    try:
        out, err = job_process.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(job_process.pid, signal.SIGKILL)
        out, err = job_process.communicate()
        raise subprocess.TimeoutExpired(command, JOB_TIMEOUT, out, err) from None
    return ElasticRun(job_process.returncode, out + err, root, job)


#: README's example: epochs and steps per epoch, and the rank killed at which step.
EXAMPLE_EPOCHS: Final = 2
EXAMPLE_STEPS: Final = 4


def run_example(tmp_path: Path) -> ElasticRun:
    """``training/elastic_train.py`` on 2 one-slot hosts: rank 1 is SIGKILLed at step 3, rank 0 resets and finishes alone."""
    script = Path(__file__).resolve().parents[2] / "training" / "elastic_train.py"
    args = ("--epochs", str(EXAMPLE_EPOCHS), "--steps-per-epoch", str(EXAMPLE_STEPS), "--kill-rank", "1", "--kill-at-step", "3",
            "--step-seconds", "0.2")
    return run_elastic(tmp_path, np=2, min_np=1, max_np=2, hosts=2, env={}, script=script, script_args=args)

"""Real ``horovodrun`` runs for the query and CLI tests: a stall, then a crash; and a straggler.

``faults`` is the training example with two fault flags on rank 1: it hangs at step 3
(the watchdogs report a stall, rank 0 waiting in the allreduce) and raises at step 6
(rank 0 dies as collateral). ``straggler`` is a small 3-rank job whose rank 1 is slow and
says so in its ``samples_per_sec`` (see support/straggler_job.py); 3 ranks, because with 2
the step figures cannot name the slow one (hvdlog/analyses/stragglers.py). Both run concurrently, once per test process,
and are cached; the faults job also writes an ``--output-filename`` tree.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from corpus.tools_required import horovodrun

__all__ = ["FAULTS", "STRAGGLER", "STRAGGLER_RANKS", "STRAGGLER_STEPS", "Corpus", "corpus", "start"]

REPO = Path(__file__).resolve().parents[2]
#: Job ids, unique per test process: other tests may write to the same Elasticsearch data streams.
_RUN_ID = uuid.uuid4().hex[:6]
FAULTS, STRAGGLER = f"faults-{_RUN_ID}", f"straggler-{_RUN_ID}"
#: The straggler job's size and steps (rank 1 sleeps 0.5 s per step: >= 10 s of data, and
#: 10x the others' compute, so the flag holds when CPU contention doubles one rank's compute).
STRAGGLER_RANKS, STRAGGLER_STEPS = 3, 20
_CACHE: dict[str, Corpus] = {}
_RUNNING: dict[str, tuple[Corpus, dict[str, subprocess.Popen[bytes]]]] = {}


class Corpus:
    """Where the runs wrote: ``logs`` (our layout, both jobs) and ``output`` (--output-filename of faults)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.output = root / "output"

    @property
    def host(self) -> str:
        """The host directory the runs wrote under (this machine's name)."""
        (host,) = [path.name for path in (self.logs / FAULTS).iterdir()]
        return host


def _horovodrun(args: list[str], console: Path, timeout_env: dict[str, str], ranks: int = 2) -> subprocess.Popen[bytes]:
    exe = Path(horovodrun())
    with open(console, "wb") as out:
        return subprocess.Popen([str(exe), "-np", str(ranks), "-H", f"localhost:{ranks}", "--gloo", *args],
                                stdout=out, stderr=subprocess.STDOUT, env=timeout_env)


def start() -> None:
    """Launch both jobs in the background (idempotent), e.g. while Elasticsearch starts."""
    if _CACHE or _RUNNING:
        return
    root = Path(tempfile.mkdtemp(prefix="hvdlog-query-corpus-"))
    atexit.register(shutil.rmtree, root, True)
    result = Corpus(root)
    env = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(REPO)}
    train = str(REPO / "training" / "train.py")
    jobs = {
        FAULTS: ["--output-filename", str(result.output), sys.executable, train, "--epochs", "1", "--log-root",
                 str(result.logs), "--steps-per-epoch", "8", "--job", FAULTS, "--stall-after", "2",
                 "--hang-rank", "1", "--hang-at-step", "3", "--hang-seconds", "4", "--crash-rank", "1", "--crash-at-step", "6"],
        STRAGGLER: [sys.executable, str(REPO / "tests" / "support" / "straggler_job.py"), str(result.logs), STRAGGLER,
                    "1", "0.5", str(STRAGGLER_STEPS)],
    }
    ranks = {FAULTS: 2, STRAGGLER: STRAGGLER_RANKS}
    _RUNNING["corpus"] = (result, {name: _horovodrun(args, root / f"{name}.console", env, ranks[name]) for name, args in jobs.items()})


def corpus() -> Corpus:
    """Run the jobs once (or wait for :func:`start`'s) and return where they wrote; fails loudly if a job misbehaves."""
    if "corpus" in _CACHE:
        return _CACHE["corpus"]
    start()
    result, running = _RUNNING.pop("corpus")
    for name, process in running.items():
        code = process.wait(timeout=240)
        expected = 1 if name == FAULTS else 0
        if code != expected:
            console = (result.root / f"{name}.console").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"horovodrun job {name} exited {code}, expected {expected}:\n{console}")
    _CACHE["corpus"] = result
    return result

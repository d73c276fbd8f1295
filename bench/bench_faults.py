"""The fault matrix: how soon `hvdlog watch` alerts after a fault, whether it names the right rank and class.

    python bench/bench_faults.py [--runs 5] [--healthy 20] [--faults kill,stop,...] [--busy 2] [--json]

Each run is a real ``horovodrun --gloo -np 2 python training/train.py`` job (3 ranks for divergence)
with one fault from training/train.py's flags on rank 1 (a crash, SIGKILL, a hang outside any
collective, a hang in the data loader, divergent tensors, SIGSTOP, a stopped capture process, an
input and a compute straggler), or an elastic launch of training/elastic_train.py whose rank 1 is
SIGKILLed and which recovers; each is watched by ``hvdlog watch --json`` from before the job
starts; ``--busy N`` busy processes run beside it (the issue's "under load"). Per run: the latency
from the fault's own timestamp (its ``injected ...``/``killing this worker`` event) to the first
firing alert, whether that alert names rank 1 (culprit), and whether its kind and class are the
fault's (class: the hang class the stall alert says; for the elastic job, the outcome its
job_finished alert says, ``recovered``). Healthy runs count firing alerts (false alerts). Per
fault: p50 and p95 latency over the runs and the accuracies. Prints a markdown table (``--json``:
one document per run) and the machine, the load seen and the wall time of the whole matrix.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import machine  # noqa: E402

STALL_AFTER = 3.0


class Fault(NamedTuple):
    """One fault of the matrix: the script's flags, the first alert expected, and what the class is judged on."""

    flags: tuple[str, ...]
    #: The first alert's kind.
    kind: str
    #: A stall: the hang class the alert must say. An elastic job: the outcome of its job_finished alert.
    klass: str | None = None
    ranks: int = 2
    elastic: bool = False
    #: Steps of the job when the fault needs more than ``--steps`` (a straggler needs steps after the fault to be seen).
    steps: int | None = None


#: fault -> how it is made and what is expected. Divergence runs 3 ranks: with 2, each waits for a tensor the
#: other never submits and no rank is the odd one out (the class is right, the culprit cannot be told). So do
#: the stragglers, over 24 steps: of two ranks, step figures cannot say which one is slow (watch never pages
#: then), and the alert needs 5 steps from every rank after the fault and 3 checks in a row.
FAULTS: dict[str, Fault] = {
    "crash": Fault(("--crash-rank", "1", "--crash-at-step", "5"), "failure"),
    "kill": Fault(("--fault", "kill"), "failure"),
    "hang": Fault(("--hang-rank", "1", "--hang-at-step", "5", "--hang-seconds", "600"), "stall", "culprit_outside"),
    "loader-hang": Fault(("--fault", "loader-hang", "--hang-seconds", "600"), "stall", "culprit_outside"),
    "diverge": Fault(("--fault", "diverge"), "stall", "divergence", ranks=3),
    "stop": Fault(("--fault", "stop"), "stall", "dead_or_silent"),
    "capture-stuck": Fault(("--fault", "capture-stuck", "--hang-seconds", "600"), "stall", "capture_stuck"),
    "elastic-reset": Fault(("--kill-rank", "1", "--kill-at-step", "5", "--step-seconds", "0.2"), "failure", "recovered", elastic=True),
    "input-straggler": Fault(("--fault", "input-straggler", "--straggler-delay", "0.3"), "straggler", ranks=3, steps=24),
    "compute-straggler": Fault(("--fault", "compute-straggler", "--straggler-delay", "0.3"), "straggler", ranks=3, steps=24),
}
#: The fault's own event on rank 1, the benchmark's time zero.
_FAULT_MARKS = (b'"injected ', b"InjectedFault", b"killing this worker")


@dataclass
class Outcome:
    """One run's measurements."""

    fault: str
    latency_s: float | None
    culprit_ok: bool
    class_ok: bool
    alert: str
    false_alerts: int = 0
    #: Seconds from the fault to the first evidence written (an error line, a stall report): the rest of the latency is watch's.
    evidence_s: float | None = None
    #: From the fault's discovery by this benchmark to the first alert: seconds watch ran on a CPU, and waited for one.
    watch_cpu_s: float | None = None
    watch_queued_s: float | None = None
    #: The run's own wall time (job start to its end or first alert) and the 1-minute load average at its start.
    wall_s: float = 0.0
    load1: float = 0.0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC"}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _fault_time(root: Path, job: str) -> float | None:
    """The fault's own timestamp: rank 1's ``injected ...`` (``killing this worker``) event. An elastic job's files
    are the processes' (``pid-N.jsonl``), so every events file is read and the rank is the event's own."""
    for path in root.glob(f"{job}/*/*.jsonl"):
        for line in path.read_bytes().splitlines():
            if any(mark in line for mark in _FAULT_MARKS):  # --crash-rank logs only its uncaught exception
                event = json.loads(line)
                message, error = str(event.get("message", "")), str(event.get("error.type", ""))
                if event.get("rank") == 1 and (message.startswith(("injected", "killing this worker")) or "InjectedFault" in error):
                    return _seconds(event["@timestamp"])
    return None


def _evidence_time(root: Path, job: str, started: float, kind: str) -> float | None:
    """When the first evidence of the alert's kind was written, on any rank: an error or critical line (failure) or a
    stall report (stall), at or after the fault; None for other kinds."""
    wanted = {"failure": (b'"log.level":"error"', b'"log.level":"critical"'), "stall": (b'"event.action":"stall"',)}.get(kind)
    if wanted is None:
        return None
    times = [_seconds(json.loads(line)["@timestamp"]) for path in root.glob(f"{job}/*/*.jsonl") for line in path.read_bytes().splitlines()
             if any(mark in line for mark in wanted)]
    after = [t for t in times if t >= started - 0.5]
    return min(after) - started if after else None


def kill_captures(root: Path) -> None:
    """SIGKILL the capture processes writing under ``root``: each runs in a session of its own (it outlives its
    rank by design), and capture-stuck leaves one stopped."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"tee.py" in (words := cmdline.read_bytes()) and str(root).encode() in words:
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
        except OSError:
            pass


def schedstat(pid: int) -> tuple[float, float]:
    """Seconds a process's threads ran on a CPU and waited on the run queue for one (``/proc/PID/task/*/schedstat``;
    zeros when unreadable): what a loaded machine costs a watcher, beside its own work."""
    ran = waited = 0
    for path in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            on_cpu, on_queue, _ = path.read_text().split()
        except (OSError, ValueError):
            continue
        ran, waited = ran + int(on_cpu), waited + int(on_queue)
    return ran / 1e9, waited / 1e9


class _Alerts(threading.Thread):
    """Reads ``hvdlog watch --json`` stdout into a list; each alert gets watch's schedstat when read (``_sched``)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process, self.alerts = process, list[dict[str, Any]]()

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.alerts.append({**json.loads(line), "_sched": schedstat(self.process.pid)})


def _stop(process: subprocess.Popen[Any], group: bool) -> None:
    if process.poll() is None:
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.send_signal(signal.SIGINT)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def _command(fault: Fault, root: Path, job: str, work: Path, steps: int) -> list[str]:
    """The job's command line: train.py under ``horovodrun --gloo``, or elastic_train.py under an elastic launch
    (one slot on each of two names of this machine, so the killed worker's host is blacklisted and the survivor goes on)."""
    horovodrun = shutil.which("horovodrun") or "horovodrun"
    steps = fault.steps or steps
    if not fault.elastic:
        return [horovodrun, "-np", str(fault.ranks), "--gloo", sys.executable, str(REPO / "training" / "train.py"), "--log-root", str(root),
                "--job", job, "--epochs", "1", "--steps-per-epoch", str(steps), "--stall-after", str(STALL_AFTER), *fault.flags]
    discover = work / f"{job}.discover.sh"
    discover.write_text("#!/bin/sh\necho 127.0.0.1:1\necho localhost:1\n")
    discover.chmod(0o755)
    return [horovodrun, "--gloo", "-np", "2", "--min-np", "1", "--max-np", "2", "--host-discovery-script", str(discover),
            "--network-interface", "lo", "--elastic-timeout", "20", sys.executable, str(REPO / "training" / "elastic_train.py"),
            "--log-root", str(root), "--job", job, "--epochs", "1", "--steps-per-epoch", str(steps), *fault.flags]


def run_one(fault: str, work: Path, index: int, steps: int, timeout: float, watch_nice: int = 0) -> Outcome:
    """One job with ``fault`` (``healthy``: none) under ``hvdlog watch`` (``watch_nice``: its nice value, as an operator
    who runs the watcher above training's priority on a loaded machine)."""
    root, job = work / f"{fault}-{index}", f"{fault}-{index}"
    root.mkdir(parents=True)
    spec = FAULTS.get(fault, Fault((), ""))
    nice = ["nice", "-n", str(watch_nice)] if watch_nice else []  # nice execs: the pid stays watch's (its schedstat)
    watch = subprocess.Popen([*nice, sys.executable, "-m", "hvdlog", "watch", "--json", "--interval", "1", "--from-start", str(root)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**_env(), "PYTHONUNBUFFERED": "1"})
    reader = _Alerts(watch)
    reader.start()
    env = {**_env(), "HOROVOD_GLOO_TIMEOUT_SECONDS": "60"} if spec.elastic else _env()
    with open(work / f"{job}.console", "wb") as console:  # outside the watched root: watch would take it for the job
        process = subprocess.Popen(_command(spec, root, job, work, steps), stdout=console, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True, cwd=work)
    try:
        return _observe(fault, root, job, process, reader, timeout, spec)
    finally:
        _stop(process, group=True)
        kill_captures(root)
        _stop(watch, group=False)


def _firing(reader: _Alerts) -> list[dict[str, Any]]:
    return [a for a in reader.alerts if a.get("status") == "firing" and a.get("kind") != "job_finished"]


def _observe(fault: str, root: Path, job: str, process: subprocess.Popen[bytes], reader: _Alerts, timeout: float, spec: Fault) -> Outcome:
    """Wait for the first firing alert at or after the fault (healthy, elastic: also for the job's end); alerts before it are false.

    The class is judged on what watch itself said: the hang class in the first (stall) alert, or for an elastic job
    the outcome of its job_finished alert."""
    deadline, started, sched = time.monotonic() + timeout, None, (0.0, 0.0)
    while time.monotonic() < deadline:
        finished = any(a.get("kind") == "job_finished" for a in reader.alerts)
        if fault == "healthy":
            if finished and process.poll() is not None:
                break
        else:
            if started is None and (started := _fault_time(root, job)) is not None:
                sched = schedstat(reader.process.pid)
            # an elastic driver lingers after its workers end: its job_finished alert is the end that counts
            if started is not None and any(_seconds(a["time"]) >= started - 0.5 for a in _firing(reader)) and (finished or not spec.elastic):
                break
            if finished and process.poll() is not None:  # the job ended without the alert (a straggler not called)
                break
        time.sleep(0.2)
    if fault == "healthy":
        firing = _firing(reader)
        return Outcome(fault, None, True, True, ",".join(a["kind"] for a in firing) or "-", len(firing))
    before = [a for a in _firing(reader) if started is None or _seconds(a["time"]) < started - 0.5]
    after = [a for a in _firing(reader) if a not in before]
    if started is None or not after:
        return Outcome(fault, None, False, False, "no alert" if started is not None else "no fault event", len(before))
    first = after[0]
    if spec.elastic:
        finished = [a for a in reader.alerts if a.get("kind") == "job_finished"]
        said = str(finished[-1]["status"]) if finished else "not finished"
    else:
        said = str((first.get("details") or {}).get("hang", {}).get("kind")) if first["kind"] == "stall" else ""
    class_ok = first["kind"] == spec.kind and (spec.klass is None or said == spec.klass)
    label = first["kind"] + (f":{said}" if said else "")
    ran, queued = (round(end - begin, 2) for end, begin in zip(first["_sched"], sched, strict=True))
    return Outcome(fault, _seconds(first["time"]) - started, first.get("ranks") == [1], class_ok, label, len(before),
                   _evidence_time(root, job, started, first["kind"]), ran if sched[0] else None, queued if sched[0] else None)


def _busy(stop: Any) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _fmt(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def table(outcomes: list[Outcome]) -> str:
    """The markdown table: per fault, runs, latency p50/p95, culprit and class accuracy, false alerts."""
    rows = [("| fault | runs | first alert | latency p50 (s) | p95 (s) | evidence written p50 (s) | watch's part p50 / p95 (s) "
            "| culprit right | class right | false alerts |"),
            "|---|---|---|---|---|---|---|---|---|---|"]
    for fault in [*FAULTS, "healthy"]:
        mine = [o for o in outcomes if o.fault == fault]
        if not mine:
            continue
        latencies = [o.latency_s for o in mine if o.latency_s is not None]
        p50, p95 = _quantile(latencies, 0.5), _quantile(latencies, 0.95)
        alerts = ", ".join(sorted({o.alert for o in mine}))
        evidence = [o.evidence_s for o in mine if o.evidence_s is not None]
        watch = [o.latency_s - o.evidence_s for o in mine if o.latency_s is not None and o.evidence_s is not None]
        if fault == "healthy":
            rows.append(f"| healthy | {len(mine)} | {alerts} | - | - | - | - | - | - | {sum(o.false_alerts for o in mine)} |")
        else:
            rows.append(f"| {fault} | {len(mine)} | {alerts} | {_fmt(p50)} | {_fmt(p95)} | {_fmt(_quantile(evidence, 0.5))} "
                        f"| {_fmt(_quantile(watch, 0.5))} / {_fmt(_quantile(watch, 0.95))} | {sum(o.culprit_ok for o in mine)}/{len(mine)} "
                        f"| {sum(o.class_ok for o in mine)}/{len(mine)} | {sum(o.false_alerts for o in mine)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> list[Outcome]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per fault")
    parser.add_argument("--healthy", type=int, default=20, help="healthy runs")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated subset of: " + ", ".join(FAULTS))
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside each job")
    parser.add_argument("--steps", type=int, default=12, help="steps per job (the faults act at step 5)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for a run's first alert")
    parser.add_argument("--watch-nice", type=int, default=0, help="nice value of hvdlog watch (negative: above the jobs; needs the right)")
    parser.add_argument("--parallel", type=int, default=1, help="jobs run at once (each beside the others: more load)")
    parser.add_argument("--json", action="store_true", help="one JSON document per run instead of the table")
    args = parser.parse_args(argv)
    faults = [name for name in args.faults.split(",") if name]
    unknown = [name for name in faults if name not in FAULTS and name != "healthy"]
    if unknown:
        parser.error(f"unknown fault {unknown[0]}: one of {', '.join(FAULTS)}")
    stop = multiprocessing.Event()
    busy = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    outcomes: list[Outcome] = []
    matrix_began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="hvdlog-faults-") as work:
            plan = [(fault, i) for i in range(args.runs) for fault in faults if fault != "healthy"]
            plan += [("healthy", i) for i in range(args.healthy)]

            def one(fault: str, index: int) -> Outcome:
                load, began = os.getloadavg()[0], time.monotonic()
                outcome = run_one(fault, Path(work), index, args.steps, args.timeout, args.watch_nice)
                outcome.wall_s, outcome.load1 = round(time.monotonic() - began, 1), round(load, 2)
                print(json.dumps(asdict(outcome)) if args.json else f"{fault} #{index}: {outcome}", file=sys.stdout if args.json else sys.stderr,
                      flush=True)
                return outcome

            with ThreadPoolExecutor(args.parallel) as pool:  # each run has its own folder, job and watch
                outcomes = list(pool.map(lambda item: one(*item), plan))
    finally:
        stop.set()
        for process in busy:
            process.join(5)
    if not args.json:
        loads = [o.load1 for o in outcomes] or [0.0]
        print(f"machine: {machine()}; {args.busy} busy processes and {args.parallel - 1} other job(s) of the matrix beside each job; "
              "1-min load average at the runs' starts: "
              f"min {min(loads):.1f}, median {statistics.median(loads):.1f}, max {max(loads):.1f}; "
              f"whole matrix {time.monotonic() - matrix_began:.0f} s wall for {len(outcomes)} runs")
        print(table(outcomes))
    return outcomes


if __name__ == "__main__":
    main()

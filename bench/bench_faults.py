"""The fault matrix: how soon `hvdlog watch` alerts after a fault, whether it names the right rank and class.

    python bench/bench_faults.py [--runs 5] [--healthy 20] [--faults kill,stop,...] [--busy 2] [--json]

Each run is a real ``horovodrun --gloo -np 2 python training/train.py`` job with one fault from
training/train.py's flags on rank 1 (a crash, SIGKILL, a hang outside any collective, a hang in the
data loader, divergent tensors, SIGSTOP, an input and a compute straggler), watched by ``hvdlog
watch --json`` from before the job starts; ``--busy N`` busy processes run beside it (the issue's
"under load"). Per run: the latency from the fault's own timestamp (its ``injected fault``/``injected
hang`` event) to the first firing alert, whether that alert names rank 1 (culprit), and whether its
kind and, for a stall, the hang class of ``hvdlog stalls`` are the fault's (class). Healthy runs
count firing alerts (false alerts). Per fault: p50 and p95 latency over the runs and the
accuracies. Prints a markdown table (``--json``: one document per run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import machine  # noqa: E402

STALL_AFTER = 3.0
#: fault -> (train.py flags, the alert kind expected, the hang class expected for a stall alert).
FAULTS: dict[str, tuple[tuple[str, ...], str, str | None]] = {
    "crash": (("--crash-rank", "1", "--crash-at-step", "5"), "failure", None),
    "kill": (("--fault", "kill"), "failure", None),
    "hang": (("--hang-rank", "1", "--hang-at-step", "5", "--hang-seconds", "600"), "stall", "culprit_outside"),
    "loader-hang": (("--fault", "loader-hang", "--hang-seconds", "600"), "stall", "culprit_outside"),
    "diverge": (("--fault", "diverge"), "stall", "divergence"),
    "stop": (("--fault", "stop"), "stall", "dead_or_silent"),
    "input-straggler": (("--fault", "input-straggler", "--straggler-delay", "0.3"), "straggler", None),
    "compute-straggler": (("--fault", "compute-straggler", "--straggler-delay", "0.3"), "straggler", None),
}


@dataclass
class Outcome:
    """One run's measurements."""

    fault: str
    latency_s: float | None
    culprit_ok: bool
    class_ok: bool
    alert: str
    false_alerts: int = 0


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC"}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _fault_time(root: Path, job: str) -> float | None:
    """The fault's own timestamp: rank 1's ``injected ...`` event."""
    for path in root.glob(f"{job}/*/rank-1.jsonl"):
        for line in path.read_bytes().splitlines():
            if b'"injected ' in line or b"InjectedFault" in line:  # --crash-rank logs only its uncaught exception
                event = json.loads(line)
                if str(event.get("message", "")).startswith("injected") or "InjectedFault" in str(event.get("error.type", "")):
                    return _seconds(event["@timestamp"])
    return None


def _hang_class(root: Path, job: str) -> str | None:
    done = subprocess.run([sys.executable, "-m", "hvdlog", "stalls", "--json", str(root / job)], capture_output=True, text=True,
                          env=_env(), timeout=120, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return str(lines[-1]["hang"]["kind"]) if lines else None


class _Alerts(threading.Thread):
    """Reads ``hvdlog watch --json`` stdout into a list."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process, self.alerts = process, list[dict[str, Any]]()

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("{"):
                self.alerts.append(json.loads(line))


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


def run_one(fault: str, work: Path, index: int, steps: int, timeout: float) -> Outcome:
    """One job with ``fault`` (``healthy``: none) under ``hvdlog watch``."""
    root, job = work / f"{fault}-{index}", f"{fault}-{index}"
    root.mkdir(parents=True)
    flags, kind, hang = FAULTS.get(fault, ((), "", None))
    watch = subprocess.Popen([sys.executable, "-m", "hvdlog", "watch", "--json", "--interval", "1", "--from-start", str(root)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**_env(), "PYTHONUNBUFFERED": "1"})
    reader = _Alerts(watch)
    reader.start()
    train = [shutil.which("horovodrun") or "horovodrun", "-np", "2", "--gloo", sys.executable, str(REPO / "training" / "train.py"),
             "--log-root", str(root), "--job", job, "--epochs", "1", "--steps-per-epoch", str(steps), "--stall-after", str(STALL_AFTER),
             *flags]
    with open(work / f"{job}.console", "wb") as console:  # outside the watched root: watch would take it for the job
        process = subprocess.Popen(train, stdout=console, stderr=subprocess.STDOUT, env=_env(), start_new_session=True)
    try:
        return _observe(fault, root, job, process, reader, timeout, (kind, hang))
    finally:
        _stop(process, group=True)
        _stop(watch, group=False)


def _firing(reader: _Alerts) -> list[dict[str, Any]]:
    return [a for a in reader.alerts if a.get("status") == "firing" and a.get("kind") != "job_finished"]


def _observe(fault: str, root: Path, job: str, process: subprocess.Popen[bytes], reader: _Alerts, timeout: float,
             expected: tuple[str, str | None]) -> Outcome:
    """Wait for the first firing alert at or after the fault (healthy: for the job's end); alerts before it are false."""
    deadline, started = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        if fault == "healthy":
            if process.poll() is not None and any(a.get("kind") == "job_finished" for a in reader.alerts):
                break
        else:
            started = started if started is not None else _fault_time(root, job)
            if started is not None and any(_seconds(a["time"]) >= started - 0.5 for a in _firing(reader)):
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
    klass = _hang_class(root, job) if first["kind"] == "stall" else None
    kind, hang = expected
    class_ok = first["kind"] == kind and (hang is None or klass == hang)
    label = first["kind"] + (f":{klass}" if klass else "")
    return Outcome(fault, _seconds(first["time"]) - started, first.get("ranks") == [1], class_ok, label, len(before))


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
    rows = ["| fault | runs | first alert | latency p50 (s) | p95 (s) | culprit right | class right | false alerts |",
            "|---|---|---|---|---|---|---|---|"]
    for fault in [*FAULTS, "healthy"]:
        mine = [o for o in outcomes if o.fault == fault]
        if not mine:
            continue
        latencies = [o.latency_s for o in mine if o.latency_s is not None]
        p50, p95 = _quantile(latencies, 0.5), _quantile(latencies, 0.95)
        alerts = ", ".join(sorted({o.alert for o in mine}))
        if fault == "healthy":
            rows.append(f"| healthy | {len(mine)} | {alerts} | - | - | - | - | {sum(o.false_alerts for o in mine)} |")
        else:
            rows.append(f"| {fault} | {len(mine)} | {alerts} | {_fmt(p50)} | {_fmt(p95)} | {sum(o.culprit_ok for o in mine)}/{len(mine)} "
                        f"| {sum(o.class_ok for o in mine)}/{len(mine)} | - |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> list[Outcome]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per fault")
    parser.add_argument("--healthy", type=int, default=20, help="healthy runs")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated subset of: " + ", ".join(FAULTS))
    parser.add_argument("--busy", type=int, default=2, help="busy processes beside each job")
    parser.add_argument("--steps", type=int, default=12, help="steps per job (the faults act at step 5)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for a run's first alert")
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
    try:
        with tempfile.TemporaryDirectory(prefix="hvdlog-faults-") as work:
            plan = [(fault, i) for i in range(args.runs) for fault in faults if fault != "healthy"]
            plan += [("healthy", i) for i in range(args.healthy)]
            for fault, index in plan:
                outcome = run_one(fault, Path(work), index, args.steps, args.timeout)
                outcomes.append(outcome)
                print(json.dumps(asdict(outcome)) if args.json else f"{fault} #{index}: {outcome}", file=sys.stdout if args.json else sys.stderr)
    finally:
        stop.set()
        for process in busy:
            process.join(5)
    if not args.json:
        print(f"machine: {machine()}; load average before: {os.getloadavg()[0]:.1f}; {args.busy} busy processes beside each job")
        print(table(outcomes))
    return outcomes


if __name__ == "__main__":
    main()

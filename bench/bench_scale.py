"""Whole-job analyses against the number of ranks: time and peak RSS of each command, answers checked.

    python bench/bench_scale.py [--ranks 64,256,1024] [--events 1000] [--baseline DIR] [--jobs 1,2]

A synthetic job in the contract format is generated per size (reused when already there):
per rank a ``rank-<r>.jsonl`` of ``--events`` events (mostly ``train step`` with a step and
``samples_per_sec``, some debug/info/warning lines), and a native ``rank-<r>.stderr.log``
with Horovod core lines. Rank ``size // 3`` raises at the end (a critical uncaught
exception and its native traceback); every other rank logs the collateral
``HorovodInternalError``; rank 0's capture holds a stall inspector block naming the culprit
as missing; rank ``size // 2`` runs at half the samples/s of the others.

Each command runs as its own process (``grep --level error``, then ``first-failure``, ``stalls``
and ``stragglers`` with each ``--jobs``), timed as a whole: wall time, CPU seconds (user +
system, worker processes included; the steadier figure on a shared machine), CPU against the
same tree's ``grep`` just before, peak RSS (GNU time); every answer is checked against what the job was made to hold, so a fast wrong
answer fails the run. With ``--baseline DIR`` the same commands also run with another
checkout's code first on ``PYTHONPATH``, the two trees taking turns command by command, so
before/after ratios come from one run on the same load. Prints a markdown table: ranks × events -> time and memory.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import machine  # noqa: E402

BASE = 1_795_000_000.0
_SHUTDOWN = ("Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, "
             "allgather or broadcast a tensor after one of the ranks finished execution.")


def _stamp(seconds: float) -> str:
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{round((seconds - whole) * 1e6):06d}Z"


def _head(rank: int, size: int, seconds: float, level: str, message: str) -> str:
    return (f'{{"@timestamp":"{_stamp(seconds)}","log.level":"{level}","message":"{message}","rank":{rank},'
            f'"local_rank":{rank % 8},"size":{size},"local_size":8,"host.name":"node{rank // 8}","process.pid":{4000 + rank},'
            f'"job":"scale","event.dataset":"horovod.app","log.logger":"hvdlog.train"')


def events(rank: int, size: int, count: int) -> str:
    """One rank's events file."""
    culprit, slow = size // 3, size // 2
    lines = []
    for i in range(count - 1):
        seconds = BASE + i * 0.05 + rank * 1e-5
        if i % 10 == 9:
            lines.append(_head(rank, size, seconds, "debug", f"data loader worker {i % 7} refilled its queue") + f',"step":{i // 2 + 1}}}')
            continue
        sps = (400 if rank == slow else 800) + (i * 37 + rank) % 40
        lines.append(_head(rank, size, seconds, "info", "train step")
                     + f',"step":{i // 2 + 1},"epoch":0,"loss":{1 / (1 + i / 100):.5f},"samples_per_sec":{sps}.5,"step_seconds":0.05}}')
    end = BASE + count * 0.05 + 1
    if rank == culprit:
        lines.append(_head(rank, size, end, "critical", "uncaught RuntimeError in main thread: CUDA error: an illegal memory access")
                     + ',"event.action":"uncaught_exception","error.type":"RuntimeError","error.message":"CUDA error: an illegal memory access",'
                     + '"error.stack_trace":"Traceback (most recent call last):\\n  File \\"train.py\\", line 120, in <module>\\n    main()\\n'
                     + 'RuntimeError: CUDA error: an illegal memory access\\n"}')
    else:
        lines.append(_head(rank, size, end + 0.5, "critical", f"uncaught HorovodInternalError in main thread: {_SHUTDOWN}")
                     + ',"event.action":"uncaught_exception","error.type":"horovod.common.exceptions.HorovodInternalError",'
                     + f'"error.message":"{_SHUTDOWN}"}}')
    return "\n".join(lines) + "\n"


def capture(rank: int, size: int, count: int) -> str:
    """One rank's native stderr: Horovod core lines, rank 0's stall block, the traceback at the end."""
    culprit = size // 3
    lines = []
    for i in range(0, count, 50):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(BASE + i * 0.05)))
        lines.append(f"{_stamp(BASE + i * 0.05)} [{stamp}.000100: I /tmp/horovod/common/operations.cc:689] [{rank}]: Horovod cycle {i}")
    if rank == 0:
        seconds = BASE + count * 0.05 - 10
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(seconds)))
        lines += [
            (f"{_stamp(seconds)} [{stamp}.084213: W /tmp/horovod/common/stall_inspector.cc:107] One or more tensors were submitted to be "
             "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "
             "This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is "
             "submitting tensors, which will cause deadlock. "),
            f"{_stamp(seconds)} Missing ranks:",
            f"{_stamp(seconds)} {culprit}: [allreduce.fc1.weight, allreduce.fc2.bias]",
        ]
    end = BASE + count * 0.05 + (1 if rank == culprit else 1.5)
    error = "RuntimeError: CUDA error: an illegal memory access" if rank == culprit else f"horovod.common.exceptions.HorovodInternalError: {_SHUTDOWN}"
    lines += [f"{_stamp(end)} Traceback (most recent call last):", f'{_stamp(end)}   File "train.py", line 120, in <module>',
              f"{_stamp(end)}     main()", f"{_stamp(end)} {error}"]
    return "\n".join(lines) + "\n"


def generate(root: Path, size: int, count: int) -> Path:
    """The job directory for ``size`` ranks × ``count`` events (reused when made before)."""
    job = root / f"scale-{size}x{count}"
    if (job / ".made").exists():
        return job
    shutil.rmtree(job, ignore_errors=True)
    for rank in range(size):
        folder = job / "scale" / f"node{rank // 8}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"rank-{rank}.jsonl").write_text(events(rank, size, count))
        (folder / f"rank-{rank}.stderr.log").write_text(capture(rank, size, count))
    (job / ".made").touch()
    return job


def run(command: list[str], pythonpath: Path) -> tuple[float, float, int, str, int]:
    """(wall seconds, CPU seconds, peak RSS KiB, stdout, exit code) of one whole process; CPU (user + system,
    worker processes included) and the peak RSS are GNU time's ``%U``, ``%S`` and ``%M``. It runs in the
    tree it times: ``python -c`` puts the working directory first on sys.path."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "TZ": "UTC"}
    started = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "hvdlog-bench-rss %M %U %S", sys.executable, "-c",
                             "from hvdlog.cli.main import main; main()", *command],
                            capture_output=True, env=env, check=False, cwd=pythonpath)
    seconds = time.perf_counter() - started
    rss = [line.split() for line in result.stderr.decode(errors="replace").splitlines() if line.startswith("hvdlog-bench-rss ")]
    if not rss:
        return seconds, -1.0, -1, result.stdout.decode(), result.returncode
    return seconds, float(rss[-1][2]) + float(rss[-1][3]), int(rss[-1][1]), result.stdout.decode(), result.returncode


def check(name: str, out: str, code: int, size: int) -> str | None:
    """What is wrong with an answer (None when right)."""
    culprit, slow = size // 3, size // 2
    docs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if name == "grep --level error":
        return None if code == 0 and len(docs) >= size and {d["rank"] for d in docs} == set(range(size)) else f"{len(docs)} docs, exit {code}"
    if name == "first-failure":
        blamed = docs[0].get("blamed_ranks") if docs else None
        return None if blamed == [culprit] else f"blamed {blamed}"
    if name == "stalls":
        missing = [d.get("missing_ranks") for d in docs]
        return None if [culprit] in missing else f"missing {missing[:3]}"
    flagged = sorted(d["rank"] for d in docs if d.get("outlier"))
    return None if flagged == [slow] and code == 0 else f"flagged {flagged[:5]}, exit {code}"


def commands(job: Path, jobs: list[int], tree: str) -> dict[str, list[str]]:
    """What to time: the baseline has no ``-j`` (its stragglers is timed once, as it is)."""
    found = {
        "grep --level error": ["grep", "--json", "--level", "error", str(job)],
        "first-failure": ["first-failure", "--json", str(job)],
        "stalls": ["stalls", "--json", str(job)],
    }
    if tree == "before":
        found["stragglers"] = ["stragglers", "--json", "--no-timeline", str(job)]
    if tree != "before":  # this tree's analyses take -j: each count is timed
        del found["first-failure"], found["stalls"]
    for count in jobs if tree != "before" else ():
        for name in ("first-failure", "stalls"):
            found[f"{name} -j {count}"] = [name, "--json", "-j", str(count), str(job)]
        found[f"stragglers -j {count}"] = ["stragglers", "--json", "--no-timeline", "-j", str(count), str(job)]
    return found


def measure(command: list[str], path: Path, repeat: int) -> tuple[float, float, int, str, int]:
    """Best of ``repeat`` runs (the CPU and peak RSS of that run)."""
    return min((run(command, path) for _ in range(repeat)), key=lambda result: result[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="64,256,1024")
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "hvdlog-bench-scale")
    parser.add_argument("--baseline", type=Path, help="another checkout, timed in the same run (before)")
    parser.add_argument("--jobs", default="1,2", help="stragglers -j values to time")
    parser.add_argument("--repeat", type=int, default=1, help="best of N")
    parser.add_argument("--only", default="", help="comma-separated command names to time (default: all), e.g. stragglers,grep")
    args = parser.parse_args()
    only = [name for name in args.only.split(",") if name]
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    jobs = [int(v) for v in args.jobs.split(",")]
    trees = {"after": REPO, **({"before": args.baseline} if args.baseline else {})}
    rows = ["| ranks (events) | command | tree | time | CPU | CPU / grep's | peak RSS | load | answer |", "|---|---|---|---|---|---|---|---|---|"]
    failed = False
    for size in (int(v) for v in args.ranks.split(",")):
        job = generate(args.root, size, args.events)
        plans = [[(tree, name, command) for name, command in commands(job, jobs, tree).items()
                  if not only or any(name.startswith(prefix) for prefix in only)] for tree in trees]
        grep_cpu: dict[str, float] = {}
        # the trees take turns command by command, so a change of the machine's load hits both alike
        for tree, name, command in (step for steps in itertools.zip_longest(*plans) for step in steps if step is not None):
            seconds, cpu, rss, out, code = measure(command, trees[tree], args.repeat)
            wrong = check(name.split(" -j")[0], out, code, size)
            failed = failed or (wrong is not None and tree == "after")
            if name.startswith("grep"):
                grep_cpu[tree] = cpu  # the same tree's grep, timed just before (the ratio the target is about)
            ratio = f"{cpu / grep_cpu[tree]:.2f}x" if grep_cpu.get(tree, 0) > 0 else "-"
            rows.append(f"| {size} ({size * args.events:,}) | `{name}` | {tree} | {seconds:.2f} s | {cpu:.2f} s | {ratio} "
                        f"| {rss / 1024:.0f} MB | {os.getloadavg()[0]:.1f} | {wrong or 'right'} |")
            print(rows[-1], file=sys.stderr, flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print("\n".join(rows))
    if failed:
        raise SystemExit("a wrong answer (see the table)")


if __name__ == "__main__":
    main()

"""The one-file case of bench_grep.py (issue #14), measured for a shared, loaded machine:
`hvdlog grep --json --level error FILE` against `grep -F` and `jq` on one 128 MB rank file.

    python bench/bench_grep_onefile.py [--rounds 7] [--baseline /path/to/other/checkout]

Same files (bench_grep.generate: reused when there), same three commands and the same
count check as bench_grep.py's "one file" rows. What differs: the tools run interleaved,
round after round (hvdlog, grep, jq, then again), so a burst of load hits them alike, and
each run's CPU time (user + sys of the pipeline, from the kernel's accounting of the
children) is kept beside its wall time. The table gives the best of the rounds for both,
and the ratios to hvdlog. ``--baseline`` adds another checkout's hvdlog (run with its
directory first on PYTHONPATH), e.g. main's, timed in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grep import generate, machine

REPO = Path(__file__).resolve().parent.parent


def run(command: str, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s, lines printed) of one shell pipeline ending in `| wc -l`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} | wc -l"], capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"benchmark command failed ({out.returncode}): {command}\n{out.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, int(out.stdout.strip())


def main() -> None:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0, help="size of the generated job tree in GB, as bench_grep.py (default: %(default)s)")
    parser.add_argument("--ranks", type=int, default=8, help="ranks in the generated job (default: %(default)s)")
    parser.add_argument("--rank", type=int, default=3, help="whose file is searched (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds; the best is reported (default: %(default)s)")
    parser.add_argument("--jq-rounds", type=int, default=3, help="rounds that include jq, the slow one (default: %(default)s)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose hvdlog is timed in the same rounds (e.g. main)")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "hvdlog-bench-grep", help="generated files (default: %(default)s)")
    args = parser.parse_args()
    one = generate(args.dir, args.gb, args.ranks)[args.rank]
    hvdlog = Path(sys.executable).with_name("hvdlog")
    jq_filter = f'select(.rank == {args.rank} and (.["log.level"] == "error" or .["log.level"] == "critical"))'
    ours = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}
    tools: dict[str, tuple[str, dict[str, str]]] = {"hvdlog grep": (f"{hvdlog} grep --json --level error {one}", ours)}
    if args.baseline is not None:
        env = {**os.environ, "PYTHONPATH": str(args.baseline.resolve())}
        tools["hvdlog grep (baseline)"] = (f"{hvdlog} grep --json --level error {one}", env)
    tools["grep -F"] = (f"grep -hF -e '\"log.level\":\"error\"' -e '\"log.level\":\"critical\"' {one}", ours)
    tools["jq"] = (f"jq -c '{jq_filter}' {one}", ours)
    best: dict[str, list[float]] = {tool: [float("inf"), float("inf")] for tool in tools}
    counts: dict[str, int] = {}
    load = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        for tool, (command, env) in tools.items():
            if tool == "jq" and round_ >= args.jq_rounds:
                continue
            wall, cpu, counts[tool] = run(command, env)
            best[tool] = [min(best[tool][0], wall), min(best[tool][1], cpu)]
        load.append(os.getloadavg()[0])
    if len(set(counts.values())) != 1:
        raise SystemExit(f"tools disagree: {counts}")
    size = one.stat().st_size
    wall0, cpu0 = best["hvdlog grep"]
    print(f"machine: {machine()}; load average (1 min) during the rounds: {min(load):.1f}-{max(load):.1f}")
    print(f"file: {one} ({size / 1e6:.0f} MB), {counts['hvdlog grep']} matches each; best of {args.rounds} rounds (jq: {args.jq_rounds})")
    print("| tool | wall (best) | CPU user+sys (best) | wall vs hvdlog | CPU vs hvdlog | throughput (wall) |")
    print("|---|---|---|---|---|---|")
    for tool, (wall, cpu) in best.items():
        print(f"| {tool} | {wall:.3f} s | {cpu:.3f} s | {wall / wall0:.2f}× | {cpu / cpu0:.2f}× | {size / wall / 1e6:.0f} MB/s |")


if __name__ == "__main__":
    main()

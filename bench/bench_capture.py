"""Cost of the per-rank capture process (issue #10): CPU time and memory.

Runs a rank-like process (``hvdlog.configure()`` with capture on, console to /dev/null),
writes LINES native lines of ~100 bytes to fds 1 and 2 (half each, in 4 KiB writes, as a
C library's buffered stdout does), and reads the capture process's CPU time and RSS from
/proc just before ``shutdown()``. Also reports the idle RSS right after start, CPU per MB of
native output and throughput (MB per CPU-second of the capture; wall MB/s from the first
write until everything is drained, which the load of a shared machine inflates).

    python bench/bench_capture.py --lines 1000000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap

RANK = textwrap.dedent(
    """
    import os, sys, time, hvdlog
    config = hvdlog.configure(root=sys.argv[1], job='bench', stall_after=None, max_bytes=100 * 1024 * 1024)
    tee = config.capture.process.pid
    def proc(field):
        for line in open(f'/proc/{tee}/status'):
            if line.startswith(field):
                return int(line.split()[1])
    time.sleep(0.5)
    idle = proc('VmRSS')
    lines = int(sys.argv[2])
    line = b'[1,0]<stdout>: step 123 loss 0.123456 lr 0.010000 samples_per_sec 5120.0 ' + b'x' * 24 + b'\\n'
    block = line * (4096 // len(line))
    per_block = 4096 // len(line)
    start = time.perf_counter()
    for n in range(lines // per_block // 2):
        os.write(1, block); os.write(2, block)
    config.capture.stop()  # drains everything: the tee has done all the work when this returns
    wall = time.perf_counter() - start
    fields = open(f'/proc/{tee}/stat').read().rsplit(')', 1)[1].split()
    ticks = os.sysconf('SC_CLK_TCK')
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    peak = proc('VmHWM')
    written = lines // per_block // 2 * per_block * 2
    mb = written * len(line) / 1e6
    print(f'lines={written} bytes_per_line={len(line)} mb={mb:.1f} wall_s={wall:.2f} tee_cpu_s={cpu:.2f} '
          f'lines_per_cpu_s={written / cpu:,.0f} cpu_ms_per_mb={cpu / mb * 1000:.1f} mb_per_cpu_s={mb / cpu:.1f} '
          f'wall_mb_per_s={mb / wall:.1f} idle_rss_kb={idle} peak_rss_kb={peak}', file=open(sys.argv[3], 'w'))
    hvdlog.shutdown()
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root, open(os.devnull, "wb") as null:
        report = os.path.join(root, "report.txt")
        result = subprocess.run(
            [sys.executable, "-c", RANK, os.path.join(root, "logs"), str(args.lines), report],
            stdout=null, stderr=null, check=False,
            env={**os.environ, "HOROVOD_RANK": "0", "HOROVOD_SIZE": "1"},
        )
        if os.path.exists(report):
            with open(report) as text:
                sys.stdout.write(text.read())
        print(f"nproc={os.cpu_count()} load_average={' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())

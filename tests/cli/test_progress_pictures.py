"""The progress line of long reads and the per-rank pictures, on a real terminal and in a pipe.

A terminal here is a pseudo-terminal (:mod:`pty`): ``isatty()`` is true there exactly as in
a shell, so the commands run as real processes with stderr (or stdout) on one; a pipe is
what ``capture_output`` gives. ``HVDLOG_PROGRESS_BYTES=1`` makes the small test inputs
"large"; the threshold itself is the only thing changed.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ERASE = b"\r\x1b[K"


def _env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "HVDLOG_PROGRESS_BYTES")}
    return {**clean, "PYTHONPATH": str(REPO), "HVDLOG_PROGRESS_BYTES": "1", "COLUMNS": "200", **extra}


def on_terminal(args: list[str], *, stream: str = "stderr", env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run ``hvdlog ARGS`` with ``stream`` on a pseudo-terminal, the other into a pipe: (exit code, terminal bytes, pipe bytes)."""
    master, slave = pty.openpty()
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: slave}
    process = subprocess.Popen([sys.executable, "-m", "hvdlog", *args], stdout=pipes["stdout"], stderr=pipes["stderr"],
                               stdin=subprocess.DEVNULL, env=env or _env())
    os.close(slave)
    other = process.stdout if stream == "stderr" else process.stderr
    piped: list[bytes] = []
    drain = threading.Thread(target=lambda: piped.append(other.read() if other is not None else b""), daemon=True)
    drain.start()  # the pipe is read meanwhile: a full pipe would stop the child, and the terminal with it
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    process.wait(timeout=120)
    drain.join(timeout=60)
    os.close(master)
    return process.returncode, seen.replace(b"\r\n", b"\n"), piped[0]


def in_pipes(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "hvdlog", *args], capture_output=True, env=env or _env(), timeout=120, check=False)


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


def write_job(root: Path, job: str = "train", ranks: int = 3, slow: int | None = 2, steps: int = 30) -> Path:
    """Per-rank events files of a job: every rank steps once a second at 1000 samples/s, ``slow``
    at 400 and 25 % fewer steps (a straggler by samples/s across 3 ranks)."""
    start = time.time() - 3600
    for rank in range(ranks):
        path = root / job / "node1" / f"rank-{rank}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        count, rate = (steps * 3 // 4, 400.0) if rank == slow else (steps, 1000.0)
        with path.open("w") as out:
            for step in range(count):
                out.write(json.dumps({"@timestamp": _iso(start + step), "log.level": "info", "message": "train step", "job": job,
                                      "rank": rank, "size": ranks, "host.name": "node1", "event.dataset": "horovod.app",
                                      "step": step, "samples_per_sec": rate}) + "\n")
    return root / job


class TestProgressLine:
    @pytest.mark.parametrize("command", [["grep", "train step"], ["parse"], ["stragglers"], ["stalls"], ["first-failure"], ["report"]])
    def test_drawn_on_a_terminal_erased_before_results_and_absent_in_a_pipe(self, tmp_path: Path, command: list[str]) -> None:
        """On a terminal's stderr: `hvdlog: reading X of Y, N of M files`, then erased; the
        results (stdout) are the same bytes as in a pipe, where stderr gets no progress."""
        job = write_job(tmp_path)
        code, terminal, stdout = on_terminal([*command, str(job)])
        assert b"\rhvdlog: reading " in terminal and b" of 3 files" in terminal, terminal
        assert terminal.endswith(ERASE) or ERASE + b"hvdlog" in terminal, terminal  # erased before anything else on stderr
        piped = in_pipes([*command, str(job)])
        assert b"reading" not in piped.stderr and b"\r" not in piped.stderr and b"\x1b" not in piped.stderr, piped.stderr
        assert (code, stdout) == (piped.returncode, piped.stdout)

    def test_small_input_draws_nothing(self, tmp_path: Path) -> None:
        """Below the threshold (64 MB by default) a terminal gets no line either."""
        job = write_job(tmp_path)
        _, terminal, _ = on_terminal(["grep", "train step", str(job)], env=_env(HVDLOG_PROGRESS_BYTES=str(10**9)))
        assert b"reading" not in terminal

    def test_parse_shows_how_far_into_a_large_file(self, tmp_path: Path) -> None:
        """One big file: the line moves while the file is read (bytes of the file so far, 0 of 1 files), not only at its end."""
        job = write_job(tmp_path, ranks=1, slow=None, steps=20_000)
        (path,) = job.glob("*/rank-0.jsonl")
        code, terminal, stdout = on_terminal(["parse", str(path)])
        assert code == 0 and stdout.count(b"\n") == 20_000
        assert b", 0 of 1 files" in terminal, terminal  # drawn before the file ended
        assert terminal.endswith(ERASE), terminal[-200:]

    def test_a_warning_starts_on_a_line_of_its_own(self, tmp_path: Path) -> None:
        """A warning while the line is drawn (here: a torn line, which the search for its text parses) erases the line first."""
        job = write_job(tmp_path)
        with (job / "node1" / "rank-1.jsonl").open("a") as out:
            out.write('{"message": "train step", "@timestamp": "2026-01-01T00:00:00Z", "log.lev\n')
        _, terminal, _ = on_terminal(["grep", "train step", str(job)])
        assert b"hvdlog: warning: " in terminal, terminal
        for position in range(len(terminal)):
            if terminal.startswith(b"hvdlog: warning: ", position):
                assert position == 0 or terminal[:position].endswith((ERASE, b"\n")), terminal


class TestStepReaderProgress:
    def test_every_file_counted_with_one_process_and_with_workers(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """stragglers' fast reader tells each file read (one process) or each worker's share (forked
        workers): the counts add up to the files and bytes read, and the answer does not change."""
        from hvdlog.analyses import step_read
        from hvdlog.analyses.stragglers import stragglers
        from hvdlog.query import files as files_module
        from hvdlog.query.files import FileSource
        from hvdlog.query.spec import Filter

        job = write_job(tmp_path, ranks=4)
        files = sorted(job.rglob("*.jsonl"))
        monkeypatch.setattr(files_module, "PARALLEL_MIN_BYTES", 0)  # workers even for this small job
        tallies = []
        for workers in (1, 2):
            told: list[tuple[int, int]] = []
            seen: list[list[Path]] = []

            def watch(listed: list[Path], told: list[tuple[int, int]] = told, seen: list[list[Path]] = seen) -> step_read.Advance:
                seen.append(listed)
                return lambda size, count: told.append((size, count))

            read = step_read.read_steps(FileSource([job], warn=print), Filter(), workers, watch)
            assert sorted(seen[0]) == files
            assert sum(c for _, c in told) == len(files) and sum(s for s, _ in told) == sum(p.stat().st_size for p in files)
            assert len(told) == (len(files) if workers == 1 else 2)
            tallies.append(sorted((row.rank, row.last_step, row.outlier) for row in stragglers(read.tally)))
        assert tallies[0] == tallies[1]


class TestStragglerPicture:
    def test_plain_ascii_bars_into_a_pipe(self, tmp_path: Path) -> None:
        """Into a pipe: one `rank N ####....  samples/s` bar per rank, no escape codes, no block characters;
        the flagged rank's bar is marked and shorter."""
        job = write_job(tmp_path)
        result = in_pipes(["stragglers", str(job)])
        out = result.stdout.decode()
        assert result.returncode == 0, out + result.stderr.decode()
        bars = {int(line.split()[1]): line for line in out.splitlines() if line.startswith("  rank ")}
        assert sorted(bars) == [0, 1, 2], out
        assert "train: samples/s by rank:" in out and "\x1b" not in out and "█" not in out
        assert bars[2].endswith("<- flagged") and "flagged" not in bars[0] + bars[1]
        assert bars[0].count("#") == 30 and bars[2].count("#") < 30 and bars[2].split()[3] == "400"

    def test_blocks_and_colour_on_a_terminal_no_colour_with_no_color(self, tmp_path: Path) -> None:
        """On a terminal: block characters, the straggler's bar in colour; NO_COLOR=1 keeps the blocks, drops every colour code."""
        job = write_job(tmp_path)
        code, shown, _ = on_terminal(["stragglers", str(job)], stream="stdout")
        text = shown.decode()
        assert code == 0 and "█" in text and "░" in text, text
        (straggler,) = [line for line in text.splitlines() if "rank    2 " in line and "█" in line]
        assert "\x1b[" in straggler, straggler
        code, plain, _ = on_terminal(["stragglers", str(job)], stream="stdout", env=_env(NO_COLOR="1"))
        assert code == 0 and "█" in plain.decode() and b"\x1b[" not in plain, plain

    def test_the_picture_shows_what_differs_not_the_equal_last_steps(self, tmp_path: Path) -> None:
        """Synchronous training keeps every rank at the same step: the bars plot samples/s, so the slow
        rank's bar is shorter although its last step is the others' (stragglers and report alike)."""
        job = write_job(tmp_path, steps=30)
        slow = job / "node1" / "rank-2.jsonl"
        last = json.loads(slow.read_text().splitlines()[-1])
        with slow.open("a") as out:  # rank 2 keeps pace in steps: as many as the others, still at 400 samples/s
            for step in range(last["step"] + 1, 30):
                out.write(json.dumps({**last, "step": step, "@timestamp": _iso(time.time() - 3600 + step)}) + "\n")
        out = in_pipes(["stragglers", str(job)]).stdout.decode()
        bars = {int(line.split()[1]): line.split()[2] for line in out.splitlines() if line.startswith("  rank ")}
        assert bars[2].count("#") < bars[0].count("#") == bars[1].count("#") == 30, out
        report = in_pipes(["report", str(job)]).stdout.decode()
        (line,) = [line for line in report.splitlines() if "by rank 0-2:" in line]
        assert "samples/s by rank 0-2: @@=  (highest 1000)" in line, report

    def test_many_ranks_get_one_sparkline(self, tmp_path: Path) -> None:
        """Past 32 ranks a bar each would fill the screen: one character per rank instead."""
        job = write_job(tmp_path, ranks=40, slow=7, steps=12)
        out = in_pipes(["stragglers", str(job)]).stdout.decode()
        (line,) = [line for line in out.splitlines() if "samples/s by rank 0-39:" in line]
        picture = line.split(": ")[-1].split()[0]
        assert len(picture) == 40 and picture[7] != picture[6] == picture[8], line
        assert not [line for line in out.splitlines() if line.startswith("  rank ")]

"""``hvdlog run``: the launcher's console joins the job's folder (issue 22), with real processes."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hvdlog.analyses.autotune import autotune_line
from hvdlog.cli.run import EXIT_LINE, GLUED_WORKER_LINE, launcher_command
from hvdlog.documents import get_field
from hvdlog.parse.autotune import autotune_documents
from hvdlog.parse.patterns import compile_pattern, load_samples
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

ARRIVAL = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ")


def hvdlog_run(tmp_path: Path, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hvdlog", "run", "--root", str(tmp_path), "--job", "j", "--", *command],
        capture_output=True, text=True, timeout=timeout, check=False, preexec_fn=lambda: os.umask(0o022),
        env={key: value for key, value in os.environ.items() if key != "HVDLOG_JOB"},
    )


class TestLauncherCommand:
    def test_horovodrun_gets_info_logging(self, tmp_path: Path) -> None:
        """--log-level INFO is added unless the user chose a level; other commands are left alone."""
        assert launcher_command(["horovodrun", "-np", "2", "python", "t.py"], tmp_path)[:3] == ["horovodrun", "--log-level", "INFO"]
        assert launcher_command(["horovodrun", "--log-level", "DEBUG", "python"], tmp_path) == ["horovodrun", "--log-level", "DEBUG", "python"]
        assert launcher_command(["mpirun", "-np", "2"], tmp_path) == ["mpirun", "-np", "2"]

    def test_autotune_log_goes_into_the_job(self, tmp_path: Path) -> None:
        """--autotune without a log file gets one in the job's folder; a named one is kept."""
        command = launcher_command(["horovodrun", "--autotune", "python"], tmp_path)
        assert command[command.index("--autotune-log-file") + 1] == str(tmp_path / "autotune.csv")
        named = ["horovodrun", "--autotune", "--autotune-log-file", "mine.csv", "python"]
        assert launcher_command(named, tmp_path).count("--autotune-log-file") == 1


class TestRun:
    def test_tee_env_and_exit_status(self, tmp_path: Path) -> None:
        """Both streams pass through and land in launcher.log with arrival times; the child sees
        HVDLOG_JOB/HVDLOG_ROOT; the exit status is the child's."""
        script = "import os,sys; print('out', os.environ['HVDLOG_JOB'], os.environ['HVDLOG_ROOT']); print('err line', file=sys.stderr); sys.exit(3)"
        done = hvdlog_run(tmp_path, sys.executable, "-c", script)
        assert done.returncode == 3, done.stderr
        assert done.stdout == f"out j {tmp_path}\n"
        assert "err line\n" in done.stderr
        lines = (tmp_path / "j" / "launcher.log").read_text().splitlines()
        assert sorted(ARRIVAL.sub("", line) for line in lines) == ["err line", f"out j {tmp_path}"]
        assert all(ARRIVAL.match(line) for line in lines)

    @pytest.mark.parametrize(("body", "status", "reason"), [("pass", 0, None), ("import sys; sys.exit(5)", 5, None),
                                                             ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 143, "SIGTERM")])
    def test_launcher_exit_is_recorded(self, tmp_path: Path, body: str, status: int, reason: str | None) -> None:
        """The launcher's exit status becomes a launcher_exit event in <job>/<host>/launcher.jsonl, read as job j's."""
        done = hvdlog_run(tmp_path, sys.executable, "-c", body)
        assert done.returncode == status, done.stderr
        (path,) = (tmp_path / "j").glob("*/launcher.jsonl")
        (doc,) = FileSource([tmp_path]).search(Filter(any_of=()))
        assert get_field(doc, "event.action") == "launcher_exit" and get_field(doc, "hvdlog.launcher.exit_code") == status
        assert doc["job"] == "j" and get_field(doc, "event.reason") == reason and doc.get("rank") is None and path.stat().st_mode & 0o777 == 0o640

    def test_elastic_keeps_worker_lines_out(self, tmp_path: Path) -> None:
        """An elastic launch (--min-np/--max-np/--host-discovery-script): the workers' tagged lines reach
        the console but not launcher.log (their tag is a spawn index, not the rank after a reset)."""
        script = "print('[0]<stdout>:a worker line'); print('INFO:root:reset workers: 2')"
        done = hvdlog_run(tmp_path, sys.executable, "-c", script, "--min-np", "2")
        assert done.returncode == 0, done.stderr
        assert done.stdout == "[0]<stdout>:a worker line\nINFO:root:reset workers: 2\n"
        lines = (tmp_path / "j" / "launcher.log").read_text().splitlines()
        assert [ARRIVAL.sub("", line) for line in lines] == ["INFO:root:reset workers: 2"]

    @pytest.mark.parametrize(("elastic", "expected"), [
        ((), ["[1]<stdout>:epoch 2 step 118 lo", "Process 1 exit with status code 137."]),
        (("--min-np", "2"), ["Process 1 exit with status code 137."]),
    ])
    def test_a_dead_workers_piece_and_the_exit_line_behind_it(self, tmp_path: Path, elastic: tuple[str, ...], expected: list[str]) -> None:
        """horovodrun --gloo writes a killed worker's unfinished line at its end and prints the exit
        status right behind it. The console keeps the bytes; launcher.log gets two lines with one
        arrival time, so the rule that keeps workers' lines out (elastic, Filebeat) keeps the exit line."""
        script = ("import sys; sys.stdout.write('[1]<stdout>:epoch 2 step 118 lo'); sys.stdout.flush(); "
                  "print('Process 1 exit with status code 137.')")
        done = hvdlog_run(tmp_path, sys.executable, "-c", script, *elastic)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "[1]<stdout>:epoch 2 step 118 loProcess 1 exit with status code 137.\n"
        lines = (tmp_path / "j" / "launcher.log").read_text().splitlines()
        assert [ARRIVAL.sub("", line) for line in lines] == expected
        assert len({ARRIVAL.match(line).group() for line in lines}) == 1  # type: ignore[union-attr]

    def test_the_tees_rule_is_the_grammars(self) -> None:
        """The tee's copy of horovodrun's exit lines is HOROVOD_GLOO_EXIT_PRINT; behind a gloo tag it
        takes every sample of HOROVOD_GLUED_LAUNCHER_LINE and none of its near-misses."""
        assert compile_pattern("HOROVOD_GLOO_EXIT_PRINT").regex.pattern == EXIT_LINE
        assert GLUED_WORKER_LINE.startswith(compile_pattern("HOROVOD_GLOO_TAG_ANY").regex.pattern)
        rule = re.compile(GLUED_WORKER_LINE)
        examples = load_samples()["HOROVOD_GLUED_LAUNCHER_LINE"]
        samples, misses = examples.samples, examples.misses
        assert samples and misses
        assert all(rule.match(f"[1]<stdout>:{text}") for text in samples)
        assert not any(rule.match(f"[1]<stdout>:{text}") for text in misses)

    def test_missing_command(self, tmp_path: Path) -> None:
        """A command that does not exist: one sentence, exit 2."""
        done = hvdlog_run(tmp_path, "no-such-launcher-xyz")
        assert done.returncode == 2 and "cannot run no-such-launcher-xyz" in done.stderr

    @pytest.mark.horovod
    def test_real_horovodrun(self, tmp_path: Path) -> None:
        """A real 2-rank Gloo job: the workers write into <root>/j, their console (tagged by horovodrun)
        is in launcher.log and read as part of job j. (The elastic driver's INFO lines in
        launcher.log are checked by tests/runtime/test_resets.py, which launches through hvdlog run.)"""
        script = "import hvdlog, horovod.torch as hvd; hvdlog.configure(stall_after=None); hvd.init(); hvdlog.get_logger().info('hello'); hvdlog.shutdown()"
        done = hvdlog_run(tmp_path, "horovodrun", "--gloo", "-np", "2", sys.executable, "-c", script, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(list((tmp_path / "j").glob("*/rank-*.jsonl"))) == 2
        log = (tmp_path / "j" / "launcher.log").read_text()
        assert "[1]<stdout>:" in log and "Horovod initialized" in log, log[-2000:]
        docs = list(FileSource([tmp_path / "j" / "launcher.log"]).search(Filter()))
        assert docs and {doc.get("job") for doc in docs} == {"j"}
        assert {doc.get("rank") for doc in docs if "Horovod initialized" in doc["message"]} == {0, 1}
        # the whole job: the console beside the ranks' own files, each rank's line once (hvdlog/query/copies.py)
        whole = list(FileSource([tmp_path / "j"]).search(Filter()))
        said = [(doc.get("rank"), doc["message"]) for doc in whole if doc["message"] in ("Horovod initialized", "hello")]
        assert sorted(said, key=str) == [(0, "Horovod initialized"), (0, "hello"), (1, "Horovod initialized"), (1, "hello")], said

    @pytest.mark.horovod
    def test_real_horovodrun_verbose_env_is_redacted(self, tmp_path: Path) -> None:
        """``MY_API_TOKEN=... hvdlog run -- horovodrun --verbose --gloo -np 1``: horovodrun prints the
        worker's ``env ... MY_API_TOKEN=...`` command line; launcher.log (0640, in a 0750 folder) and
        the console have ``[REDACTED]`` in its place (the token was in both, 0644 in a 0755 folder)."""
        token = "tok_Zq81mWc3pX0vN5bT"  # noqa: S105 - a made-up secret the test must see redacted
        done = subprocess.run(
            [sys.executable, "-m", "hvdlog", "run", "--root", str(tmp_path), "--job", "j", "--",
             "horovodrun", "--verbose", "--gloo", "-np", "1", sys.executable, "-c", "print('hi')"],
            capture_output=True, text=True, timeout=240, check=False, preexec_fn=lambda: os.umask(0o022),
            env={**{key: value for key, value in os.environ.items() if key != "HVDLOG_JOB"}, "MY_API_TOKEN": token},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        log = (tmp_path / "j" / "launcher.log").read_text()
        assert "MY_API_TOKEN=[REDACTED]" in log and "MY_API_TOKEN=[REDACTED]" in done.stdout, log[-2000:]
        assert token not in log + done.stdout + done.stderr
        assert [stat.S_IMODE(path.stat().st_mode) for path in (tmp_path / "j", tmp_path / "j" / "launcher.log")] == [0o750, 0o640]

    @pytest.mark.horovod
    def test_real_autotune(self, tmp_path: Path) -> None:
        """horovodrun --autotune through hvdlog run: Horovod writes its autotune log into the job's
        folder, read back as autotune documents and one line for stragglers."""
        script = (
            "import torch, horovod.torch as hvd\nhvd.init()\n"
            "for i in range(300):\n    hvd.allreduce(torch.ones(1000), name='a'); hvd.allreduce(torch.ones(10), name='b')\n"
        )
        tuning = ("--autotune", "--autotune-warmup-samples", "1", "--autotune-steps-per-sample", "2", "--autotune-bayes-opt-max-samples", "3")
        done = hvdlog_run(tmp_path, "horovodrun", "--gloo", "-np", "2", *tuning, sys.executable, "-c", script, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert stat.S_IMODE((tmp_path / "j" / "autotune.csv").stat().st_mode) == 0o640  # created by hvdlog run, kept by Horovod
        docs = list(autotune_documents(tmp_path / "j" / "autotune.csv"))
        assert len(docs) >= 4 and {doc["job"] for doc in docs} == {"j"}
        (line,) = autotune_line([tmp_path / "j"])
        assert line.startswith("autotune (job j): ") and " MB, cycle time " in line
        # what stragglers and report show: the same line, and report's JSON section
        from click.testing import CliRunner

        from hvdlog.cli.main import cli

        shown = CliRunner().invoke(cli, ["stragglers", str(tmp_path)])
        assert line in shown.output.splitlines(), shown.output
        reported = CliRunner().invoke(cli, ["report", "--json", str(tmp_path)])
        (job,) = [json.loads(text) for text in reported.output.splitlines() if text.startswith("{")]
        assert job["autotune"]["summary"] in line and job["autotune"]["samples"] >= 3, job.get("autotune")
        assert CliRunner().invoke(cli, ["report", str(tmp_path)]).output.count(job["autotune"]["summary"]) == 1

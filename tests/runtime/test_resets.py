"""Real elastic Horovod jobs (issue 22): ranks, files and resets as hvdlog records them.

Each job is a real ``horovodrun --gloo`` elastic launch on this machine: several one-slot
"hosts" that are all this machine (spellings of 127.0.0.1 that need no /etc/hosts, so each
is a local address and no ssh is used; a failing host is blacklisted whole), a real host
discovery script reading a file the job itself rewrites, ``hvd.elastic.run`` with
``TorchState`` and ``state.commit()`` (tests/support/elastic_job.py). Every event of the
worker carries Horovod's own ``hvd.rank()``/``hvd.size()``/``hvd.local_rank()`` read when it
was logged, which the test compares with hvdlog's fields. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.elastic_run import EXAMPLE_EPOCHS, EXAMPLE_STEPS, ElasticRun, hosts_text, run_elastic

from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

pytestmark = pytest.mark.horovod


def truth_events(run: ElasticRun) -> Iterator[dict[str, Any]]:
    """Events that carry Horovod's own answer (``extra.hvd_rank`` ...) beside hvdlog's fields."""
    for events in run.events().values():
        for event in events:
            if "hvd_rank" in event.get("extra", {}):
                yield event


def check_files_and_fields(run: ElasticRun, least: int = 20) -> None:
    """No file holds two processes, every event's rank/size/local_rank is Horovod's at that moment,
    and every event's epoch equals the resets its process had logged before it."""
    assert run.event_files(), run.console[-3000:]
    for path, events in run.events().items():
        assert path.name.startswith("pid-"), path
        assert {event["process.pid"] for event in events} == {int(path.name.split("-")[1].split(".")[0])}, path
        resets = 0
        for event in events:
            if event.get("event.action") == "elastic_reset":
                resets += 1
            assert event.get("horovod.elastic.epoch", 0) == resets, (path, event)
    checked = 0
    for event in truth_events(run):
        extra = event["extra"]
        assert (event["rank"], event["size"], event["local_rank"]) == (extra["hvd_rank"], extra["hvd_size"], extra["hvd_local_rank"]), event
        checked += 1
    assert checked >= least
    for path in run.directory.glob("*/*.log"):
        assert path.name.startswith("pid-"), path


def check_rank_pruning(run: ElasticRun) -> None:
    """``grep --rank R`` (FileSource with a rank filter) returns exactly the events whose rank is R."""
    everything = run.documents(Filter())
    ranks = {doc.get("rank") for doc in everything} - {None}
    assert ranks
    for rank in sorted(ranks):
        expected = [doc for doc in everything if doc.get("rank") == rank]
        assert run.documents(Filter(ranks=frozenset({rank}))) == expected


def resets_by_process(run: ElasticRun) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for events in run.events().values():
        for event in events:
            if event.get("event.action") == "elastic_reset":
                found[event["process.pid"]].append(event)
    return found


def last_membership_before(events: list[dict[str, Any]], reset: dict[str, Any]) -> tuple[Any, ...]:
    before = [event for event in events if event["@timestamp"] < reset["@timestamp"] and "hvd_rank" in event.get("extra", {})]
    return before[-1]["rank"], before[-1]["size"], before[-1]["local_rank"]


class TestKillRecoveryAndHostAdded:
    """Three workers (with a Horovod timeline); spawn rank 0 is SIGKILLed at step 4 (commits every 3 steps, so step 3
    is replayed); the job recovers with 2, a fourth host is added at step 8, and it
    finishes with 3 (going on until it has 3)."""

    @pytest.fixture(name="run", scope="class")
    @classmethod
    def fixture_run(cls, tmp_path_factory: pytest.TempPathFactory) -> ElasticRun:
        tmp_path = tmp_path_factory.mktemp("kill")
        env = {
            "ELASTIC_STEPS": "12", "ELASTIC_COMMIT_EVERY": "3", "ELASTIC_KILL_AT": "0:4", "ELASTIC_FINAL_SIZE": "3",
            "ELASTIC_HOSTS_AT": f"8:{hosts_text(4)}", "HVDLOG_TIMELINE": "1",
        }
        return run_elastic(tmp_path, np=3, min_np=2, max_np=3, hosts=3, env=env)

    def test_job_finishes(self, run: ElasticRun) -> None:
        """horovodrun exits 0: the job recovered and finished."""
        assert run.returncode == 0, run.console[-4000:]
        assert "Process 0 exit with status code 137" in run.console
        launcher = (run.directory / "launcher.log").read_text()
        # The workers' lines stay out of it: their tag is the spawn index, not the rank after a reset.
        assert "native line at step" not in launcher and "native line at step" in run.console
        for line in (r"INFO:root:reset workers: 2\n", r"INFO:root:record state: \S+\[0\] = FAILURE\n", r"INFO:root:blacklist failing host: \S+\n"):
            assert re.search(line, launcher), line

    def test_files_and_fields(self, run: ElasticRun) -> None:
        """One process per file; each event's rank/size/local_rank equal Horovod's, with no stale window."""
        check_files_and_fields(run)

    def test_resets(self, run: ElasticRun) -> None:
        """Each survivor logged one reset per reset: a failure (restored to the last commit) then hosts added,
        with its old membership as it last logged it and the new one as Horovod reports it."""
        resets = resets_by_process(run)
        survivors = [pid for pid, found in resets.items() if found]
        assert len(survivors) == 2, resets
        events_of = {events[0]["process.pid"]: events for events in run.events().values()}
        for pid in survivors:
            found = resets[pid]
            assert [event["horovod.elastic.reason"] for event in found] == ["failure", "hosts_added"]
            assert [event["horovod.elastic.epoch"] for event in found] == [1, 2]
            assert found[0]["horovod.elastic.restored_step"] == 3
            assert (found[0]["size"], found[1]["size"]) == (2, 3)
            for event in found:
                previous = (event["horovod.elastic.previous_rank"], event["horovod.elastic.previous_size"], event["horovod.elastic.previous_local_rank"])
                assert previous == last_membership_before(events_of[pid], event)
                assert event["message"] == "elastic reset" and event["log.level"] == "info"

    def test_replayed_steps_differ_by_epoch(self, run: ElasticRun) -> None:
        """Steps run again after the restore are told apart by horovod.elastic.epoch."""
        for events in run.events().values():
            seen = Counter((event.get("step"), event.get("horovod.elastic.epoch", 0)) for event in events if event["message"] == "step")
            assert all(count == 1 for count in seen.values()), seen
        replayed = {event["step"] for event in truth_events(run) if event["message"] == "step" and event.get("horovod.elastic.epoch") == 1} & {3}
        assert replayed == {3}

    def test_native_lines_carry_the_rank_at_print_time(self, run: ElasticRun) -> None:
        """Prints land in the process's own stdout file, each parsed with the rank it was printed under."""
        prints = [doc for doc in run.documents(Filter(pattern="native line at step")) if "/pid-" in doc["log"]["file"]["path"]]
        assert len(prints) > 20
        for doc in prints:
            assert doc["message"].endswith(f" rank {doc['rank']}"), doc

    def test_grep_rank(self, run: ElasticRun) -> None:
        """grep --rank R returns exactly rank R's events (JSON and native)."""
        check_rank_pruning(run)

    def test_every_incarnation_keeps_its_timeline(self, run: ElasticRun) -> None:
        """Each process and incarnation has its own timeline file (Horovod truncates at re-init): the
        first incarnation's rank 0 timeline and a later one's both hold events."""
        written = {path.name: path.stat().st_size for path in run.directory.glob("*/horovod-timeline-p*-e*.json")}
        nonempty = sorted(name for name, size in written.items() if size > 100)
        assert any(name.endswith("-e0.json") for name in nonempty), written
        assert any(not name.endswith("-e0.json") for name in nonempty), written
        exported = [orjson.loads(line) for path in run.directory.glob("*/horovod-timeline-p*.ndjson") for line in path.read_bytes().splitlines()]
        assert exported, "no timeline documents exported"


class TestScaleDown:
    """Three workers; at step 4 rank 0 removes a host from discovery: the job goes on with 2
    (and runs until it has 2)."""

    @pytest.fixture(name="run", scope="class")
    @classmethod
    def fixture_run(cls, tmp_path_factory: pytest.TempPathFactory) -> ElasticRun:
        tmp_path = tmp_path_factory.mktemp("down")
        env = {"ELASTIC_STEPS": "10", "ELASTIC_HOSTS_AT": f"4:{hosts_text(2)}", "ELASTIC_FINAL_SIZE": "2"}
        return run_elastic(tmp_path, np=3, min_np=2, max_np=3, hosts=3, env=env)

    def test_scale_down(self, run: ElasticRun) -> None:
        """The job finishes; the two remaining processes logged one hosts_removed reset to size 2;
        the retired worker's process holds no reset and its file ends there."""
        assert run.returncode == 0, run.console[-4000:]
        assert "has been removed from elastic job" in run.console
        check_files_and_fields(run)
        check_rank_pruning(run)
        resets = resets_by_process(run)
        assert sorted(len(found) for found in resets.values()) == [1, 1], resets
        for found in resets.values():
            assert found[0]["horovod.elastic.reason"] == "hosts_removed"
            assert (found[0]["horovod.elastic.previous_size"], found[0]["size"]) == (3, 2)
        finished = [events for events in run.events().values() if events[-1]["message"] == "done"]
        assert len(finished) == 2


class TestFailsForGood:
    """Two workers, --min-np 2: one is SIGKILLed, its host is blacklisted, the job cannot go on."""

    def test_fails(self, tmp_path: Path) -> None:
        """horovodrun fails; the killed process's events stop at its step, the survivor's files say
        the membership it had (no reset completed with fewer than min-np workers)."""
        env = {"ELASTIC_STEPS": "30", "ELASTIC_KILL_AT": "1:3"}
        run = run_elastic(tmp_path, np=2, min_np=2, max_np=2, hosts=2, env=env, extra=("--elastic-timeout", "5"))
        assert run.returncode != 0, run.console[-4000:]
        check_files_and_fields(run, least=6)
        check_rank_pruning(run)
        killed = [events for events in run.events().values() if events[-1]["message"] == "step" and events[-1]["extra"]["hvd_rank"] == 1]
        assert len(killed) == 1 and killed[0][-1]["step"] == 2
        assert not any(resets_by_process(run).values())


class TestCaptureLearnsRanks:
    """Without Horovod: the native capture of an elastic process tags each line with the rank it
    was printed under, across a rank change (what the reset path does through refresh_rank)."""

    def test_rank_change(self, tmp_path: Path) -> None:
        """Lines printed before set_rank keep the old tag, every line after it has the new one."""
        body = (
            "import hvdlog, sys\n"
            f"config = hvdlog.configure(root={str(tmp_path)!r}, job='t', stall_after=None)\n"
            "for n in range(200): print(f'before {n}')\n"
            "config.capture.set_rank(0)\n"
            "for n in range(200): print(f'after {n}')\n"
            "print('to stderr', file=sys.stderr)\n"
            "hvdlog.shutdown()\n"
        )
        env = {**os.environ, "HOROVOD_ELASTIC": "1", "HOROVOD_RANK": "2", "HOROVOD_SIZE": "3", "HOROVOD_LOCAL_RANK": "0", "HOROVOD_LOCAL_SIZE": "1"}
        done = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == "before 0"  # the console gets the bytes untouched
        (stdout,) = tmp_path.glob("t/*/pid-*.stdout.log")
        (stderr,) = tmp_path.glob("t/*/pid-*.stderr.log")
        lines = stdout.read_text().splitlines()
        assert len(lines) == 400
        assert [line.split("Z ", 1)[1] for line in lines] == [f"[2]<stdout>:before {n}" for n in range(200)] + [f"[0]<stdout>:after {n}" for n in range(200)]
        assert stderr.read_text().split("Z ", 1)[1] == "[0]<stderr>:to stderr\n"
        docs = list(FileSource([stdout]).search(Filter()))
        assert {doc["rank"] for doc in docs if doc["message"].startswith("before")} == {2}
        assert {doc["rank"] for doc in docs if doc["message"].startswith("after")} == {0}


class TestShippedElasticExample:
    """README's elastic example, ``training/elastic_train.py`` (issue #40, M10), in a real elastic job:
    rank 1 is SIGKILLed at step 3, the survivor restores the last commit, resets, runs its reset
    callback and finishes every step alone; hvdlog's verdict is ``recovered``."""

    EPOCHS, STEPS = EXAMPLE_EPOCHS, EXAMPLE_STEPS

    @pytest.fixture(name="run")
    def fixture_run(self, elastic_example: ElasticRun) -> ElasticRun:
        """The session's one run of the example (tests/conftest.py), shared with the agreement test."""
        return elastic_example

    def test_recovers_and_finishes(self, run: ElasticRun) -> None:
        assert run.returncode == 0, run.console[-3000:]
        events = [event for events in run.events().values() for event in events]
        resets = [event for event in events if event.get("event.action") == "elastic_reset"]
        assert resets and {event["horovod.elastic.reason"] for event in resets} == {"failure"}, resets
        assert any(event["message"] == "reset callback: the job goes on" and event.get("horovod.elastic.epoch") == 1 for event in events)
        done = [event for event in events if event["message"] == "training done"]
        assert len(done) == 1 and done[0]["extra"]["size"] == 1 and done[0]["extra"]["resets"] == 1, done
        steps = {event["step"] for event in events if event["message"] == "train step" and event["process.pid"] == done[0]["process.pid"]}
        assert steps == set(range(1, self.EPOCHS * self.STEPS + 1)), steps
        assert all(event["samples_per_sec"] > 0 for event in events if event["message"] == "train step")

    def test_verdict_is_recovered(self, run: ElasticRun) -> None:
        result = subprocess.run([sys.executable, "-m", "hvdlog", "report", "--json", str(run.directory)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode in (0, 1), result.stderr[-2000:]
        report = json.loads(result.stdout)
        assert report["status"]["state"] == "recovered", report["status"]
        assert report["verdict"]["recovered"] is True and report["verdict"]["culprit"] == [1], report["verdict"]

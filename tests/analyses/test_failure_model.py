"""The failure model (hvdlog.analyses.failures) on plain documents built the way the parser and the runtime write them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hvdlog.analyses.failures import first_failure
from hvdlog.analyses.stalls import stall_episodes
from hvdlog.parse import parse_lines


def _console(text: str) -> list[dict[str, Any]]:
    return list(parse_lines(text.strip("\n").splitlines(), path="console.log", timezone="UTC"))


def test_a_killed_rank_printed_before_a_survivors_traceback_is_the_culprit() -> None:
    docs = _console("""
Process 1 exit with status code 137.
[0]<stderr>:Traceback (most recent call last):
[0]<stderr>:  File "train.py", line 9, in <module>
[0]<stderr>:RuntimeError: gloo::IoException: Connection closed by peer [10.0.0.2]:1234
Process 0 exit with status code 1.
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and not report.primary
    assert report.reasoning.startswith("rank 1: exit 137 (SIGKILL, often the OOM killer) per horovodrun; rank 0's traceback follows from it")
    assert "Connection closed by peer" in report.reasoning
    assert report.confidence == "likely"
    assert [item["rank"] for item in report.collateral] == [0]


def test_an_abort_after_the_ranks_own_peer_loss_is_collateral() -> None:
    docs = _console("""
[1]<stderr>:Killed
[0]<stderr>:terminate called after throwing an instance of 'gloo::IoException'
[0]<stderr>:  what():  [pair.cc:598] Connection closed by peer [10.0.0.13]:41952
[0]<stderr>:Fatal Python error: Aborted
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and report.primary and report.confidence == "certain"
    assert [item["rank"] for item in report.collateral] == [0]


def test_collateral_is_listed_in_the_order_the_ranks_went_down() -> None:
    """Rank 3 lost its peer before rank 1 did: collateral reads 3, then 1 (it once read in rank order)."""
    docs = _console("""
[2]<stderr>:Killed
[3]<stderr>:RuntimeError: gloo::IoException: Connection closed by peer [10.0.0.2]:1234
[1]<stderr>:RuntimeError: gloo::IoException: Connection closed by peer [10.0.0.2]:1234
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [2]
    assert [item["rank"] for item in report.collateral] == [3, 1]
    assert "rank 3's traceback and rank 1's traceback follow from it" in report.reasoning, report.reasoning


def test_the_launchers_verdict_orders_untimed_candidates_and_is_never_the_culprit() -> None:
    docs = _console("""
[0]<stderr>:ValueError: bad batch
[3]<stderr>:KeyError: 'label'
Traceback (most recent call last):
  File "/usr/bin/horovodrun", line 8, in <module>
RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: 3
Exit code: 250
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [3] and "KeyError" in report.cause
    assert report.confidence == "likely"  # untimed: the launcher's order, not a time, decided
    assert [item["rank"] for item in report.other_errors] == [0]


def test_open_mpi_box_and_mpirun_noticed_name_the_rank() -> None:
    docs = _console("""
--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 77 on node n3 exited on signal 9 (Killed).
--------------------------------------------------------------------------
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [2] and not report.primary and "SIGKILL" in report.reasoning
    assert report.evidence[0]["source"] == "mpirun_noticed"


def test_an_untagged_error_is_rank_unknown() -> None:
    (report,) = first_failure(_console("NCCL error: unhandled cuda error\nERROR:root:ncclAllReduce failed: unhandled cuda error"))
    assert report.blamed_ranks == [None] and report.reasoning.startswith("rank unknown")


def test_a_scale_down_is_not_a_failure() -> None:
    docs = _console("""
[2]<stderr>:terminate called after throwing an instance of 'std::runtime_error'
[2]<stderr>:  what():  localhost[2] has been removed from elastic job
[2]<stderr>:Aborted
Process 2 exit with status code 134.
""")
    assert first_failure(docs) == []


def _event(rank: int, second: float, **fields: Any) -> dict[str, Any]:
    return {"@timestamp": f"2026-12-01T10:00:{second:06.3f}Z", "job": "el", "rank": rank, "log": {"level": "info"},
            "event": {"dataset": "horovod.app", **fields.pop("event", {})}, **fields}


def _reset(rank: int, previous: int, second: float) -> dict[str, Any]:
    return _event(rank, second, size=2, message="elastic reset", event={"action": "elastic_reset"},
                  horovod={"elastic": {"epoch": 1, "previous_rank": previous, "previous_size": 3, "reason": "failure", "restored_step": 20}})


def test_a_sigkilled_elastic_worker_is_named_from_hvdlogs_own_files_and_the_recovery_said() -> None:
    docs = [
        *(_event(rank, 1.0, step=20, message="step") for rank in range(3)),
        _event(0, 2.0, message="Timed out waiting 30000ms for recv operation to complete", log={"level": "error"}),
        _reset(0, 0, 3.0), _reset(1, 2, 3.0),
        *(_event(rank, 5.0, step=40, message="step", horovod={"elastic": {"epoch": 1}}) for rank in range(2)),
    ]
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and "rank at death" in report.cause
    assert [item["rank"] for item in report.collateral] == [0]  # the survivor's recv timeout is a consequence
    assert isinstance(report.recovered, dict) and report.recovered["text"] == "recovered at reset 1 with 2 workers, finished at step 40"


def test_legacy_ready_reports_are_missing_per_tensor_and_size_unknown_is_said() -> None:
    line = ("WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
            "for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit "
            "different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. Stalled ops: "
            "a [ready ranks: 0, 1], b [ready ranks: 0, 3]")
    (guess,) = stall_episodes(_console(line))
    assert guess.size is None and guess.missing_by_tensor == {"a": [2, 3], "b": [1, 2]}  # a lower bound up to rank 3
    (sized,) = stall_episodes(_console(line), size=5)
    assert sized.size == 5 and sized.missing_by_tensor == {"a": [2, 3, 4], "b": [1, 2, 4]} and sized.missing_ranks == [1, 2, 3, 4]


def test_a_report_that_lost_its_header_and_time_joins_the_timed_report_after_it() -> None:
    """A capture that starts inside a stall report: its `Missing ranks:` lines are a report without
    a time, and the timed report of the same rank right after it is the same episode, dated by it;
    an untimed report of other ranks stays an episode of its own."""
    header = ("[2026-12-01 10:00:{s}.000000: W stall_inspector.cc:107] One or more tensors were submitted to be reduced, gathered "
              "or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate")

    def console(first_rank: int) -> str:
        return "\n".join(["for more than 60 seconds. This may indicate", "Missing ranks:", f"{first_rank}: [allreduce.a]",
                          header.format(s="40"), "Missing ranks:", "1: [allreduce.a]"])

    (episode,) = stall_episodes(_console(console(1)))
    assert episode.missing_ranks == [1] and episode.reports == 2 and episode.start == "2026-12-01T09:59:40.000Z"
    untimed, timed = stall_episodes(_console(console(2)))
    assert (untimed.missing_ranks, untimed.start) == ([2], None) and (timed.missing_ranks, timed.reports) == ([1], 1)


def test_a_scale_down_reset_from_hvdlogs_own_files_is_not_a_failure() -> None:
    reset = _reset(0, 0, 3.0)
    reset["horovod"]["elastic"]["reason"] = "hosts_removed"
    docs = [*(_event(rank, 1.0, step=20, message="step") for rank in range(3)), reset, _reset(1, 1, 3.0)]
    docs[-1]["horovod"]["elastic"]["reason"] = "hosts_removed"
    docs.append(_event(2, 2.5, message="terminate called after throwing an instance of 'std::runtime_error'\n  what():  "
                       "localhost[2] has been removed from elastic job", log={"level": "critical"}, error={"type": "std::runtime_error"},
                       hvdlog={"evidence": {"kind": "expected_exit", "rank": 2, "source": "rank"}}))
    assert first_failure(docs) == []


def test_after_a_reset_the_vanished_rank_comes_before_a_later_incarnations_error() -> None:
    """A job that fails for good: rank 1 vanished at reset 1; the later ValueError of (new) rank 1 is epoch 1's, not the first failure."""
    docs = [
        *(_event(rank, 1.0, step=20, message="step") for rank in range(3)),
        _reset(0, 0, 3.0), _reset(1, 2, 3.0),
        _event(1, 6.0, message="uncaught ValueError", log={"level": "error"}, error={"type": "ValueError", "message": "bad"},
               event={"action": "uncaught_exception"}, horovod={"elastic": {"epoch": 1}}),
    ]
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and "rank at death, epoch 0" in report.cause
    assert [(item["rank"], item.get("epoch")) for item in report.other_errors + report.collateral] == [(1, 1)]


def test_stalls_are_per_incarnation() -> None:
    def stall(rank: int, second: float, epoch: int) -> dict[str, Any]:
        return _event(rank, second, message="stall", log={"level": "warning"}, event={"action": "stall"},
                      horovod={"stall": {"source": "watchdog", "seconds": 5.0}, "elastic": {"epoch": epoch}})
    episodes = stall_episodes([stall(0, 10.0, 0), stall(0, 12.0, 1)])
    assert [episode.epoch for episode in episodes] == [0, 1]


def _cli(*args: str) -> Any:
    from click.testing import CliRunner

    from hvdlog.cli.main import cli

    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_nothing_found_is_one_sentence_on_stderr_and_exit_1(tmp_path: Path) -> None:
    """The sentence says what the analysis read (ranks and job from the files, their number and bytes)."""
    for rank in range(2):
        log = tmp_path / "demo" / "node1" / f"rank-{rank}.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps(_event(rank, 1.0 + step, step=step, message="step", size=2) | {"job": "demo"}) + "\n"
                               for step in range(20)))
    size = sum(path.stat().st_size for path in tmp_path.rglob("*.jsonl"))
    read = f"2 ranks of job demo (2 files, {size / 1000:.1f} kB read)"
    for command, sentence in (("stalls", f"no stall in {read}"), ("first-failure", f"no failure in {read}")):
        result = _cli(command, str(tmp_path))
        assert result.exit_code == 1 and result.stdout == "" and result.stderr.strip() == f"hvdlog: {sentence}", result.stderr


def test_nothing_found_counts_the_rank_a_path_gives(tmp_path: Path) -> None:
    """A rank's native capture whose lines carry no rank: its path says rank 0, so the sentence says 1 rank
    (it once said "lines without ranks")."""
    capture = tmp_path / "demo" / "node1" / "rank-0.stdout.log"
    capture.parent.mkdir(parents=True)
    capture.write_text("loading data\nepoch 1 done\n")
    read = f"1 rank of job demo (1 file, {capture.stat().st_size} bytes read)"
    for command, sentence in (("stalls", f"no stall in {read}"), ("first-failure", f"no failure in {read}")):
        for path in (capture, tmp_path):
            result = _cli(command, str(path))
            assert result.exit_code == 1 and result.stderr.strip() == f"hvdlog: {sentence}", result.stderr


def test_a_multi_line_launcher_verdict_is_indented_under_its_label(tmp_path: Path) -> None:
    """horovodrun's verdict spans three lines: the two after the first sit under it, not at column 0."""
    console = tmp_path / "console.log"
    console.write_text("[3]<stderr>:KeyError: 'label'\nTraceback (most recent call last):\n"
                       '  File "/usr/bin/horovodrun", line 8, in <module>\n'
                       "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing "
                       "the job to be terminated. The first process to do so was:\nProcess name: 3\nExit code: 250\n")
    lines = _cli("first-failure", str(console)).stdout.splitlines()
    (start,) = [number for number, line in enumerate(lines) if line.startswith("  launcher: RuntimeError: Horovod detected")]
    assert lines[start + 1:start + 3] == [" " * 12 + "Process name: 3", " " * 12 + "Exit code: 250"], lines
    assert all(line.startswith("  ") for line in lines[1:]), lines


def test_first_failure_json_carries_reasoning_and_confidence(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text("[0]<stderr>:Killed\nProcess 0 exit with status code 137.\n[1]<stderr>:Terminated\n")
    result = _cli("first-failure", "--json", "--size", "2", str(console))
    (report,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"blamed_ranks", "primary", "cause", "collateral", "other_errors", "reasoning", "confidence", "recovered", "evidence"} <= set(report)
    assert report["blamed_ranks"] == [0] and report["confidence"] == "certain" and report["recovered"] is False
    assert report["reasoning"] == ("rank 0: killed (SIGKILL, often the OOM killer) in its own output; "
                                   "rank 1's signal follows from it (SIGTERM after the first failure)")
    text = _cli("first-failure", str(console)).stdout
    assert "why: rank 0: killed (SIGKILL, often the OOM killer)" in text and "[certain]" in text


def test_an_abort_is_named_by_the_ranks_own_error_before_it() -> None:
    """A rank's own error line, then its abort: the error says why (the abort is how the process ended on it)."""
    docs = _console("""
[1]<stderr>:ERROR:root:could not synchronize on CUDA stream: CUDA_ERROR_ILLEGAL_ADDRESS
[1]<stderr>:Aborted (core dumped)
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and report.primary
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in report.cause and "SIGABRT" not in report.cause, report.cause
    assert report.confidence == "possible"  # an error line no specific rule knows


def test_an_untimed_box_stays_after_the_timed_line_before_it() -> None:
    """TensorFlow's dated E line, then Open MPI's untimed CUDA box and handler: the E line came first in the
    file, and is the cause (an untimed document once sorted before every timed one)."""
    docs = _console("""
2018-01-25 08:26:42.262115: E tensorflow/stream_executor/cuda/cuda_driver.cc:1124] could not synchronize on CUDA stream: CUDA_ERROR_ILLEGAL_ADDRESS
--------------------------------------------------------------------------
The call to cuMemcpyAsync failed. This is a unrecoverable error and will
cause the program to abort.
--------------------------------------------------------------------------
[node-a:4242] *** Process received signal ***
[node-a:4242] Signal: Aborted (6)
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [None]
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in report.cause, report.cause
    assert report.confidence == "possible"


@pytest.mark.parametrize("killed_at", [1.1, 1.3])
def test_a_survivors_exit_after_its_peer_loss_does_not_weaken_the_killed_ranks_blame(killed_at: float) -> None:
    """A real killed-rank job: rank 0 loses its peer and records its own exit (hvdlog's
    ``process_exit``, status 1); the shell's ``Killed`` for rank 1 arrives before or after that
    record, as the machine's load decides. One answer either way: rank 1, certain. The exit record
    is a known exit status (not a failure in an unknown format), and it follows rank 0's own
    reaction to the lost peer, so it is no other rank's death before rank 1's."""
    docs = [
        _event(0, 1.0, message="Horovod background loop uncaught exception: [/src/gloo/transport/tcp/pair.cc:589] "
               "Read error [127.0.0.1]:24449: Connection reset by peer", log={"level": "error"}),
        _event(0, 1.2, message="process exit: status 1 (uncaught HorovodInternalError)", log={"level": "error"},
               event={"action": "process_exit", "reason": "uncaught HorovodInternalError"}, process={"exit_code": 1}),
        _event(1, killed_at, message="Killed", log={"level": "critical"}, event={"action": "signal", "reason": "SIGKILL"}),
    ]
    (report,) = first_failure(sorted(docs, key=lambda doc: doc["@timestamp"]))
    assert (report.blamed_ranks, report.confidence) == ([1], "certain"), report.reasoning
    assert [item["rank"] for item in report.collateral] == [0]

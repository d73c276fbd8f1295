"""A console's prefix learned by neighbouring lines (hvdlog/parse/prefixes.py), and never where
a line's own text would be lost."""

from __future__ import annotations

from typing import Any

from hvdlog.parse import parse_lines

_BOX = [
    "Primary job  terminated normally, but 1 process returned",
    "a non-zero exit code. Per user-direction, the job has been aborted.",
    "Process 1 exit with status code 137.",
]


def _docs(lines: list[str], path: str = "console.log") -> list[dict[str, Any]]:
    return list(parse_lines(lines, path=path, timezone="UTC"))


def _messages(lines: list[str], path: str = "console.log") -> list[str]:
    return [str(doc["message"]) for doc in _docs(lines, path)]


def test_an_untagged_console_learns_its_prefix_from_its_first_line() -> None:
    """The first line is known (Open MPI's box) and held until the second confirms the prefix."""
    plain = _docs(_BOX)
    prefixed = _docs([f"trainer-1  | {line}" for line in _BOX])
    assert [d["message"] for d in prefixed] == [d["message"] for d in plain] == _BOX
    assert [d["log"]["level"] for d in prefixed] == [d["log"]["level"] for d in plain]
    assert prefixed[-1]["rank"] == 1


def test_the_prefix_is_learned_where_a_known_line_follows_prints() -> None:
    """Prints come first: the prefix is learned at the exit line, whose neighbour before has it too;
    the prints read before it keep theirs (they were read before anything said it is a prefix)."""
    lines = [f"[2021-03-04T05:06:{n:02d}Z] job-7 [RUNNING] ||  {text}" for n, text in
             enumerate(["epoch 1 done", "epoch 2 done", "Process 3 exit with status code 1.", "epoch 3 done"])]
    messages = _messages(lines)
    assert messages[2:] == ["Process 3 exit with status code 1.", "epoch 3 done"]
    assert messages[0] == lines[0]


def test_times_in_the_prefix_may_change() -> None:
    lines = [f"Mar  4 05:06:{n:02d} node07 python3[4321]: {text}" for n, text in enumerate(_BOX)]
    assert _messages(lines) == _BOX


def test_a_message_keeps_its_own_leading_blank() -> None:
    """The prefix's blanks would swallow the line's own: the neighbour says how many are the prefix's."""
    lines = ["trainer-1  | Epoch 1/10",
             ("trainer-1  |  WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by "
              "subset of ranks and are waiting for remainder of ranks for more than 60 seconds. "),
             "trainer-1  | Stalled ops:",
             "trainer-1  | HorovodBroadcast_fully_connected_weights_0 [missing ranks: 0]"]
    docs = _docs(lines)
    stall = [d for d in docs if d.get("event", {}).get("action") == "stall"]
    assert len(stall) == 1 and stall[0]["horovod"]["stall"]["missing_ranks"] == [0]


def test_a_prefix_before_a_collectors_prefix_and_a_tag() -> None:
    """A CI prefix before a CRI file's prefix before gloo's tag: the rank is still read."""
    lines = [f"[2021-03-04T05:06:{n:02d}Z] job-7 [RUNNING] ||  2021-03-02T10:11:12.{n:09d}Z stdout F [{n % 2}]<stdout>:Epoch 3/20"
             for n in range(3)]
    assert [(d["rank"], d["message"]) for d in _docs(lines)] == [(0, "Epoch 3/20"), (1, "Epoch 3/20"), (0, "Epoch 3/20")]


def test_one_line_alone_is_no_proof() -> None:
    """`job: ERROR: ...` once, then other text: the line keeps what it says."""
    lines = ["job: ERROR: could not open /data/shard-7", "job finished"]
    assert _messages(lines) == lines
    assert _messages(lines[:1]) == lines[:1]


def test_lines_that_share_their_start_are_not_prefixed_without_a_known_line() -> None:
    """`epoch 3: ...` on every line is the program's text, not a prefix: nothing known follows it."""
    lines = [f"epoch {n}: loss: 0.{n}1 acc: 0.9" for n in range(20)]
    assert _messages(lines) == lines


def test_a_file_with_known_lines_at_column_0_has_no_prefix() -> None:
    """A known line as it stands settles the file: later lines that look prefixed keep their text."""
    lines = ["Process 1 exit with status code 1.", "note: Process 2 exit with status code 1.", "note: ERROR: x"]
    assert _messages(lines) == lines


def test_per_rank_files_are_not_searched_for_a_prefix() -> None:
    """horovodrun and hvdlog write per-rank files themselves: no scheduler stands between."""
    lines = [f"trainer-1  | {line}" for line in _BOX]
    assert _messages(lines, path="logs/rank-1.stdout.log") == lines


def test_a_slurm_error_behind_a_prefix_is_proof_on_one_line() -> None:
    """`srun: error:` / `slurmstepd: error:` after a prefix-shaped lead is known on its own, as a
    core header is (a one-line console has no neighbour to confirm it); a device field stays no rank."""
    error = "srun: error: Unable to create step for job 7001: Memory required by task is not available"
    for prefix in ("trainer-1  | ", "Mar  4 05:06:07 node07 python3[4321]: ", "(BaseHorovodWorker pid=43121, ip=10.1.2.7) "):
        (doc,) = _docs([prefix + error])
        assert (doc["message"], doc["log"]["level"], doc.get("rank")) == (error, "error", None), prefix
    (doc,) = _docs(["trainer-1  | slurmstepd: error: Detected 1 oom-kill event(s) in step 7001.0 cgroup."])
    assert doc["message"].startswith("slurmstepd: error:") and doc["log"]["level"] == "error"
    (doc,) = _docs(["trainer-1  | gpu1:4321:4400 [0] NCCL WARN srun: error: x"])
    assert doc.get("rank") is None


def test_a_scheduler_prefix_before_a_collectors_is_proof_on_one_line() -> None:
    """syslog over a CRI file: a collector's prefix right after a prefix-shaped lead proves that lead
    on one line (HOROVOD_COLLECTOR_LINE), and the file learns only the scheduler's part, so a line
    of the other stream (``stderr F`` after ``stdout F``) loses its prefix too."""
    syslog, cri = "Mar  4 05:06:0{n} node07 python3[4321]: ", "2021-03-02T10:11:40.81276401{n}Z {stream} F "
    lines = [syslog.format(n=0) + cri.format(n=0, stream="stdout") + "Process 1 exit with status code 137.",
             syslog.format(n=1) + cri.format(n=1, stream="stderr") + "Terminating remaining workers after failure of Process 1."]
    (alone,) = _docs(lines[:1])
    assert (alone["message"], alone["process"]["exit_code"], alone["rank"]) == ("Process 1 exit with status code 137.", 137, 1)
    assert _messages(lines) == ["Process 1 exit with status code 137.", "Terminating remaining workers after failure of Process 1."]
    prints = [syslog.format(n=n) + cri.format(n=n, stream="stdout") + f"epoch {n}" for n in range(3)]
    assert _messages(prints) == ["epoch 0", "epoch 1", "epoch 2"]
    # Learned from a tagged line, the prefix is still only the scheduler's: a print the collector
    # did not write (syslog's own line) loses it too.
    mixed = [syslog.format(n=0) + cri.format(n=0, stream="stdout") + "[0]<stdout>:epoch 0", syslog.format(n=1) + "epoch 1"]
    assert _messages(mixed) == ["epoch 0", "epoch 1"]

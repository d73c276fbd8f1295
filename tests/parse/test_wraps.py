"""Lines a terminal wrapped, joined back on consoles (hvdlog/parse/wraps.py), and lines that
only look like pieces left alone."""

from __future__ import annotations

from hvdlog.parse import parse_lines
from hvdlog.parse.wraps import Unwrapper


def _wrap(lines: list[str], width: int) -> list[str]:
    """What a terminal ``width`` columns wide shows of ``lines``, one piece per line."""
    return [line[i:i + width] for line in lines for i in range(0, max(len(line), 1), width)]


def _joined(lines: list[str]) -> list[str]:
    return list(Unwrapper().lines(lines))


_TAGGED = [
    "[1,0]<stdout>:step 10",
    ("[1,1]<stderr>:2018-10-23 20:08:11.523108: E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate"
     " 512.00M (536870912 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
    ("[1,0]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an"
     " attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution."),
    "-" * 74,
    "mpirun noticed that process rank 1 with PID 22810 on node v100-3 exited on signal 6 (Aborted).",
]


def test_a_tagged_console_wrapped_at_any_width_reads_as_before() -> None:
    """Each piece after the first lost its tag: it goes back on its rank's line."""
    for width in (80, 97, 131, 200):
        assert _joined(_wrap(_TAGGED, width)) == _TAGGED, width


def test_the_rank_of_a_wrapped_error_is_kept() -> None:
    docs = list(parse_lines(_wrap(_TAGGED, 90), path="console.log", timezone="UTC"))
    errors = [doc for doc in docs if doc["log"]["level"] == "error"]
    ends = sorted((doc.get("rank"), doc["message"].rsplit(" ", 1)[-1]) for doc in errors)
    assert ends == [(0, "execution."), (1, "(Aborted)."), (1, "memory")]


def test_an_untagged_line_wrapped_once_is_joined_when_it_completes_a_message() -> None:
    """One wrapped line, no tag, the width seen once: the two pieces are mpirun's message."""
    line = "mpirun noticed that process rank 140 with PID 3712 on node 10.41.7.22 exited on signal 9 (Killed)."
    assert _joined(["step 1200 loss 0.412", *_wrap([line], 84), "-" * 74]) == ["step 1200 loss 0.412", line, "-" * 74]


def test_an_untagged_line_wrapped_twice_confirms_the_width() -> None:
    """A middle piece as long as the first: the width is the terminal's, the last piece joins too."""
    line = "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks " * 3
    assert _joined(_wrap([line.strip(), "Stalled ops:"], 90)) == [line.strip(), "Stalled ops:"]


def test_lines_that_stand_on_their_own_are_not_joined() -> None:
    """Unwrapped consoles: a box drawn after a rank's longest line, the launcher's own line
    behind the same prefix, a series of equally long prints, a tag at column 0."""
    long_error = "[1,1]<stderr>:tensorflow.python.framework.errors_impl.NotFoundError: Key global_step not found in checkpoint"
    prefix = "[2022-09-05T14:20:0{}Z] job-318 [RUNNING] ||  "
    series = [f"{n}/469 [==============================] - 21s 44ms/step - loss: 0.2110 - accuracy: 0.9372" for n in (468, 469)]
    for lines in (
        [long_error, "-" * 74, "Primary job  terminated normally, but 1 process returned"],
        [prefix.format(3) + "[1]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 1.20 GiB (GPU 1)",
         prefix.format(4) + "Terminating remaining workers after failure of Process 1."],
        series,
        [long_error, long_error.replace("[1,1]", "[1,0]")],
    ):
        assert _joined(lines) == lines


def test_a_shorter_line_before_the_longest_is_no_piece() -> None:
    """No line of a wrapped capture is longer than the terminal: a line shorter than one read
    before it is never taken for a piece, whatever follows."""
    lines = ["[0]<stdout>:" + "x" * 120, "[1]<stdout>:" + "y" * 90, "rest of nothing"]
    assert _joined(lines) == lines


def test_per_rank_files_are_not_unwrapped() -> None:
    """A rank's own file has no terminal between: its lines are read as they are."""
    lines = ["x" * 100, "continued?"]
    docs = list(parse_lines(lines, path="job/host/rank-0.stdout.log", timezone="UTC"))
    assert [doc["message"] for doc in docs] == lines


def test_the_headless_openers_are_the_grammars() -> None:
    """The openers a wrapped piece may look like (a frame, an exception line) are named in
    blocks.json: a renamed one would make pieces stand again."""
    from hvdlog.parse.blocks import grammar
    from hvdlog.parse.prefixes import _HEADLESS

    assert {opener.name for opener in grammar().opens} >= _HEADLESS


def test_an_elastic_workers_capture_is_not_unwrapped() -> None:
    """``<job>/<host>/pid-N.stdout.log`` names its stream, not its rank: it is written from a pipe
    too. A core line as long as the longest so far is no piece of a wrapped line (the committed
    elastic job's first core line took the next capture line into its message)."""
    core = "[0]<stdout>:[2026-12-01 21:19:59.989419: I /tmp/horovod-0.28.1/horovod/common/operations.cc:689] [0]: Horovod initialized"
    lines = [core, "2026-12-01T21:20:10.341165Z [0]<stdout>:native line at step 0 rank 0"]
    docs = list(parse_lines(lines, path="logs/j1/vm/pid-24929.stdout.log"))
    assert [doc["message"] for doc in docs] == ["Horovod initialized", "native line at step 0 rank 0"]


def test_a_console_wrapped_twice_is_joined_in_two_passes() -> None:
    """Copied from a 120-column terminal, shown again at 90 columns and copied again: the
    90-column pieces join into 120-column lines, which are pieces again; once a line of 120
    columns was seen, the next ones are joined too."""
    assert _joined(_wrap(_wrap(_TAGGED, 120), 90))[-3:] == _TAGGED[-3:]


def test_the_second_pass_holds_no_width_seen_once() -> None:
    """A console wrapped once: a joined line is the longest so far, but its length is no
    terminal's; the launcher's untagged line after it stays a line of its own."""
    lines = ["[1,0]<stdout>:" + "step 10 " * 20, "Using cached checkpoint in the work folder"]
    assert _joined(_wrap(lines, 100)) == lines

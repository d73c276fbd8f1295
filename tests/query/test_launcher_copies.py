"""A job folder of ``hvdlog run``: launcher.log beside the ranks' own files, each line of a rank once.

The files are written in the formats a real ``hvdlog run -- horovodrun --gloo -np 2`` job wrote
on 5 December 2026 (rank 1 raised, rank 0 got SIGTERM): launcher.log's arrival times and tags,
the ranks' captures and events. tests/cli/test_cli_run.py checks a real job end to end.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from hvdlog.query.copies import COPY_WINDOW_S, drop_launcher_copies
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

CORE = "[2026-12-05 07:38:46.38127{rank}: I /src/horovod-0.28.1/horovod/common/operations.cc:689] [{rank}]: Horovod initialized"
EVENT = ('{{"@timestamp":"2026-12-05T07:38:{second}Z","log.level":"{level}","message":"{message}","host.name":"vm","job":"j",'
         '"event.dataset":"horovod.app","rank":{rank},"local_rank":{rank},"size":2}}')
TRACEBACK = ["Traceback (most recent call last):", '  File "/tmp/t.py", line 7, in <module>', '    raise RuntimeError("boom")',
             "RuntimeError: boom"]
RAISED = "\n".join(TRACEBACK)  # the traceback's document says it whole


def _job(root: Path, *, console_extra: list[str] = (), rank_files: tuple[int, ...] = (0, 1)) -> Path:
    """The job folder ``root/j``: rank 0 said hello and got SIGTERM, rank 1 raised."""
    job, node = root / "j", root / "j" / "vm"
    node.mkdir(parents=True)
    if 0 in rank_files:
        (node / "rank-0.stdout.log").write_text(CORE.format(rank=0) + "\n")
        (node / "rank-0.stderr.log").write_text("")
        (node / "rank-0.jsonl").write_text(
            EVENT.format(second="46.382528", level="info", message="hello", rank=0) + "\n"
            + EVENT.format(second="47.019430", level="warning", message="received SIGTERM: terminating", rank=0) + "\n")
    if 1 in rank_files:
        (node / "rank-1.stdout.log").write_text(CORE.format(rank=1) + "\n")
        (node / "rank-1.stderr.log").write_text("".join(f"2026-12-05T07:38:46.383940Z {line}\n" for line in TRACEBACK))
        (node / "rank-1.jsonl").write_text("")
    console = [
        f"2026-12-05T07:38:46.381819Z [1]<stdout>:{CORE.format(rank=1)}",
        f"2026-12-05T07:38:46.382725Z [0]<stdout>:{CORE.format(rank=0)}",
        "2026-12-05T07:38:46.382901Z [0]<stderr>:07:38:46.382 INFO     [rank 0] hello",
        *(f"2026-12-05T07:38:46.384036Z [1]<stderr>:{line}" for line in TRACEBACK),
        "2026-12-05T07:38:47.017254Z Process 1 exit with status code 1.",
        "2026-12-05T07:38:47.017254Z Terminating remaining workers after failure of Process 1.",
        "2026-12-05T07:38:47.019713Z [0]<stderr>:07:38:47.019 WARNING  [rank 0] received SIGTERM: terminating",
        "2026-12-05T07:38:47.050172Z [0]<stderr>:Terminated",
        "2026-12-05T07:38:47.091202Z Process 0 exit with status code 143.",
        *console_extra,
    ]
    (job / "launcher.log").write_text("\n".join(console) + "\n")
    return job


#: What the job of :func:`_job` says, each line once.
ONCE = Counter({
    (0, "Horovod initialized"): 1, (1, "Horovod initialized"): 1, (0, "hello"): 1, (0, "received SIGTERM: terminating"): 1,
    (1, RAISED): 1, (0, "Terminated"): 1, (1, "Process 1 exit with status code 1."): 1,
    (None, "Terminating remaining workers after failure of Process 1."): 1, (0, "Process 0 exit with status code 143."): 1,
})


def _said(docs: list[dict]) -> Counter[tuple[object, str]]:
    return Counter((doc.get("rank"), doc["message"]) for doc in docs)


def test_each_line_of_a_rank_once(tmp_path: Path) -> None:
    """Read as one job, every rank's line is there once: the native lines from the rank's
    capture, the events from its events file; the console's copies and echoes go; what only
    the console says (the launcher's lines, the shell's ``Terminated``) stays."""
    said = _said(list(FileSource([_job(tmp_path)]).search(Filter())))
    assert said == ONCE, said


def test_the_copy_without_the_original_file_stays(tmp_path: Path) -> None:
    """A rank with no files of its own (it never started hvdlog, or ``--rank`` left them out):
    the console is all there is of it, so its lines stay."""
    said = _said(list(FileSource([_job(tmp_path, rank_files=(0,))]).search(Filter())))
    assert said[(1, "Horovod initialized")] == 1 and said[(1, RAISED)] == 1
    assert said[(0, "Horovod initialized")] == 1 and said[(0, "hello")] == 1


def test_rank_filter_reads_the_console_once(tmp_path: Path) -> None:
    """``--rank 0``: rank 0's lines once, and the console's lines of rank 1 are not shown."""
    said = _said(list(FileSource([_job(tmp_path)]).search(Filter(ranks=frozenset({0})))))
    assert said[(0, "Horovod initialized")] == 1 and said[(0, "hello")] == 1 and said[(0, "received SIGTERM: terminating")] == 1
    assert {rank for rank, _ in said} == {0}


@pytest.mark.parametrize(("extra", "expected"), [
    # a line the console has twice, the rank's capture once (its capture began after the first): one copy pairs, one stays
    (["2026-12-05T07:38:47.100000Z [0]<stdout>:" + CORE.format(rank=0)], 2),
    # the same line again beyond the window: not a copy of the one in the rank's file
    ([f"2026-12-05T07:{38 + int(COPY_WINDOW_S // 60) + 1}:00.000000Z [0]<stdout>:" + CORE.format(rank=0)], 2),
])
def test_copies_pair_one_to_one(tmp_path: Path, extra: list[str], expected: int) -> None:
    said = _said(list(FileSource([_job(tmp_path, console_extra=extra)]).search(Filter())))
    assert said[(0, "Horovod initialized")] == expected


def test_nothing_to_pair_is_left_as_it_is() -> None:
    """Documents of no launcher log come back as the same list, untouched."""
    docs = [{"message": "x", "rank": 0, "log.file.path": "j/vm/rank-0.stderr.log", "horovod.launcher.format": "gloo"}]
    assert drop_launcher_copies(docs) is docs


def test_followed_each_line_once(tmp_path: Path) -> None:
    """``grep -f``'s reading (:meth:`FileSource.follow`): the job from its start, each line once;
    then a rank's line whose console copy comes a poll later (it passes through horovodrun):
    the copy is left out, the launcher's next line is not."""
    job = _job(tmp_path)
    stream = FileSource([job]).follow(Filter(), interval=0.05, from_start=True)
    assert _said([next(stream) for _ in range(sum(ONCE.values()))]) == ONCE
    line = "[2026-12-05 07:38:50.000001: I /src/horovod/common/operations.cc:1] [0]: late line"
    with open(job / "vm" / "rank-0.stdout.log", "a", encoding="utf-8") as rank_file:
        rank_file.write(line + "\n")
    assert next(stream)["message"] == "late line"
    with open(job / "launcher.log", "a", encoding="utf-8") as console:
        console.write(f"2026-12-05T07:38:50.400000Z [0]<stdout>:{line}\n2026-12-05T07:38:51.000000Z INFO:root:next launcher line\n")
    assert next(stream)["message"] == "INFO:root:next launcher line"

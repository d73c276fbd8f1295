"""Evidence the rest of the logs decide (hvdlog.analyses.last_words, docs/failure-model.md): a receive timeout
no peer's failure explains is the cause, and an NCCL WARN chain is a failure only when it ends the rank's output.

The consoles are written from the formats of Gloo's ``unbound_buffer.cc`` timeout, NCCL's ``src/debug.cc`` lines
(a WARN, then ``file.cc:N -> 2`` as each caller unwinds) and horovodrun's exit lines (tests/corpus/realworld,
families F21 and F31 of FORMATS.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hvdlog.analyses.failures import FAILURE_EVENTS, find_first_failure, first_failure
from hvdlog.cli.main import cli
from hvdlog.documents import Document
from hvdlog.parse import parse_lines
from hvdlog.query.spec import Filter

_TIMEOUT = "[/tmp/pip-req-build/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:72] Timed out waiting 30000ms for recv operation to complete"


def _console(text: str) -> list[dict[str, Any]]:
    return list(parse_lines(text.strip("\n").splitlines(), path="console.log", timezone="UTC"))


def _search(docs: list[Document]) -> Any:
    """A source's search over ``docs`` (they are in file order, untimed: the order every source gives them)."""
    return lambda spec, last=None: [doc for doc in docs if spec.matches(doc)]


def test_a_receive_timeout_nothing_explains_is_the_cause_and_one_after_a_peers_failure_is_not() -> None:
    alone = _console(f"""
[0]<stdout>:Epoch 1/3
[1]<stdout>:Epoch 1/3
[0]<stderr>:{_TIMEOUT}
Process 0 exit with status code 1.
Process 1 exit with status code 143.
""")
    (report,) = first_failure(alone)
    assert report.blamed_ranks == [0] and report.primary, report.reasoning
    assert "Timed out waiting 30000ms" in report.cause
    assert "no other rank failed before this timeout" in report.reasoning
    assert report.confidence == "likely"  # a consequence read as the cause is never certain
    assert [item["rank"] for item in report.collateral] == [1]

    after_a_death = _console(f"""
[1]<stderr>:Killed
[0]<stderr>:{_TIMEOUT}
Process 0 exit with status code 1.
""")
    (report,) = first_failure(after_a_death)
    assert report.blamed_ranks == [1], report.reasoning  # the timeout is rank 0's reaction to rank 1's death
    assert [item["rank"] for item in report.collateral] == [0]

    # a job of 3 ranks (their events say so) in which rank 2 left no line at all: the timeout waited for it
    sized = [{**doc, "size": 3} if doc.get("rank") is not None else doc for doc in alone]
    (report,) = first_failure(sized)
    assert report.blamed_ranks == [2] and report.confidence == "likely", report.reasoning


def test_of_two_receive_timeouts_the_first_is_the_cause() -> None:
    docs = _console(f"""
[1]<stderr>:{_TIMEOUT}
[0]<stderr>:{_TIMEOUT}
""")
    (report,) = first_failure(docs)
    assert report.blamed_ranks == [1] and report.primary, report.reasoning
    assert report.confidence == "likely"
    assert [item["rank"] for item in report.collateral] == [0]


_CHAIN_THEN_SILENCE = """
[1,0]<stdout>:box:688:745 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>
[1,1]<stdout>:box:689:746 [1] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>
[1,0]<stdout>:box:688:745 [0] misc/ibvwrap.cc:106 NCCL WARN Call to ibv_open_device failed
[1,0]<stdout>:box:688:745 [0] NCCL INFO transport/net_ib.cc:134 -> 2
[1,0]<stdout>:box:688:745 [0] NCCL INFO Using internal Network Socket
[1,1]<stdout>:
[1,1]<stdout>:box:689:746 [1] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:0a
[1,1]<stdout>:box:689:746 [1] NCCL INFO graph/xml.cc:469 -> 2
[1,1]<stdout>:box:689:746 [1] NCCL INFO init.cc:867 -> 2
[1,0]<stdout>:box:688:745 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via direct shared memory
"""


def test_an_nccl_chain_that_ends_a_ranks_output_is_its_failure_and_one_it_went_on_after_is_not() -> None:
    """Rank 0 falls back from InfiniBand to sockets (a WARN, `-> 2`, then it goes on: `-> 1[1]` is no unwinding);
    rank 1's chain is the last it printed."""
    docs = _console(_CHAIN_THEN_SILENCE)
    (report,) = find_first_failure(_search(docs), Filter())
    assert report.blamed_ranks == [1] and report.primary, report.reasoning
    assert "Could not find real path" in report.cause
    assert "NCCL's error chain is the rank's last output" in report.reasoning
    assert report.confidence == "possible"  # a warning, read as the failure from what the rank did not print
    assert report.collateral == [] and report.other_errors == []  # rank 0's fallback is no failure
    # without the ranks' last words (the evidence alone), no chain is a failure: the fallback looks the same
    evidence = [doc for doc in docs if Filter(any_of=FAILURE_EVENTS).matches(doc)]
    assert first_failure(evidence) == []
    # rank 1 printing anything after its chain (here a Keras progress line) went on: no failure at all
    went_on = _console(_CHAIN_THEN_SILENCE.replace("[1,1]<stdout>:box:689:746 [1] NCCL INFO init.cc:867 -> 2\n",
                                                   "[1,1]<stdout>:box:689:746 [1] NCCL INFO init.cc:867 -> 2\n[1,1]<stdout>:Epoch 1/3\n"))
    assert went_on != docs and find_first_failure(_search(went_on), Filter()) == []


def test_last_words_open_at_the_chains_first_warn_and_close_on_any_other_line() -> None:
    from hvdlog.analyses.last_words import LastWords

    docs = _console("""
[1]<stdout>:box:689:746 [1] NCCL INFO Bootstrap : Using eth0
[1]<stdout>:box:689:746 [1] graph/xml.cc:332 NCCL WARN Could not find real path
[1]<stdout>:box:689:746 [1] NCCL INFO graph/xml.cc:469 -> 2
[1]<stdout>:box:689:746 [1] init.cc:100 NCCL WARN second warning of the same chain
[1]<stdout>:
[1]<stdout>:box:689:746 [1] NCCL INFO init.cc:867 -> 2
""")
    words = LastWords()
    for doc in docs:
        words.add(doc)
    ((key, opener),) = words.chain_ends().items()
    assert key[1] == 1 and "Could not find real path" in opener["message"]
    words.add(_console("[1]<stdout>:step 1 loss 0.5")[0])
    assert words.chain_ends() == {}


def test_report_and_jobs_name_the_rank_whose_output_ends_in_an_nccl_chain(tmp_path: Path) -> None:
    """The commands read the same last words: `first-failure`, `report` and `jobs` agree."""
    console = tmp_path / "console.log"
    console.write_text(_CHAIN_THEN_SILENCE.strip("\n") + "\n")
    runner = CliRunner()
    first = json.loads(runner.invoke(cli, ["first-failure", "--json", str(console)], catch_exceptions=False).output)
    assert first["blamed_ranks"] == [1]
    report = json.loads(runner.invoke(cli, ["report", "--json", str(console)], catch_exceptions=False).output)
    assert report["verdict"]["status"] == "failed" and report["verdict"]["culprit"] == [1], report["verdict"]
    (row,) = [json.loads(line) for line in runner.invoke(cli, ["jobs", "--json", str(tmp_path)], catch_exceptions=False).output.splitlines()]
    assert row["status"]["state"] == "failed" and row["status"]["reasoning"].startswith("rank 1: "), row["status"]


def _rank_file(path: Path, lines: list[tuple[datetime | None, str]]) -> None:
    """A rank's native capture in hvdlog's layout, each line behind the tee's arrival time (None: a line without one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{at.strftime('%Y-%m-%dT%H:%M:%S.%fZ')} {text}\n" if at else f"{text}\n" for at, text in lines))


def _counted(search: Any) -> tuple[Any, list[int]]:
    """``search``, counting the documents each call's caller took from it."""
    taken: list[int] = []

    def counted(spec: Filter) -> Iterator[Document]:
        taken.append(0)
        for doc in search(spec):
            taken[-1] += 1
            yield doc

    return counted, taken


_T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
_WARN = "box:689:746 [1] graph/xml.cc:332 NCCL WARN Could not find real path"
_UNWIND = "box:689:746 [1] NCCL INFO graph/xml.cc:469 -> 2"
_LINES = 50_000


def _last_words_read(tmp_path: Path, lines: list[tuple[datetime | None, str]]) -> tuple[dict[Any, Document], list[int]]:
    from hvdlog.analyses.last_words import find_last_words
    from hvdlog.query.files import FileSource

    _rank_file(tmp_path / "j" / "box" / "rank-1.stdout.log", lines)
    source = FileSource([tmp_path / "j"])
    evidence = list(source.search(Filter(any_of=FAILURE_EVENTS)))
    search, taken = _counted(source.search)
    return find_last_words(search, evidence, Filter()), taken


def test_a_ranks_last_words_are_read_only_where_the_answer_lies(tmp_path: Path) -> None:
    """A rank that printed a WARN (NCCL's fallback) early and went on for 50,000 lines: its read ends at the
    first line after the chain; a rank whose chain ends 50,000 lines: its read starts at the WARN's time.
    (Before, each read every document of the rank: 50,002.)"""
    step = [(_T0 + timedelta(milliseconds=10 + i), f"step {i} loss 0.5") for i in range(_LINES)]
    chain = [(_T0, _WARN), (_T0 + timedelta(microseconds=100), _UNWIND)]
    words, taken = _last_words_read(tmp_path / "went-on", chain + step)
    assert words == {} and sum(taken) == 3, taken  # the WARN, its unwinding, the first step: it went on

    late = [(at + timedelta(seconds=3600), text) for at, text in chain]
    words, taken = _last_words_read(tmp_path / "ends", step + late)
    ((key, opener),) = words.items()
    assert key == ("j", 1) and opener["message"] == _WARN and sum(taken) == 2, taken


def test_a_line_without_a_time_after_a_timed_warn_still_says_the_rank_went_on(tmp_path: Path) -> None:
    """The read from the WARN's time keeps the rank's untimed lines (a print the tee could not stamp): lost,
    the chain would look like the rank's last words, and a fallback NCCL went on from would be named its failure."""
    chain = [(_T0, _WARN), (_T0 + timedelta(microseconds=100), _UNWIND)]
    words, _ = _last_words_read(tmp_path / "untimed", [(_T0 - timedelta(seconds=1), "Epoch 1/3"), *chain, (None, "Epoch 2/3")])
    assert words == {}
    words, _ = _last_words_read(tmp_path / "silent", [(_T0 - timedelta(seconds=1), "Epoch 1/3"), *chain, (None, "")])
    assert list(words) == [("j", 1)]  # a blank line is no sign it went on


def test_a_rank_that_went_on_before_its_last_warn_is_read_again_from_that_warn(tmp_path: Path) -> None:
    """NCCL's fallback WARN early, 50,000 steps, then a chain that ends the output, with no evidence between to
    say it went on: the read from the first WARN stops at the first step and starts again at the last WARN's time."""
    steps = [(_T0 + timedelta(milliseconds=10 + i), f"step {i}") for i in range(_LINES)]
    words, taken = _last_words_read(tmp_path, [(_T0, _WARN), *steps, (_T0 + timedelta(hours=1), _WARN.replace("real path", "the end"))])
    assert [opener["message"] for opener in words.values()] == [_WARN.replace("real path", "the end")]
    assert taken == [2, 1], taken


def test_a_read_past_max_read_decides_nothing(tmp_path: Path) -> None:
    """A chain longer than MAX_READ documents: the read stops there and the WARN stays a warning (the
    conservative side), though the chain ends the rank's output."""
    from hvdlog.analyses.last_words import MAX_READ

    unwinding = [(_T0 + timedelta(milliseconds=10 + i), _UNWIND) for i in range(MAX_READ + 10)]
    words, taken = _last_words_read(tmp_path / "long", [(_T0, _WARN), *unwinding])
    assert words == {} and taken == [MAX_READ], taken
    words, taken = _last_words_read(tmp_path / "short", [(_T0, _WARN), *unwinding[: MAX_READ - 10]])
    assert list(words) == [("j", 1)] and taken == [MAX_READ - 9], taken

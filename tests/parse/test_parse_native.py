"""The native parser's settings and the pattern loader: chatter switch, time zones, job
size, and clear errors for bad settings and bad pattern files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from corpus.cases import cases

from hvdlog.parse import parse_lines
from hvdlog.parse.launcher import TagSplitter
from hvdlog.parse.native import parse_chatter
from hvdlog.parse.patterns import PatternError, compile_pattern, load_definitions

TRACE = next(case for case in cases() if case.id == "horovod.core/mpi-trace-console")
CHATTER = compile_pattern("HOROVOD_CHATTER").regex


def _parse(text: str, **options) -> list[dict]:
    return list(parse_lines(text.splitlines(), path="job/node1/rank-0.stderr.log", **{"timezone": "UTC", **options}))


def _is_chatter(doc: dict) -> bool:
    return doc["log"]["level"] in ("trace", "debug") and bool(CHATTER.match(doc["message"]))


class TestChatter:
    def test_keep_drop_sample(self) -> None:
        """drop removes every known per-cycle line, sample=N keeps one in N, the rest stays."""
        lines = TRACE.lines()
        keep = list(parse_lines(lines, path="c.console", timezone="UTC"))
        drop = list(parse_lines(lines, path="c.console", timezone="UTC", chatter="drop"))
        sample = list(parse_lines(lines, path="c.console", timezone="UTC", chatter="sample=3"))
        chatter = [doc for doc in keep if _is_chatter(doc)]
        assert len(chatter) >= 20
        assert [doc for doc in keep if not _is_chatter(doc)] == drop
        assert not any(_is_chatter(doc) for doc in drop)
        assert len(drop) < len(sample) < len(keep)

    def test_never_drops_warnings(self) -> None:
        """A chatter-looking message at W level is kept even with chatter=drop."""
        docs = _parse("[2026-11-29 16:01:46.105951: W /a.cc:1] Sent 3 messages to coordinator.", chatter="drop")
        assert [doc["log"]["level"] for doc in docs] == ["warning"]

    @pytest.mark.parametrize("setting", ["often", "sample=0", "sample=-1", ""])
    def test_bad_setting(self, setting: str) -> None:
        """A bad chatter setting fails at configuration time with the allowed values."""
        with pytest.raises(ValueError, match="keep, drop or sample=N"):
            parse_chatter(setting)


class TestTime:
    LINE = "[2026-07-01 12:00:00.    40: I /a.cc:1] x"

    def test_zone_and_padding(self) -> None:
        """Local times convert with the configured zone; space-padded micros are zero-padded."""
        assert _parse(self.LINE)[0]["@timestamp"] == "2026-07-01T12:00:00.000040Z"
        assert _parse(self.LINE, timezone="Europe/Paris")[0]["@timestamp"] == "2026-07-01T10:00:00.000040Z"

    def test_default_is_the_local_zone(self) -> None:
        """Without a zone, the machine's zone applies (tests pin TZ=UTC)."""
        assert _parse(self.LINE, timezone=None)[0]["@timestamp"] == "2026-07-01T12:00:00.000040Z"

    def test_unknown_zone(self) -> None:
        """An unknown zone is refused with a sentence naming it."""
        with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
            _parse(self.LINE, timezone="Mars/Olympus")

    def test_a_line_without_a_time_of_its_own_has_none(self) -> None:
        """A print after a core line is not given that line's time (it put wrong times on events,
        then a wrong order on failures): it has none, and keeps its place in the read order."""
        docs = _parse("before\n" + self.LINE + "\nafter\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\nValueError: x")
        assert [doc["message"].split("\n")[0] for doc in docs] == ["before", "x", "after", "Traceback (most recent call last):"]
        assert ["@timestamp" in doc for doc in docs] == [False, True, False, False]


class TestLoggerTimes:
    """Other loggers' own stamps (pattern HOROVOD_LINE_TIME), local like Horovod's: read, never inherited."""

    CORE = "[2020-12-31 23:59:58.000001: I /a.cc:1] x"

    @pytest.mark.parametrize(("line", "expected"), [
        ("2020-01-01 12:00:00.123456: E tensorflow/core/common_runtime/bfc_allocator.cc:246] OOM", "2020-01-01T11:00:00.123456Z"),
        ("2020-01-01 12:00:00.123 | ERROR    | train:main:12 - failed", "2020-01-01T11:00:00.123000Z"),
    ])
    def test_dated_lines_in_the_zone(self, line: str, expected: str) -> None:
        """TensorFlow's and loguru's dated lines: their own time, in the nodes' zone."""
        assert _parse(line, timezone="Europe/Paris")[0]["@timestamp"] == expected

    def test_glog_takes_its_year_from_the_file(self) -> None:
        """glog/absl print no year: the one nearest the file's last dated line (here across New Year)."""
        docs = _parse(self.CORE + "\nE0101 00:00:01.000002 1234 file.cc:12] late\nW1231 23:59:59.500000 1234 file.cc:9] early")
        assert [doc["@timestamp"] for doc in docs[1:]] == ["2021-01-01T00:00:01.000002Z", "2020-12-31T23:59:59.500000Z"]
        assert [doc["log"]["level"] for doc in docs[1:]] == ["error", "warning"]

    def test_mxnet_takes_its_day_from_the_file(self) -> None:
        """MXNet's dmlc logger prints the time of day only: the day nearest the file's last dated line."""
        docs = _parse(self.CORE + "\n[00:00:03] src/operator/nn/cudnn/cudnn_convolution-inl.h:287: x")
        assert docs[1]["@timestamp"] == "2021-01-01T00:00:03.000000Z"

    @pytest.mark.parametrize("line", [
        "E1205 12:00:00.123456 1234 file.cc:12] no year known",
        "[12:00:00] src/operator/x.cc:287: no day known",
        "node1:1234:1240 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    ])
    def test_no_context_no_time(self, line: str) -> None:
        """With no dated line before it in its file (no year or day to take), or no stamp at all
        (NCCL), a line has no time: a guessed year would be a confident wrong answer."""
        assert "@timestamp" not in _parse(line)[0]

    def test_context_is_per_file(self) -> None:
        """Another file's date is no context: the files of a folder may come from other days."""
        from hvdlog.parse import parse_lines as parse
        from hvdlog.parse.native import NativeParser

        parser = NativeParser(timezone="UTC")
        list(parse([self.CORE], path="a/n/rank-0.stderr.log", parser=parser))
        (doc,) = parse(["E1205 12:00:00.123456 1234 file.cc:12] x"], path="a/n/rank-1.stderr.log", parser=parser)
        assert "@timestamp" not in doc


class TestArrivalTime:
    """The tee's `2026-11-30T14:35:49.123456Z ` prefix (GUIDE; HVDLOG_ARRIVAL_TIME)."""

    CORE = "[2026-11-30 14:35:40.000001: I /a.cc:1] x"

    def test_prefix_is_stripped_and_is_the_time(self) -> None:
        """A stamped print: message without the prefix, @timestamp = the arrival time (UTC, exact)."""
        (doc,) = _parse("2026-11-30T14:35:49.123456Z hello", timezone="Europe/Paris")
        assert doc["message"] == "hello" and doc["@timestamp"] == "2026-11-30T14:35:49.123456Z"

    def test_arrival_is_the_line_s_own_time_and_core_time_stays(self) -> None:
        """After a core line, a stamped line has its own time; the core line keeps Horovod's; a
        line without a stamp has none."""
        docs = _parse(self.CORE + "\n2026-11-30T14:35:49.123456Z after\nno stamp")
        assert [doc.get("@timestamp") for doc in docs] == ["2026-11-30T14:35:40.000001Z", "2026-11-30T14:35:49.123456Z", None]

    def test_a_traceback_takes_its_first_line_s_time(self) -> None:
        """Every line of a traceback is stamped: one event, its time the first line's."""
        (doc,) = _parse(
            "2026-11-30T14:35:49.000001Z Traceback (most recent call last):\n"
            "2026-11-30T14:35:49.000002Z   File \"x.py\", line 1, in <module>\n"
            "2026-11-30T14:35:49.000003Z ValueError: boom"
        )
        assert doc["@timestamp"] == "2026-11-30T14:35:49.000001Z" and doc["error"]["type"] == "ValueError"
        assert "Z " not in doc["message"]

    def test_an_indented_line_held_for_a_frame_keeps_its_own_time(self) -> None:
        """An indented line waits to see whether a frame follows (a traceback cut before its code line):
        with one, the traceback starts at its time; without, it is its own document at its own time."""
        (traceback,) = _parse(
            "2026-11-30T14:35:49.000001Z     x = f()\n"
            "2026-11-30T14:35:50.000001Z   File \"x.py\", line 3, in f\n"
            "2026-11-30T14:35:50.000002Z ValueError: boom"
        )
        assert traceback["@timestamp"] == "2026-11-30T14:35:49.000001Z" and traceback["error"]["type"] == "ValueError"
        assert traceback["message"].startswith("    x = f()\n  File ")
        alone, after = _parse("2026-11-30T14:35:49.000001Z     indented\n2026-11-30T14:35:50.000001Z next")
        assert (alone["message"], alone["@timestamp"]) == ("    indented", "2026-11-30T14:35:49.000001Z")
        assert (after["message"], after["@timestamp"]) == ("next", "2026-11-30T14:35:50.000001Z")

    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ("2026-13-30T14:35:49.123456Z impossible month", "impossible month"),  # stripped, no time
            ("2026-11-30T14:35:49.123Z not ours", "not ours"),  # milliseconds: kubectl --timestamps, no time taken
            ("2026-11-30T14:35:49.123456Zglued", "2026-11-30T14:35:49.123456Zglued"),
        ],
    )
    def test_not_an_arrival_time(self, line: str, message: str) -> None:
        """Only the exact format is the tee's; an impossible date is removed but gives no time."""
        (doc,) = _parse(line)
        assert doc["message"] == message and "@timestamp" not in doc


class TestJobSize:
    READY = (
        "WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
        "waiting for remainder of ranks for more than 60 seconds. Stalled ops: t0 [ready ranks: 0, 2]"
    )

    def test_size_learned_from_the_core_log(self) -> None:
        """`Started Horovod with N processes` gives the size the oldest stall format needs."""
        started = "[2026-11-29 16:01:46.105951: D /a.cc:40] Started Horovod with 4 processes\n"
        stall = _parse(started + self.READY)[-1]["horovod"]["stall"]
        assert stall["missing_ranks"] == [1, 3] and stall["ready_ranks"] == [0, 2]

    def test_size_unknown(self) -> None:
        """Without the size, missing ranks are those below the highest ready one (a lower bound)."""
        stall = _parse(self.READY)[-1]["horovod"]["stall"]
        assert stall["missing_ranks"] == [1] and stall["ready_ranks"] == [0, 2]


class TestPatternFile:
    def test_every_pattern_compiles(self) -> None:
        """Every definition of the shipped file translates and compiles."""
        for name in load_definitions():
            assert compile_pattern(name).regex.pattern

    @pytest.mark.parametrize(
        ("body", "message"),
        [
            ("HOROVOD_X (?<field>a)", "raw named group"),
            ("HOROVOD_X %{HOROVOD_NOPE}", "unknown %{HOROVOD_NOPE}"),
            ("HOROVOD_X %{HOROVOD_X}", "refers to itself"),
            ("HOROVOD_X (", "does not compile"),
            ("HOROVOD-X a", "expected `NAME pattern`"),
            ("HOROVOD_X a ", "trailing blank"),
        ],
    )
    def test_bad_pattern_files_are_refused(self, tmp_path: Path, body: str, message: str) -> None:
        """A pattern the translator cannot express fails with the pattern's name and why."""
        path = tmp_path / "patterns"
        path.write_text(f"# test\n{body}\n", encoding="utf-8")
        with pytest.raises(PatternError, match=message.replace("(", r"\(").replace("{", r"\{").replace("}", r"\}")):
            compile_pattern("HOROVOD_X", path)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing pattern file names the file and the setting to fix."""
        with pytest.raises(PatternError, match="HVDLOG_PATTERNS"):
            load_definitions(tmp_path / "nope")


class TestTagSplitter:
    def test_lines_cut_by_another_rank_are_rejoined(self) -> None:
        """Real Open MPI console lines where each rank cut the other's line in two."""
        lines = [
            line.decode()
            for line in TRACE.lines()
            if b"16:02:20[1,0]" in line or b"process_set.cc:265] [1,1]" in line
        ]
        assert len(lines) == 2
        splitter = TagSplitter()
        out = [piece for line in lines for piece in splitter.feed(line.rstrip("\n"))]
        assert [(piece.fields["rank"], piece.payload[:36]) for piece in out] == [
            (0, "[2026-11-29 16:02:20.703040: D /tmp/"),  # rank 0's line, whole, in line 1
            (0, "[2026-11-29 16:02:20.703082: T /tmp/"),  # rank 0's next: start and end in line 2
        ]
        assert out[1].payload.endswith("process_set.cc:265] [0]: Finalizing ProcessSetTable, global process set id 0")
        (rest,) = splitter.close()  # rank 1's: begun in line 1, continued in line 2, newline later
        assert rest.fields["rank"] == 1 and rest.payload.startswith("[2026-11-29 16:02:20.703050: D /tmp/")
        assert rest.payload.endswith("operations.cc:709] [1]: Shutting down background thread")

    @pytest.mark.parametrize(
        ("line", "payload", "rank"),
        [
            ("[1,0]<stderr>:done[1,0]<stderr>:", "done", 0),
            ("[3]<stdout>:x [1,2]<stdout>: y", "x [1,2]<stdout>: y", 3),
            ("plain [1,2]<stdout>: text", "plain [1,2]<stdout>: text", None),
        ],
    )
    def test_same_rank_tags_go_other_launchers_untouched(self, line: str, payload: str, rank: int | None) -> None:
        """A tag of the same rank inside a line is removed; gloo and untagged lines keep their text."""
        (piece,) = TagSplitter().feed(line)
        assert (piece.payload, piece.fields.get("rank")) == (payload, rank)


class TestGluedGlooLines:
    """horovodrun --gloo flushes a dead worker's unfinished line at its end without a newline, so
    the next thing on the same stream stands behind it (HOROVOD_GLUED_LAUNCHER_LINE)."""

    def test_horovodruns_exit_line_behind_a_torn_piece_is_its_own(self) -> None:
        """The form a real killed rank left in launcher.log: the piece stays rank 1's, the exit line is horovodrun's."""
        line = "[1]<stdout>:[2026-12-06 18:22:08.215639: I /src/horovod/common/operations.cc:Process 1 exit with status code 137."
        pieces = TagSplitter().feed(line)
        assert [(piece.payload, piece.fields.get("rank")) for piece in pieces] == [
            ("[2026-12-06 18:22:08.215639: I /src/horovod/common/operations.cc:", 1), ("Process 1 exit with status code 137.", None)]

    def test_another_ranks_line_behind_a_torn_piece_is_that_ranks(self) -> None:
        pieces = TagSplitter().feed("[1]<stderr>:queue is almost fu[0]<stderr>:Traceback (most recent call last):")
        assert [(piece.payload, piece.fields.get("rank"), piece.fields.get("horovod.launcher.stream")) for piece in pieces] == [
            ("queue is almost fu", 1, "stderr"), ("Traceback (most recent call last):", 0, "stderr")]

    @pytest.mark.parametrize("line", [
        "[1]<stdout>:Process 1 exit with status code 137.",  # a rank's own whole print of it: no piece before it
        "[1,1]<stdout>:epoch 2 loProcess 1 exit with status code 137.",  # Open MPI: horovodrun's gloo print is not there
        "[1]<stdout>:the launcher said Process 1 exit with status code 137. twice",
    ])
    def test_other_lines_stay_whole(self, line: str) -> None:
        (piece,) = TagSplitter().feed(line)
        assert "Process 1 exit" in piece.payload

    def test_the_documents(self) -> None:
        """Through the parser: the exit line is evidence about rank 1 with its status; the piece is a print."""
        docs = list(parse_lines(["[1]<stdout>:epoch 2 step 118 loProcess 1 exit with status code 137."], path="console.log"))
        assert [(doc["message"], doc.get("rank"), doc.get("process", {}).get("exit_code")) for doc in docs] == [
            ("epoch 2 step 118 lo", 1, None), ("Process 1 exit with status code 137.", 1, 137)]


class TestWhatATerminalShows:
    """A console line as a terminal shows it: colour codes and tqdm's `\\r` progress (read line by line,
    never split at a `\\r`, as a file is)."""

    @staticmethod
    def _read(line: str) -> list[dict]:
        return list(parse_lines([line], path="console.log", timezone="UTC"))

    def test_a_line_end_under_colour_codes_hides_nothing(self) -> None:
        """CRLF inside a colour (`...:\\r\\x1b[0m`): the `\\r` ends the line, no progress stood before it."""
        (doc,) = self._read("\x1b[36m[1,1]<stderr>:\x1b[1;31mERROR\x1b[0m: disk full\r\x1b[0m")
        assert (doc["message"], doc["rank"]) == ("ERROR: disk full", 1)

    def test_progress_before_a_line_with_open_mpi_tags_inside(self) -> None:
        """tqdm's `\\r` output after the tag, Open MPI's tag in the rest: the line is read whole."""
        progress = " 45%|####5     | 45/100 [00:12<00:15,  3.61it/s]\r"
        (doc,) = self._read(f"[1,0]<stderr>:{progress}[2019-04-13 13:53:31.851608: W horovod/common/operations.cc:588[1,0]<stderr>:] "
                            "HorovodBroadcast_conv2d_bias_Momentum_0 [missing ranks: 1]")
        assert (doc["rank"], doc["log"]["level"], doc["horovod"]["stall"]["missing_ranks"]) == (0, "warning", [1])


def _box_docs(text: str) -> list[dict[str, Any]]:
    return list(parse_lines(text.strip("\n").splitlines(), path="console.log", timezone="UTC"))


class TestOpenMpiBox:
    RULE = "-" * 74

    def test_a_box_is_one_document_at_its_most_severe_lines_level(self) -> None:
        """A slots box (no severity word) is one error document; a box of plain help text is one info document."""
        docs = _box_docs(f"""
{self.RULE}
There are not enough slots available in the system to satisfy the 4 slots
that were requested by the application:

  python
{self.RULE}
{self.RULE}
A requested component was not found, or was unable to be opened.
{self.RULE}
{self.RULE}
Open MPI is using the default settings for this host.
{self.RULE}
epoch 1 done
""")
        assert [(doc["log"]["level"], doc["message"].count("\n")) for doc in docs] == [("error", 5), ("error", 2), ("info", 2), ("info", 0)]
        assert docs[0]["message"].splitlines()[1].startswith("There are not enough slots")

    def test_a_box_takes_its_lines_rank_and_evidence(self) -> None:
        """mpirun's `noticed` box is rank 7's signal, Open MPI's exit box its verdict naming rank 0."""
        docs = _box_docs(f"""
{self.RULE}
mpirun noticed that process rank 7 with PID 0 on node gpu07 exited on signal 9 (Killed).
{self.RULE}
{self.RULE}
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[8269,1],0]
  Exit code:    1
{self.RULE}
""")
        assert len(docs) == 2
        assert docs[0]["rank"] == 7 and docs[0]["event"]["reason"] == "SIGKILL"
        assert docs[0]["hvdlog"]["evidence"] == {"kind": "signal", "source": "mpirun_noticed", "rank": 7}
        assert "rank" not in docs[1] and docs[1]["hvdlog"]["evidence"] == {"kind": "launcher_verdict", "source": "openmpi_box", "rank": 0}

    def test_a_peers_disconnection_is_a_survivors_report(self) -> None:
        """Open MPI's peer-disconnected box says a peer died: an error whose evidence is a peer's loss (never the
        culprit), and ORTE's error log line outside a box is an error though it has no severity word."""
        docs = _box_docs(f"""
{self.RULE}
An MPI communication peer process has unexpectedly disconnected.  This
usually indicates a failure in the peer process (e.g., a crash or
otherwise exiting without calling MPI_FINALIZE first).

  Local host: node-a
  Local PID:  4242
  Peer host:  node-b
{self.RULE}
[node-a:04242] [[51423,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file base/plm_base_launch_support.c at line 1230
""")
        assert [(doc["log"]["level"], doc["hvdlog"]["evidence"]["kind"]) for doc in docs] == [("error", "peer_loss"), ("error", "unrecognised")]

    def test_a_rule_alone_and_a_box_opened_on_a_closing_rule(self) -> None:
        """A capture that starts inside a box: its closing rule opens nothing past Open MPI's handler line; a rule of
        another length is a print."""
        docs = _box_docs(f"""
cause the program to abort.
{self.RULE}
[node-a:4242] CUDA: Error in cuMemcpy: res=-1
{"-" * 60}
""")
        assert [doc["message"] for doc in docs] == ["cause the program to abort.", self.RULE, "[node-a:4242] CUDA: Error in cuMemcpy: res=-1", "-" * 60]
        assert docs[1]["log"]["level"] == "info"


class TestExcepthookFailed:
    """Python's report when the program's sys.excepthook raised: the hook's traceback, then
    `Original exception was:` and the exception that ended the program (horovod/horovod#1613,
    pytorch/pytorch#126379). One event, whose error is the program's own exception."""

    def test_the_original_exception_is_the_events_error(self) -> None:
        docs = _parse("""Error in sys.excepthook:
Traceback (most recent call last):
  File "/srv/app/report.py", line 18, in on_uncaught
    rank = hvd.rank()
ValueError: Horovod has not been initialized; use hvd.init().

Original exception was:
Traceback (most recent call last):
  File "train.py", line 8, in <module>
    loss = 1 / count
ZeroDivisionError: division by zero
epoch 2""")
        assert [doc["message"].splitlines()[0] for doc in docs] == ["Error in sys.excepthook:", "epoch 2"]
        assert docs[0]["log"]["level"] == "error" and docs[0]["error"]["type"] == "ZeroDivisionError"
        assert docs[0]["error"]["message"] == "division by zero" and "Horovod has not been initialized" in docs[0]["error"]["stack_trace"]

    def test_a_report_whose_tracebacks_were_lost_is_one_error(self) -> None:
        """Printing both tracebacks failed too: the two lines and the blank between them, one error event."""
        docs = _parse("Error in sys.excepthook:\n\nOriginal exception was:\nepoch 2")
        assert [(doc["message"], doc["log"]["level"]) for doc in docs] == [
            ("Error in sys.excepthook:\n\nOriginal exception was:", "error"), ("epoch 2", "info")]

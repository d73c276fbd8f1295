"""Bad input never crashes the parser and nothing is lost: invalid UTF-8, a 1 MB line,
binary garbage, truncated stall blocks, a file that ends mid-line."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from corpus.cases import cases

from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.parse import decode_line, parse_lines, parse_paths
from hvdlog.parse.arrival import split_arrival
from hvdlog.parse.jsonl import decode_event
from hvdlog.parse.launcher import TagSplitter, strip_tag, visible
from hvdlog.parse.patterns import compile_pattern

STALL_HEADER = (
    "[2026-11-29 16:01:46.105951: W /src/horovod/common/stall_inspector.cc:107] One or more tensors were submitted "
    "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than "
    "2 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset "
    "of ranks is submitting tensors, which will cause deadlock. "
)
CORE = compile_pattern("HOROVOD_CORE_LINE")


def _parse(data: bytes, path: str = "job/node1/rank-0.stderr.log") -> list[dict]:
    return list(parse_lines(data.splitlines(keepends=True), path=path, timezone="UTC"))


class TestNothingIsLost:
    @pytest.mark.parametrize("case", cases(), ids=lambda case: case.id)
    def test_every_corpus_line_is_in_some_document(self, case) -> None:
        """Each non-blank line's text (after the tee's arrival time, its launcher tag and core header) is kept."""
        docs = case.parse()
        kept = "\n".join(
            "\n".join(str(doc.get(key, "")) for key in ("message",)) + str(doc.get("error", {}).get("stack_trace", ""))
            for doc in docs
        )
        splitter = TagSplitter()
        payloads = [payload for raw in case.lines() for payload, _ in splitter.feed(split_arrival(decode_line(raw)).payload)]
        for payload in payloads + [payload for payload, _ in splitter.close()]:
            if decode_event(payload) is not None:  # a JSON event is a document of its own
                continue
            core = CORE.match(payload)
            text = core["message"] if core else payload.removeprefix("WARNING: ")  # levels become log.level
            if text.strip():
                assert text in kept, text
        events = sum(decode_event(decode_line(raw)) is not None for raw in case.lines())
        assert sum(doc["event"]["dataset"] == "horovod.app" and "tags" not in doc for doc in docs) == events


class TestBadBytes:
    def test_invalid_utf8_is_kept_visibly(self) -> None:
        """Invalid UTF-8 in a native line and a JSON line: no crash, bytes kept as \\xNN."""
        docs = _parse(b"plain \xff\xfe text\n[2026-11-29 16:01:46.105951: W /a.cc:1] bad \xc3\x28 byte\n")
        assert [doc["message"] for doc in docs] == ["plain \\xff\\xfe text", "bad \\xc3( byte"]
        events = _parse(b'{"message": "caf\xe9", "log.level": "info"}\n', path="job/node1/rank-0.jsonl")
        assert "tags" not in events[0] and events[0]["message"] == "caf\ufffd"  # the event is kept, the byte replaced (issue #23)

    def test_one_megabyte_line(self) -> None:
        """A 1 MB native line and a 1 MB JSON value parse whole, quickly."""
        big = "x" * (1 << 20)
        started = time.perf_counter()
        native = _parse(f"[2026-11-29 16:01:46.105951: E /a.cc:1] {big}\n{big}\n".encode())
        event = _parse(json.dumps({"message": big, "log.level": "info"}).encode(), path="j/h/rank-0.jsonl")
        assert time.perf_counter() - started < 5
        assert [len(doc["message"]) for doc in native] == [len(big), len(big)]
        assert native[0]["log"]["level"] == "error" and "tags" not in native[1]  # a long print is still a print
        assert len(event[0]["message"]) == len(big)

    def test_binary_garbage(self) -> None:
        """Random bytes (NULs, control characters, stray brackets): every line is kept (as a
        terminal shows it: without colour codes), tagged when it is broken (not a mere print)."""
        generator = random.Random(4)
        garbage = bytes(generator.choice(b"\x00\x01\x1b[]{}<>:!\xff\xfe abc019\n\r\t") for _ in range(200_000))
        docs = _parse(garbage)
        payloads = [strip_tag(visible(decode_line(line))).payload for line in garbage.splitlines(keepends=True)]
        assert [doc["message"] for doc in docs] == [payload for payload in payloads if payload.strip()]
        broken = compile_pattern("HOROVOD_BROKEN_LINE").regex  # control characters, non-UTF-8 bytes, torn tags
        assert all((PARSE_FAILURE_TAG in doc.get("tags", [])) == bool(broken.search(doc["message"])) for doc in docs)
        assert sum(PARSE_FAILURE_TAG in doc.get("tags", []) for doc in docs) > len(docs) // 2
        assert all(doc["event"]["dataset"] == "horovod.launcher" for doc in docs)  # no JSON sniffing in a stderr file


class TestTruncated:
    @pytest.mark.parametrize(
        ("tail", "missing", "extra_docs"),
        [
            ("", None, 0),
            ("Missing ranks:\n", None, 0),
            ("Missing ranks:\n1: [allreduce.grad.step1, allreduce.b", [1], 0),
            ("Missing ranks:\n1!: [allreduce.grad.step1]\nOne or more rank (marked by", [1], 1),
        ],
        ids=["header-only", "title-only", "rank-line-cut", "shutdown-line-cut"],
    )
    def test_stall_block_cut_short(self, tail: str, missing: list[int] | None, extra_docs: int) -> None:
        """A stall block cut at EOF is one stall event; a rank line cut short still gives its
        rank (and the names that can be read); another cut line is kept, as a print."""
        docs = _parse((STALL_HEADER + "\n" + tail).encode())
        stall, *rest = docs
        assert stall["event"]["action"] == "stall" and stall["horovod"]["stall"]["seconds"] == 2.0
        assert stall["horovod"]["stall"].get("missing_ranks") == missing
        assert len(rest) == extra_docs and all(doc["log"]["level"] == "info" for doc in rest)

    @pytest.mark.parametrize(
        ("lines", "missing", "tensors"),
        [
            (["Missing ranks:", "1: [allreduce.a, allreduce.b]", "3!: [allreduce.a]"], [1, 3], ["allreduce.a", "allreduce.b"]),
            (["Stalled ranks:", "6: [horovod_allreduce.0 ...]"], [6], ["horovod_allreduce.0"]),
            (["Stalled ops:", "grad_0 [missing ranks: 2]", " grad_1 [missing ranks: 2, 3]"], [2, 3], ["grad_0", "grad_1"]),
        ],
        ids=["missing-ranks", "stalled-ranks", "stalled-ops"],
    )
    def test_stall_block_without_its_header(self, lines: list[str], missing: list[int], tensors: list[str]) -> None:
        """A capture that starts inside a stall report (its header line lost or cut in half):
        the title and the lines after it are still one stall report of the ranks they name."""
        half = "ranks for more than 2 seconds. This may indicate that different ranks are trying to submit"
        first, stall, after = _parse("\n".join([half, *lines, "epoch 2"]).encode())
        assert first["message"] == half and after["message"] == "epoch 2"
        assert stall["event"]["action"] == "stall" and stall["log"]["level"] == "warning" and stall["message"] == "\n".join(lines)
        assert stall["horovod"]["stall"]["missing_ranks"] == missing and stall["horovod"]["stall"]["tensors"] == tensors
        assert "seconds" not in stall["horovod"]["stall"]

    def test_traceback_cut_short(self) -> None:
        """A traceback without its exception line still comes out, as an error."""
        (doc,) = _parse(b'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n')
        assert doc["log"]["level"] == "error" and "x.py" in doc["error"]["stack_trace"]

    def test_file_ending_mid_line(self, tmp_path: Path) -> None:
        """The last line of a file without a newline is parsed like any other."""
        path = tmp_path / "job" / "node1" / "rank-3.stdout.log"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"[2026-11-29 16:01:46.105951: I /a.cc:1] first\n[2026-11-29 16:01:47.  5951: D /a.cc:2] [3]: cut")
        docs = list(parse_paths([path], timezone="UTC"))
        assert [doc["message"] for doc in docs] == ["first", "cut"]
        assert docs[1]["@timestamp"] == "2026-11-29T16:01:47.005951Z" and docs[1]["rank"] == 3

    def test_empty_input(self) -> None:
        """No lines, no documents."""
        assert _parse(b"") == []


class TestCli:
    def test_stdin_garbage_and_a_missing_file(self, tmp_path: Path) -> None:
        """`hvdlog parse -` reads stdin; a missing file is exit 2 with one sentence."""
        command = [sys.executable, "-c", "from hvdlog.cli.main import main; main()", "parse", "-q", "--timezone", "UTC"]
        result = subprocess.run([*command, "-"], input=b"\xff\x00garbage\n", capture_output=True, check=False)
        assert result.returncode == 0 and json.loads(result.stdout)["message"] == "\\xff\x00garbage"
        missing = subprocess.run([*command, str(tmp_path / "nope")], capture_output=True, check=False)
        assert missing.returncode == 2 and b"no such file" in missing.stderr
        bad = subprocess.run([*command, "--chatter", "often", "-"], input=b"", capture_output=True, check=False)
        assert bad.returncode == 2 and b"chatter" in bad.stderr


def test_one_invalid_utf8_byte_keeps_the_event_and_its_level(tmp_path: Path) -> None:
    """A JSON error event with one invalid UTF-8 byte stays an error event (issue #23): the
    byte is replaced (U+FFFD), the line and its fields are kept; it was a raw info line."""
    from hvdlog.parse import parse_paths

    line = b'{"@timestamp":"2026-12-01T12:00:00Z","log.level":"error","message":"bad \xff byte","rank":1}\n'
    (tmp_path / "rank-1.jsonl").write_bytes(line + b'{"broken": \xff\n')
    first, second = parse_paths([tmp_path / "rank-1.jsonl"])
    assert first["log"]["level"] == "error" and first["message"] == "bad \ufffd byte" and first["rank"] == 1
    assert "tags" not in first
    assert "_hvdlog_parse_failure" in second["tags"]  # not JSON even after the replacement: kept raw, as before

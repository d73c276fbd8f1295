"""The declared multi-line grammar (hvdlog/parse/assets/blocks.json) as hvdlog parse reads it:
segments of a stream, and the byte cap both paths apply to a document. Each row's own samples
and near-misses are checked in Python and in the ruby filter by tests/parse/test_block_samples.py."""

from __future__ import annotations

from hvdlog.parse import parse_lines
from hvdlog.parse.blocks import MAX_DOCUMENT_BYTES, cut_text, segments


class TestSegments:
    def test_a_chained_traceback_is_one_block(self) -> None:
        """Header, frames, exception, chain notice, second traceback: one block; blank lines between documents skipped."""
        lines = ["epoch 1", "Traceback (most recent call last):", '  File "a.py", line 1, in f', "    f()", "KeyError: 'x'", "",
                 "During handling of the above exception, another exception occurred:", "", "Traceback (most recent call last):",
                 '  File "a.py", line 3, in g', "ValueError: y", "", "epoch 2"]
        assert list(segments(lines)) == [(None, 0, 0), ("traceback_start", 1, 10), (None, 12, 12)]

    def test_filebeat_only_stops_at_what_filebeat_cannot_join(self) -> None:
        """A function name after TF 1's `Function call stack:` continues the block for hvdlog parse only
        (only the line before announces it; the cause after `Node: '...'` Filebeat's `match: before` joins)."""
        lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "tensorflow.errors.UnknownError: failed",
                 "Function call stack:", "train_function", "epoch 2"]
        assert list(segments(lines)) == [("traceback_start", 0, 4), (None, 5, 5)]
        assert list(segments(lines, filebeat_only=True)) == [("traceback_start", 0, 3), (None, 4, 4), (None, 5, 5)]


class TestByteCap:
    def test_cut_at_a_line_end_and_counted(self) -> None:
        """The first whole lines within the cap, then the mark; the lines and bytes not kept are counted."""
        text = "\n".join(["x" * 9] * 10)  # 10 lines of 10 bytes with their newline (the last has none)
        kept, lines, cut = cut_text(text, 35)
        assert kept == "\n".join(["x" * 9] * 3) + "\n... [hvdlog: 7 lines (70 bytes) cut]"
        assert (lines, cut) == (7, 70)

    def test_a_first_line_over_the_cap_is_cut_inside(self) -> None:
        """A single line longer than the cap keeps its first bytes (never half a character)."""
        kept, lines, cut = cut_text("é" * 10, 5)  # 2 bytes each: 2 whole characters fit
        assert kept == "éé\n... [hvdlog: 1 lines (16 bytes) cut]" and (lines, cut) == (1, 16)

    def test_parse_applies_the_cap(self) -> None:
        """hvdlog parse bounds a huge traceback's document like Logstash does (tag, counts, size)."""
        frames = [f'  File "/work/model_{n}.py", line {n}, in forward' for n in range(40_000)]
        [doc] = list(parse_lines(["Traceback (most recent call last):", *frames, "RecursionError: too deep"], path="/l/j/h/rank-0.stderr.log"))
        assert len(doc["message"].encode()) <= MAX_DOCUMENT_BYTES + 100 and len(doc["error"]["stack_trace"].encode()) <= MAX_DOCUMENT_BYTES + 100
        assert "_hvdlog_truncated" in doc["tags"] and doc["error"]["type"] == "RecursionError"
        assert doc["message"].count("\n") + doc["hvdlog"]["truncated"]["lines"] == 40_002

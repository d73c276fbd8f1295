"""The line bound (hvdlog/parse/bounded.py): cuts that keep a JSON event readable, and one bound for lines and documents."""

from __future__ import annotations

import io

import orjson
import pytest

from hvdlog.parse import bounded
from hvdlog.parse.blocks import MAX_DOCUMENT_BYTES


def test_the_line_bound_is_the_document_bound() -> None:
    """bounded.py reads blocks.json's bound without loading the grammar: the two must agree."""
    assert bounded.DOCUMENT_BOUND == MAX_DOCUMENT_BYTES


@pytest.mark.parametrize("filler", ["x", "é", "😀", "\\\\", "\\u00e9", '\\"'])
def test_a_cut_inside_a_long_string_keeps_the_event(filler: str) -> None:
    """Cut in the middle of a long message (multi-byte characters, escapes), the line is still the JSON event."""
    line = ('{"log.level":"error","message":"' + filler * 5000 + '","rank":3}').encode()
    out = b"".join(bounded.lines(io.BytesIO(line + b"\n"), limit=1024))
    assert len(out) < 1100
    event = orjson.loads(out)
    assert event["log.level"] == "error" and event["rank"] == 3
    assert bounded.cut_bytes(out) == len(line) - len(out) + len(bounded._MARK % bounded.cut_bytes(out))


def test_a_line_longer_than_the_buffer_is_cut_as_it_streams() -> None:
    """A line that fills every buffer is never held: the counter says one line, and how much went."""
    line = b'{"log.level":"error","message":"' + b"y" * 50_000 + b'","rank":1}'
    counter = bounded.CutCounter()
    out = [bytes(data[:end]) for data, end in bounded.blocks(io.BytesIO(line + b"\nnext\n"), 1024, limit=1024, counter=counter)]
    first, rest = b"".join(out).split(b"\n", 1)
    assert orjson.loads(first)["rank"] == 1 and rest == b"next\n"
    assert counter.lines == 1 and counter.bytes == len(line) - len(first) + len(bounded._MARK % counter.bytes)

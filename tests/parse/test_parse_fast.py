"""The fast path for our JSON event lines gives the same documents as the general one.

``parse_lines`` decodes the lines of an events file (``rank-N.jsonl``) in one tight loop
with one generated builder per key set, and ``hvdlog parse`` serialises them in batches.
Here both are compared, byte for byte, with the general path (``documents.expand`` per
line, ``json_line`` per document) on lines chosen to break a fast path: unicode, escapes,
nested objects, duplicate keys, keys that are both a leaf and a parent, non-contract keys,
invalid JSON and UTF-8, CRLF, a huge line, JSON that is not an object, too-deep keys.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from hvdlog.cli.output import json_line
from hvdlog.documents import Document, expand, set_field
from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.parse import bounded, decode_line, parse_lines, parse_paths
from hvdlog.parse.jsonl import APP_DATASET, MAX_KEY_DEPTH, bound_depth, decode_event, to_document
from hvdlog.parse.launcher import path_fields

REPO = Path(__file__).resolve().parents[2]
PATH = "job/node1/rank-3.jsonl"

_EVENT = (
    b'{"@timestamp":"2026-11-29T15:47:55.123456Z","log.level":"info","message":"train step","rank":1,"local_rank":1,'
    b'"size":2,"local_size":2,"host.name":"vm","process.pid":4242,"job":"demo","event.dataset":"horovod.app",'
    b'"log.logger":"hvdlog.train","step":12,"epoch":0,"loss":0.42,"lr":0.01,"samples_per_sec":812.5}'
)
_DEEP = ".".join(["a"] * (MAX_KEY_DEPTH + 1))
_NEARLY_DEEP = ".".join(["a"] * MAX_KEY_DEPTH)

#: One line per row, as bytes (a file's lines) or text (a caller's list).
LINES: list[bytes | str] = [
    _EVENT + b"\n",
    _EVENT + b"\r\n",
    _EVENT,
    _EVENT.replace(b'"train step"', '"pas d\'entra\u00eenement \u2014 \u65e5\u672c \U0001f600"'.encode()),
    _EVENT.replace(b'"train step"', b'"tab\\tquote\\"back\\\\slash\\u00e9\\u0000\\ud83d\\ude00 nl\\n"'),
    _EVENT.replace(b'"log.level"', b'"log\\u002elevel"'),  # an escaped dot is still a dot
    _EVENT.replace(b'"train step"', b'"' + b"x" * 1_200_000 + b'"'),  # a huge line
    b'  {"@timestamp" : "2026-11-29T15:47:55Z" ,\t"log.level":"warning" , "message":"spaced"}  \n',
    b'{"message":"eval","extra":{"accuracy":0.91,"nested":{"deep":[1,{"x":null}]},"log.level":"x"},"step":14}',
    b'{"message":"dup","rank":1,"rank":2,"log.level":"info","log.level":"error"}',  # duplicate keys: the last wins
    b'{"log":"plain","log.level":"info"}',  # a key that is both a leaf and a parent
    b'{"log.level":"info","log":{"logger":"x","file":{"path":"elsewhere"}}}',  # an object beside a dotted key under it
    b'{"event":{"action":"stall"},"event.dataset":"horovod.other","horovod.stall.tensors":["a","b"]}',
    b'{"log.file.path":"written/by/the/line","@timestamp.x":1}',
    b'{"zzz":1,"aaa.b.c":true,"":"empty key","a..b":2,".lead":3,"trail.":4,"@timestamp":"t"}',
    b'{"tags":["x","' + PARSE_FAILURE_TAG.encode() + b'"],"message":"already tagged"}',
    b'{"tags":5,"message":"tags of the wrong type"}',
    b'{"event":5,"message":"event of the wrong type"}',  # the contract's event is an object: kept under extra
    b'{"event":"x"}',
    b'{"message":"m","event":[1,2],"extra":{"a":1}}',
    b'{"event":null,"event.action":"stall"}',
    b'{"n":123456789012345678901234567890,"f":1e308,"neg":-0.0,"e":1E-7}',
    ('{"' + _DEEP + '":1}').encode(),  # too deep: a parse failure, kept raw
    ('{"' + _NEARLY_DEEP + '":1}').encode(),
    b"{}",
    b'["not", "an", "object"]',
    b"42",
    b'"a string"',
    b"null",
    b"true",
    b'{"truncated": "wri',
    b"not json at all",
    b"{not json}",
    b'{"a":1}{"b":2}',
    b'{"a":1} trailing',
    b"\xef\xbb\xbf" + _EVENT,  # a BOM: orjson refuses it, so the line is kept raw
    b'{"invalid utf-8":"\xff\xfe"}',
    b"\xff\xfe binary \x00 garbage",
    b"",
    b"\n",
    b"   \r\n",
    b"\r",
    '{"message":"a text line","rank":0}',
    '{"message":"lone surrogate \ud800"}',
    "not json, as text\n",
]


def _flat(raw: bytes | str) -> Any:
    """The decoded line; invalid UTF-8 bytes replaced by U+FFFD (issue #23), None when not JSON."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    if isinstance(raw, bytes):
        with_replacement = raw.decode("utf-8", "replace")
        if with_replacement != raw.decode("utf-8", "surrogateescape"):
            try:
                return orjson.loads(with_replacement)
            except orjson.JSONDecodeError:
                pass
    return None


def _general(raw: bytes | str, path: str, base: dict[str, Any]) -> Document | None:
    """What one line of an events file gives, laid out key by key (documents.expand)."""
    flat = _flat(raw)
    if type(flat) is dict and all(key.count(".") < MAX_KEY_DEPTH for key in flat):
        bound_depth(flat)  # a value nested past 20 levels is cut
        doc = expand(flat)
        event = doc.setdefault("event", {})
        if not isinstance(event, dict):  # kept under extra, where the stores take any value
            set_field(doc, "extra.event", event)
            event = doc["event"] = {}
        event.setdefault("dataset", APP_DATASET)
        set_field(doc, "log.file.path", path)
        if len(raw) > bounded.MAX_LINE_BYTES - 16 and (cut := bounded.cut_bytes(raw)) is not None:  # cut as it was read
            doc["tags"] = [*doc.get("tags", []), bounded.TRUNCATED_TAG]
            doc.setdefault("hvdlog", {}).setdefault("truncated", {})["bytes"] = cut
        return doc
    text = decode_line(raw)
    if not text.strip():
        return None
    return expand({**base, "message": text, "log.level": "info", "event.dataset": APP_DATASET, "tags": [PARSE_FAILURE_TAG]})


def _general_docs(lines: list[bytes | str], path: str) -> list[Document]:
    base = {"log.file.path": path, **path_fields(path)}
    return [doc for doc in (_general(raw, path, base) for raw in lines) if doc is not None]


def _ndjson(docs: list[Document]) -> bytes:
    return b"".join(json_line(doc) for doc in docs)


@pytest.mark.parametrize("index", range(len(LINES)))
def test_each_line_alone(index: int) -> None:
    """Every kind of line, alone, gives the general path's document byte for byte."""
    lines = [LINES[index]]
    assert _ndjson(list(parse_lines(lines, path=PATH))) == _ndjson(_general_docs(lines, PATH))


def test_all_lines_together_and_repeated() -> None:
    """Mixed, repeated (builders made once are reused) and in another order: still identical."""
    lines = LINES * 3 + LINES[::-1]
    assert _ndjson(list(parse_lines(lines, path=PATH))) == _ndjson(_general_docs(lines, PATH))


def test_same_keys_in_another_order_is_another_layout() -> None:
    """The builder is chosen by the keys *in order*: a reordered line is laid out in its order."""
    one = b'{"log.level":"info","message":"m","log.logger":"l","host.name":"h"}'
    other = b'{"host.name":"h","log.logger":"l","message":"m","log.level":"info"}'
    docs = list(parse_lines([one, other, one], path=PATH))
    assert [list(doc) for doc in docs] == [["log", "message", "host", "event"], ["host", "log", "message", "event"], ["log", "message", "host", "event"]]
    assert _ndjson(docs) == _ndjson(_general_docs([one, other, one], PATH))


def test_decode_event_and_to_document_agree_with_the_loop() -> None:
    """The per-line API (used by grep and the native parser's JSON sniffing) gives the same documents."""
    for raw in LINES:
        doc = decode_event(raw, PATH)
        if doc is not None:
            [expected] = _general_docs([raw], PATH)
            assert orjson.dumps(doc) == orjson.dumps(expected)
            assert orjson.dumps(to_document(_flat(raw), PATH)) == orjson.dumps(expected)


def test_the_command_writes_what_the_library_gives(tmp_path: Path) -> None:
    """``hvdlog parse FILE`` (batched writes, dumps inlined) = json_line of each document."""
    target = tmp_path / PATH
    target.parent.mkdir(parents=True)
    lines = [raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass") for raw in LINES]
    lines += [_EVENT.replace(b'"step":12', b'"step":' + str(step).encode()) for step in range(1000)]  # several batches
    lines.append(b'{"deep":' + b"[" * 300 + b"]" * 300 + b"}")  # nesting orjson will not write: json's fallback
    target.write_bytes(b"\n".join(lines) + b"\n")
    expected = _ndjson(list(parse_paths([target])))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "hvdlog", "parse", str(target)], capture_output=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    read = [bounded.cut_line(line) for line in target.read_bytes().split(b"\n")[:-1]]  # a line over the bound is cut as it is read
    assert result.stdout == _ndjson(_general_docs(read, str(target)))
    unparsed = sum(1 for doc in parse_paths([target]) if isinstance(doc.get("tags"), list) and PARSE_FAILURE_TAG in doc["tags"])
    written = result.stdout.count(b"\n")
    assert f"{unparsed} of {written} lines matched no pattern".encode() in result.stderr

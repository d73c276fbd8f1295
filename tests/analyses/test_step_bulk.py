"""The block reader of step events (msgspec) gives exactly what the line-by-line reader gives.

Both are real paths of ``stragglers``: the block one with msgspec installed (``hvdlog[cli]``),
the line one without it. Each file here mixes the plain lines our writer produces with the
lines the block path must not fold (or must not see at all), at random places, and the two
readers' tallies must be equal field by field, along with the full parse's rows.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from hvdlog.analyses import step_bulk, step_read
from hvdlog.analyses.stragglers import STEP_EVENTS, stragglers
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter

pytestmark = pytest.mark.skipif(not step_bulk.available(), reason="msgspec (hvdlog[cli]) is not installed")

SPEC = Filter(any_of=STEP_EVENTS)


def _plain(rank: int, step: int, micros: int, **extra: Any) -> bytes:
    seconds, micro = divmod(micros, 1_000_000)
    minute, second = divmod(seconds, 60)
    stamp = f"2026-11-18T11:{minute % 60:02d}:{second:02d}.{micro:06d}Z"
    doc = {"@timestamp": stamp, "log.level": "info", "message": "train step", "rank": rank, "size": 4,
           "host.name": f"node{rank}", "job": "bulk", "step": step, "samples_per_sec": 800.0 + step % 7, **extra}
    return orjson.dumps(doc)


#: Lines the block path must hand back (or skip) so that the answer stays the line reader's.
ODD_LINES: list[bytes] = [
    b'{"@timestamp":"2026-11-18T11:00:00.5Z","rank":1,"step":3,"samples_per_sec":5}',  # short fraction
    b'{"@timestamp":"2026-11-18T11:00:00.500000+00:00","rank":1,"step":4}',  # an offset
    b'{"@timestamp":"2026-02-30T11:00:00.000000Z","rank":1,"step":5}',  # a date no calendar holds
    b'{"@timestamp":"2026-11-18T11:00:99.000000Z","rank":1,"step":6}',  # second 99
    b'{"@timestamp":1795000000123,"rank":1,"step":7}',  # epoch millis
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":true,"step":8}',  # a bool rank
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":9.0}',  # a float step
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":99999999999999999999999}',  # orjson: a float
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":10,"horovod.elastic.epoch":"2"}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":11,"horovod.elastic.epoch":true}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":12,"host":{"name":"nested"}}',  # nested
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":13,"message":"a {brace} in text"}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"st\\u0065p":14}',  # never a candidate line
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":15,"message":"caf\\u00e9"}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":null,"size":9}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":16,"size":4.0,"host.name":7}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":17,"size":70000,"job":""}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":18,"samples_per_sec":0}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":19,"samples_per_sec":-3.5}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":20,"samples_per_sec":true}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":2,"step":21,"job":"other"}',  # another rank and job
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":22,"horovod.elastic.epoch":1}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":23,"rank":3}',  # a duplicate key: the last wins
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","log.level":"info","message":"resources","resources":{"cpu":1}}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"message":"no step here"}',
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":24}\r',  # CRLF
    b'   {"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":25}',  # leading blanks
    b"",  # a blank line
    b'{"@timestamp":"2026-11-18T11:00:01.000000Z","rank":1,"step":26,"message":"\xff bad byte"}',
    b'{"rank":1,"step":27,"@timestamp":"2026-11-18T11:00:01.000000Z","message":"torn',  # a torn line
    b"[1, 2, \"step\"]",
    b"step 28 of a console line",
]


def _file(path: Path, rng: random.Random, count: int, torn_end: bool, rank: int = 1) -> None:
    lines = []
    micros = 0
    for step in range(count):
        micros += rng.choice([0, 1, 400, 50_000, 50_000, 50_000])  # ties in one millisecond too
        lines.append(_plain(rank, step if rng.random() > 0.05 else step - 3, micros))
        if rng.random() < 0.08:
            lines.append(rng.choice(ODD_LINES))
    body = b"\n".join(lines) + b"\n"
    path.write_bytes(body + (b'{"rank":1,"step":' if torn_end else b""))


def _tally(paths: list[Path]) -> list[Any]:
    read = step_read.read_steps(FileSource(paths, warn=lambda _m: None), SPEC)
    tracks = sorted(((repr(key), vars(track)) for key, track in read.tally.tracks.items()), key=lambda item: item[0])
    return [tracks, sorted(read.tally.sizes.items(), key=repr), read.resources, read.failures, read.readable]


@pytest.mark.parametrize("seed", range(12))
def test_block_reader_is_the_line_reader(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    folder = tmp_path / "bulk" / "node"
    folder.mkdir(parents=True)
    for rank in range(3):
        _file(folder / f"rank-{rank}.jsonl", rng, rng.choice([1, 5, 300, 2000]), torn_end=rng.random() < 0.5, rank=rank)
    blocked = _tally([tmp_path])
    assert blocked[0], "nothing tallied"
    monkeypatch.setattr(step_bulk, "msgspec", None)
    assert not step_bulk.available()
    assert _tally([tmp_path]) == blocked


def test_every_odd_line_alone_and_between_plain_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each odd line as the only line, first, middle and last of a block of plain ones."""
    cases = []
    for index, odd in enumerate(ODD_LINES):
        folder = tmp_path / f"case{index}" / "node"
        folder.mkdir(parents=True)
        plain = [_plain(1, step, step * 50_000) for step in range(6)]
        (folder / "rank-1.jsonl").write_bytes(odd + b"\n")
        (folder / "rank-2.jsonl").write_bytes(b"\n".join([odd, *plain[:3], odd, *plain[3:], odd]) + b"\n")
        cases.append(tmp_path / f"case{index}")
    blocked = [_tally([case]) for case in cases]
    monkeypatch.setattr(step_bulk, "msgspec", None)
    for case, expected in zip(cases, blocked, strict=True):
        assert _tally([case]) == expected, case


def test_the_rows_are_the_full_parse_rows(tmp_path: Path) -> None:
    """And the stragglers answer over such files is the one a full parse of every line gives."""
    rng = random.Random(99)
    folder = tmp_path / "bulk" / "node"
    folder.mkdir(parents=True)
    for rank in range(4):
        _file(folder / f"rank-{rank}.jsonl", rng, 400, torn_end=False, rank=rank)
    streamed = [row.to_json() for row in stragglers(step_read.read_steps(FileSource([tmp_path], warn=lambda _m: None), SPEC).tally)]
    source = FileSource([tmp_path], warn=lambda _m: None)
    full = [row.to_json() for row in stragglers([doc for doc in source.search(SPEC) if doc.get("step") is not None])]
    assert streamed == full


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

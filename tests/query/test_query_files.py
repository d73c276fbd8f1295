"""The file source's fast path (issue #14): the needle scan, the block reader, the events-file
parse, the cached timestamps and the echo filter give what the plain path gives, byte for byte.

The plain path is the definition: every line of the file through :func:`hvdlog.parse.parse_lines`
(the general parser, with a native parser of its own), kept when :meth:`Filter.matches` and
it holds a needle of the scan (``"error"``/``"critical"`` for ``--level error``, the literal
PATTERN) or a ``\\u`` escape that may spell one, sorted by :func:`in_place` (by time; an untimed event right
after the timed one before it in its file). The fast path must agree with it on a file made to trip
it: level words inside messages, escaped quotes, other ranks' lines, lines that are not JSON,
CRLF, blank lines, untimed and oddly timed events, lines longer than a read block, and a last
line without a newline; with and without the ``ahocorasick_rs`` wheel, whatever the block size.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from hvdlog.cli.main import cli
from hvdlog.cli.output import Printer, dedupe, json_line
from hvdlog.documents import Document, in_place, timestamp_millis
from hvdlog.parse import _unparsed_event, bounded, decode_line, parse_lines, parse_paths
from hvdlog.parse.jsonl import decode_event
from hvdlog.parse.launcher import path_fields
from hvdlog.parse.native import NativeParser
from hvdlog.query import scan
from hvdlog.query.echoes import drop_echoes
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter, parse_ranks

REPO = Path(__file__).resolve().parents[2]
LEVELS = ("debug", "info", "warning", "error", "critical", "ERROR", "fatal")


def _tricky_lines(count: int = 1500, seed: int = 14) -> list[str]:
    """Events and non-events made to trip a needle scan (no line ending)."""
    rng = random.Random(seed)
    lines: list[str] = []
    for i in range(count):
        level = rng.choice(LEVELS)
        rank = rng.choice((3, 3, 3, 1, 7))
        stamp = f"2026-11-18T11:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randint(0, 999999):06d}Z"
        base = {"@timestamp": stamp, "log.level": level, "rank": rank}
        kind = i % 16
        if kind == 0:  # a level word inside a message, in quotes (escaped in JSON)
            lines.append(json.dumps({**base, "log.level": "info", "message": 'saw "error" and "critical"'}, separators=(",", ":")))
        elif kind == 1:  # not JSON; a needle first on its line; \u escapes the raw bytes do not show
            level_text = rng.choice(("error", "\\u0065rror"))
            lines.append('{"@timestamp":"' + stamp + '","log.level":"' + level_text + '","message":"' + rng.choice(("boom", "\\u0062oom")) + '","rank":3}')
            lines.append(rng.choice(('not json, but "error" and "critical" are in it', '"critical" starts this line', "boom starts this line")))
        elif kind == 2:  # already nested
            lines.append(json.dumps({"@timestamp": stamp, "log": {"level": level}, "message": "nested", "rank": rank}))
        elif kind == 3:
            lines.append(json.dumps({**base, "message": "crlf"}) + "\r")
        elif kind == 4:
            lines.append(rng.choice(("", "   ", "\r")))
        elif kind == 5:  # long lines: longer than the small blocks of the tests
            lines.append(json.dumps({**base, "message": "x" * rng.randint(50, 3000) + " error"}))
        elif kind == 6:  # the level word as another field's value
            lines.append(json.dumps({**base, "log.level": "info", "event.outcome": rng.choice(("error", "critical"))}))
        elif kind == 7:
            lines.append(json.dumps({"log.level": level, "message": "untimed error", "rank": rank}))
        elif kind == 8:
            lines.append(json.dumps({**base, "@timestamp": "2026-11-18 11:00:00", "message": "odd time"}))
        elif kind == 9:
            lines.append(json.dumps({**base, "message": 'unicode é ☃ \\"error\\"'}, ensure_ascii=rng.random() < 0.5))
        elif kind == 10:  # an exception event and its native echo candidate
            lines.append(json.dumps({**base, "error.type": "ValueError", "error.message": "boom error", "step": i}))
        elif kind == 11:  # spaces after colons, a bad tags value
            lines.append('{"@timestamp": "' + stamp + '", "log.level": "' + level + '", "tags": 5, "rank": ' + str(rank) + "}")
        elif kind == 12:  # same millisecond, several ranks: the sort's tie-break
            lines.append(json.dumps({**base, "@timestamp": "2026-11-18T11:00:00.000500Z", "message": "tie error"}))
        elif kind == 13:
            lines.append('{"@timestamp":"' + stamp + '","log.level":"error","message":"broken json')
        elif kind == 14:  # second-resolution and one-digit fraction timestamps
            lines.append(json.dumps({**base, "@timestamp": rng.choice((stamp[:19] + "Z", stamp[:21] + "Z")), "message": "short time"}))
        else:
            lines.append(json.dumps({**base, "message": "plain", "step": i // 5}))
    return lines


@pytest.fixture(name="tricky", scope="module")
def fixture_tricky(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rank-3.jsonl in our layout, ending without a newline."""
    path = tmp_path_factory.mktemp("files") / "job" / "node0" / "rank-3.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes("\n".join(_tricky_lines()).encode())
    return path


def _event(line: bytes, path: str) -> Document | None:
    """One line of an events file as parse_lines read it before issue #14 (its loop's events branch)."""
    doc = decode_event(line, path)
    if doc is None:
        doc = _unparsed_event(decode_line(line), {"log.file.path": path, **path_fields(path)})
    return doc


def _plain(path: Path, spec: Filter) -> list[Document]:
    """The definition: every line parsed, kept when it holds a needle and matches, sorted."""
    levels, literal = scan.needles(spec)
    needles = levels or ([literal] if literal is not None else [])
    docs = []
    for line in path.read_bytes().split(b"\n"):
        escaped = scan.ESCAPE in line  # a \u escape may spell any needle: such a line is always read
        if needles and not any(needle in line for needle in needles) and not escaped:
            continue
        if levels and literal is not None and literal not in line and not escaped:
            continue
        doc = _event(line, str(path))
        if doc is not None and spec.matches(doc):
            docs.append(doc)
    return in_place(docs)


@pytest.fixture(params=["accelerated", "stdlib"])
def scanner(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both needle scanners: the wheel's (skipped when it is not installed) and bytes.find."""
    if request.param == "accelerated":
        pytest.importorskip("ahocorasick_rs")
        monkeypatch.setattr(scan, "_ACCELERATED", True)
    else:
        monkeypatch.setattr(scan, "_ACCELERATED", False)
    return str(request.param)


SPECS = {
    "error": Filter(min_level="error"),
    "warning": Filter(min_level="warning"),
    "critical": Filter(min_level="critical"),
    "error-rank-3": Filter(min_level="error", ranks=parse_ranks("3")),
    "pattern": Filter(pattern="error"),
    "pattern-and-level": Filter(pattern="crlf", min_level="error"),
    "pattern-boom": Filter(pattern="boom"),
    "pattern-boom-and-level": Filter(pattern="boom", min_level="error"),
    "no-needle": Filter(min_level="info"),
    "pattern-one-byte": Filter(pattern="x"),
    "pattern-dense": Filter(pattern="xx"),
}


@pytest.mark.parametrize("window", [7, 1 << 20])
@pytest.mark.parametrize("name", ["error", "pattern-dense", "pattern-boom"])
def test_dense_needles_go_back_to_the_loop(tricky: Path, scanner: str, name: str, window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A needle the wheel finds too often is handed to the find loop mid-file: the same documents."""
    monkeypatch.setattr(scan, "_WINDOW", window)
    monkeypatch.setattr(scan, "_DENSE", 10**9)  # any hit is dense
    spec = SPECS[name]
    assert list(FileSource([tricky]).search(spec)) == _plain(tricky, spec)
    finder = scan.finders([b"xx"])[0]
    data = bytearray(b"xxxx\n" * 1000)
    starts = finder.starts(data, len(data))
    assert starts == sorted(starts) and {data.rfind(b"\n", 0, pos) + 1 for pos in starts} == set(range(0, len(data), 5))
    if scanner == "accelerated":
        assert finder._searcher is None


@pytest.mark.parametrize("block", [64, 1000, 4096, None])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_search_is_the_plain_path(tricky: Path, scanner: str, name: str, block: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every spec, both scanners, blocks smaller than lines or bigger than the file: the same documents."""
    if block is not None:
        monkeypatch.setattr(bounded, "_BLOCK", block)
        monkeypatch.setattr(scan, "_WINDOW", block // 3 + 1)  # the wheel's windows: needles across their edges
    spec = SPECS[name]
    found = list(FileSource([tricky]).search(spec))
    assert found == _plain(tricky, spec)
    assert found or name == "pattern-and-level"


CLI_CASES = {
    "json-error": (["--json", "--level", "error"], Filter(min_level="error")),
    "json-warning-rank": (["--json", "--level", "warning", "--rank", "3"], Filter(min_level="warning", ranks=parse_ranks("3"))),
    "json-pattern": (["--json", "-e", "error"], Filter(pattern="error")),
    "text-error": (["--level", "error"], Filter(min_level="error")),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_output_is_byte_identical(tricky: Path, scanner: str, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`hvdlog grep` prints the bytes the plain path's documents give (NDJSON, or deduped text), exit 0."""
    args, spec = CLI_CASES[case]
    monkeypatch.setattr(bounded, "_BLOCK", 512)
    result = CliRunner().invoke(cli, ["grep", *args, str(tricky)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    docs = drop_echoes(_plain(tricky, spec))
    if "--json" in args:
        assert result.stdout_bytes == b"".join(json_line(doc) for doc in docs)
    else:
        stream = io.StringIO()
        printer = Printer(as_json=False, color=False, stream=stream)
        for group in dedupe(docs, 2.0):
            printer.event(group)
        assert result.stdout == stream.getvalue()


@pytest.mark.parametrize("size", [1, 7, 64, 4096])
@pytest.mark.parametrize("ending", [b"", b"\n", b"\n\n", b"\r\n"])
def test_blocks_hold_whole_lines(size: int, ending: bytes) -> None:
    """The blocks put back together are the file; each block but the last ends with a newline."""
    text = b"\n".join(f"line {i} ".encode() * (i % 9) for i in range(200)) + ending
    pieces = [bytes(buffer[:end]) for buffer, end in scan.blocks(io.BufferedReader(io.BytesIO(text)), size)]  # type: ignore[arg-type]
    assert b"".join(pieces) == text
    assert all(piece.endswith(b"\n") for piece in pieces[:-1])


def test_an_escaped_level_or_pattern_is_found(tmp_path: Path) -> None:
    """``"\\u0065rror"`` is ``"error"`` in JSON: grep --level error and grep boom find such an event."""
    path = tmp_path / "job" / "node0" / "rank-0.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"@timestamp":"2026-12-01T10:00:00.000Z","log.level":"\\u0065rror","message":"b\\u006fom","rank":0}\n'
                     b'{"@timestamp":"2026-12-01T10:00:01.000Z","log.level":"info","message":"fine","rank":0}\n')
    for args in (["--level", "error"], ["boom"], ["--level", "error", "boom"]):
        result = CliRunner().invoke(cli, ["grep", "--json", *args, str(path)])
        assert result.exit_code == 0 and [json.loads(line)["message"] for line in result.output.splitlines()] == ["boom"], (args, result.output)


def test_events_parse_needs_no_native_parser(tmp_path: Path) -> None:
    """grep over an events file never loads the native parser (nor its patterns): it is start-up time."""
    path = tmp_path / "rank-0.jsonl"
    path.write_text('{"@timestamp":"2026-11-18T11:06:40.089999Z","log.level":"error","message":"m","rank":0}\n')
    code = (
        "import sys; from hvdlog.query.files import FileSource; from hvdlog.query.spec import Filter;"
        f"assert list(FileSource([{str(path)!r}]).search(Filter(min_level='error')));"
        "print(sorted(m for m in sys.modules if m.startswith('hvdlog.parse')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.strip()
    assert "hvdlog.parse.native" not in loaded and "hvdlog.parse.patterns" not in loaded, loaded


def test_events_parse_is_the_line_by_line_parse(tricky: Path) -> None:
    """parse_lines of an events file, on its own or with a shared parser: each line's document, in order."""
    lines = tricky.read_bytes().splitlines(keepends=True)
    expected = [doc for doc in (_event(line, str(tricky)) for line in lines) if doc is not None]
    assert list(parse_lines(lines, path=str(tricky))) == expected
    assert list(parse_lines(lines, path=str(tricky), parser=NativeParser())) == expected
    assert list(parse_paths([tricky])) == expected
    assert any("_hvdlog_parse_failure" in doc.get("tags", ()) for doc in expected)


@pytest.mark.parametrize(("option", "value"), [("timezone", "Nowhere/Atlantis"), ("chatter", "sometimes")])
def test_events_parse_still_checks_options(tricky: Path, option: str, value: str) -> None:
    """A bad time zone or chatter setting is refused for events files too, as before."""
    with pytest.raises(ValueError, match=r"time zone|chatter"):
        list(parse_lines([b"{}"], path=str(tricky), **{option: value}))  # type: ignore[arg-type]


def _timestamps() -> Iterator[str]:
    yield from ("2026-11-29T15:47:55.123456Z", "2026-11-29T15:47:55Z", "2026-11-29T15:47:55.1Z", "2026-11-29T15:47:55.12Z")
    yield from ("2026-11-29T15:47:55.Z", "2026-11-29T15:47:55.123456", "2026-11-29T15:47:55.12a4Z", "2026-11-29T15:47:55.123Z\n")
    yield from ("2026-11-29T15:47:55.١٢٣Z", "2026-11-29T15:47:55.²Z", "2026-11-29T15:47:55+01:00", "2026-13-29T15:47:55.1Z")
    yield from ("2026-11-29T15:47:60.5Z", "2026-11-29T15:47:55.123456789Z", "2026-11-29", "", "2026-11-29T15:47:55.000999Z")
    yield from ("2026-11-29T15:47:5", "2026-11-29T15:47:5Z", "2026-11-29T15:47x55.1Z", "2026-11-29T15:47:5a.1Z", "2026-11-29T15:47:09.9Z")
    yield from ("2026-11-29T15:47:٠٩.9Z", "2026-11-29T15:47:55.1Z ", "2026-11-29T15:47:55..1Z", "2026-11-29T15:47:55.-1Z")


def test_cached_timestamps_are_the_parsed_ones() -> None:
    """The per-second cache gives what parsing gives, for canonical values and near misses alike."""
    from hvdlog import documents

    values = list(_timestamps())
    documents._SECOND_MILLIS.clear()
    cold = [timestamp_millis(value) for value in values]
    assert documents._SECOND_MILLIS  # every canonical second is cached now
    warm = [timestamp_millis(value) for value in values]
    assert cold == warm == [documents._timestamp_millis(value) for value in values]
    second = int(datetime(2026, 11, 29, 15, 47, 55, tzinfo=timezone.utc).timestamp()) * 1000
    assert cold[:4] == [second + 123, second, second + 100, second + 120]


def test_without_the_wheel_find_does_it(tricky: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ahocorasick_rs (plain `pip install hvdlog`): the find loop, the same documents."""

    def missing() -> None:
        raise ImportError("No module named 'ahocorasick_rs'")

    monkeypatch.setattr(scan, "_accelerator", missing)
    monkeypatch.setattr(scan, "_ACCELERATED", True)
    assert all(finder._searcher is None for finder in scan.finders([b'"error"', b"boom"]))
    assert scan._ACCELERATED is False
    assert list(FileSource([tricky]).search(SPECS["error"])) == _plain(tricky, SPECS["error"])

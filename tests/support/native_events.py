"""The native corpus as Logstash receives it: one stream per rank and stream (Filebeat reads
per-rank files; a console capture is split by its launcher tags), each joined into events by
shipper/filebeat.yml's multiline parsers (tests/support/filebeat_emulation.py, itself
checked against a real Filebeat and RE2 in tests/stack/test_filebeat.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import yaml
from corpus.cases import Case
from support.filebeat_emulation import join_lines, multiline_parsers

from hvdlog.parse import decode_line
from hvdlog.parse.launcher import visible
from hvdlog.parse.patterns import load_definitions

__all__ = ["LAUNCHER_INPUT", "NATIVE_PARSERS", "events_of", "numbered_streams_of", "streams_of"]

_FILEBEAT_YML: Final = Path(__file__).resolve().parent.parent.parent / "shipper" / "filebeat.yml"
_INPUTS: Final = {i["id"]: i for i in yaml.safe_load(_FILEBEAT_YML.read_text())["filebeat.inputs"]}
NATIVE_PARSERS: Final = multiline_parsers(_INPUTS["hvdlog-native"])
#: shipper/filebeat.yml's input for ``hvdlog run``'s launcher.log (its ``exclude_lines``)
LAUNCHER_INPUT: Final = _INPUTS["hvdlog-launcher"]
#: what may stand before a launcher tag: hvdlog's arrival time, a collector's prefix, horovodrun's time
_BEFORE_TAG: Final = (
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z )?"
    r"(?:\[pod/[^\]\s]+\] |\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z (?:(?:stdout|stderr) [FP] )?|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \S+ -- )*"
    r"(?:\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?"
)
_TAG_ITSELF: Final = r"(?P<tag>\[\d+(?:,\d+)?\]<std(?:out|err|diag)>:|\[\d+\] |\d+: (?!\[(?!\d{4}-|[TDIWEF] )))"
_TAG: Final = re.compile(f"^{_BEFORE_TAG}{_TAG_ITSELF}?")
#: a tag behind any scheduler's prefix (HOROVOD_SCHEDULER_PREFIX), as horovod-native.conf's tag groks find it
_TAG_BEHIND_PREFIX: Final = re.compile(f"^(?:{load_definitions()['HOROVOD_SCHEDULER_PREFIX']}){_BEFORE_TAG}{_TAG_ITSELF}")


def _filebeat_lines(data: bytes) -> list[bytes]:
    """A file's lines as Filebeat's reader ends them (``line_terminator: auto``: a newline,
    with or without a carriage return before it); a lone ``\\r`` (tqdm's progress) stays in
    its line, where ``bytes.splitlines`` would cut it and lose the rest's launcher tag."""
    lines = data.split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def streams_of(case: Case | Path) -> list[list[str]]:
    """A case's (or a file's) lines grouped by launcher tag (one group when untagged), in order."""
    return [[line for _, line in stream] for stream in numbered_streams_of(case)]


def numbered_streams_of(case: Case | Path) -> list[list[tuple[int, str]]]:
    """:func:`streams_of` with each line's index in the file (where the streams interleave)."""
    groups: dict[str, list[tuple[int, str]]] = {}
    raws = _filebeat_lines(case.read_bytes()) if isinstance(case, Path) else case.lines()
    for number, raw in enumerate(raws):
        line = decode_line(raw)
        found = _TAG.match(line)
        if not (found and found["tag"]) and ("\r" in line or "\x1b" in line):  # behind what a terminal hides
            found = _TAG.match(visible(line))
        if not (found and found["tag"]):
            found = _TAG_BEHIND_PREFIX.match(line)
        groups.setdefault(found["tag"] or "" if found else "", []).append((number, line))
    return list(groups.values())


def events_of(lines: list[str]) -> list[str]:
    """The events Filebeat's native input makes of one stream's lines."""
    return join_lines("\n".join(lines) + "\n", NATIVE_PARSERS)

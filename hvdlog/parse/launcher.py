"""Launcher tags: which rank and stream a console line came from, and the payload.

horovodrun --gloo prefixes ``[3]<stdout>:``, Open MPI ``[1,3]<stderr>:`` (and tags every
read chunk, so a line written piecewise carries tags in its middle, even inside the
timestamp), MPICH/Hydra ``[3] ``. Tags are parsed with the grok patterns of
``hvdlog/parse/assets/patterns/horovod``; a per-rank file's path gives rank and stream instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from hvdlog.layout import LAUNCHER_LOG_PATH
from hvdlog.parse.patterns import compile_pattern

__all__ = ["TagSplitter", "Tagged", "path_fields", "payload_start", "shown", "split_prefixed", "strip_tag", "unglued", "visible"]

_OPENMPI: Final = compile_pattern("HOROVOD_OPENMPI_LINE")
_GLOO: Final = compile_pattern("HOROVOD_GLOO_LINE")
_GLOO_TAG: Final = compile_pattern("HOROVOD_GLOO_TAG")
_GLUED: Final = compile_pattern("HOROVOD_GLUED_LAUNCHER_LINE")
_MPICH: Final = compile_pattern("HOROVOD_MPICH_LINE")
_SRUN: Final = compile_pattern("HOROVOD_SRUN_LINE")
_COLLECTOR: Final = compile_pattern("HOROVOD_COLLECTOR_LINE")
_COLLECTOR_DATE: Final = re.compile(r"\d{4}-\d{2}-\d{2}[T ]")
_OPENMPI_ANY: Final = compile_pattern("HOROVOD_OPENMPI_TAG_ANY").regex
_OPENMPI_TAG: Final = compile_pattern("HOROVOD_OPENMPI_TAG")
_RANK_PATH: Final = compile_pattern("HOROVOD_RANK_FILE_PATH")
_LAYOUT_PATH: Final = compile_pattern("HOROVOD_LAYOUT_PATH")
_PREFIXED_CORE: Final = compile_pattern("HOROVOD_PREFIXED_CORE")
_CORE_HEADER: Final = compile_pattern("HOROVOD_CORE_HEADER").regex
_ANSI: Final = compile_pattern("HOROVOD_ANSI_ANY").regex
_PAYLOAD: Final = "@metadata.hvd.payload"
_PREFIX: Final = "@metadata.hvd.prefix"
#: the regex group of an Open MPI line's payload (where the payload starts in the line as it stands)
_OPENMPI_PAYLOAD: Final = next(capture.group for capture in _OPENMPI.captures if capture.field == _PAYLOAD)


class Tagged(NamedTuple):
    """A line split into its launcher tag (as fields; empty when untagged) and payload."""

    payload: str
    fields: dict[str, Any]


def visible(line: str) -> str:
    """What a terminal shows of ``line``: no colour codes, and only what follows the last
    carriage return (tqdm's progress output, never ended by a newline, glued before it). A
    carriage return nothing follows is a line end (CRLF) a colour code stood after: it hides nothing."""
    if "\x1b" in line:
        line = _ANSI.sub("", line).rstrip("\r")
    if "\r" in line:
        line = line[line.rindex("\r") + 1:]
    return line


def strip_tag(line: str) -> Tagged:
    """Split the launcher tag off ``line`` (and a collector's prefix before it: kubectl,
    CRI, log viewers, any scheduler's, see HOROVOD_SCHEDULER_PREFIX); Open MPI tags inside
    the payload are removed."""
    tagged = split_prefixed(line)
    tagged.fields.pop(_PREFIX, None)
    return tagged


def shown(line: str, split: Callable[[str], Tagged] | None = None) -> str:
    """``line`` as a terminal shows it (see :func:`visible`), where the progress output glued
    before a line sits behind its launcher tag (and prefix), if any: the tag stays, what the
    last carriage return hid goes. ``split`` finds the tag (default :func:`split_prefixed`; a
    file's reader also removes the prefix it learned)."""
    line = visible(line) if "\x1b" in line else line
    if "\r" not in line:
        return line
    tagged = (split or split_prefixed)(line)
    if not tagged.fields or "\r" not in tagged.payload:
        return visible(line)
    start = payload_start(line, tagged)  # Open MPI's tags after the last `\r` stay: the splitter rejoins their pieces
    return line[:start] + visible(line[start:])


def payload_start(line: str, tagged: Tagged) -> int:
    """Where ``tagged``'s payload (``line`` split by :func:`split_prefixed`, or by a learned
    prefix) starts in ``line``: Open MPI's tags inside the payload were removed from it, so
    its length alone does not say."""
    if tagged.fields.get("horovod.launcher.format") == "openmpi":
        found = _OPENMPI.regex.match(line)
        if found is not None:
            return found.start(_OPENMPI_PAYLOAD)
    return len(line) - len(tagged.payload)


def split_prefixed(line: str) -> Tagged:
    """:func:`strip_tag`, the scheduler prefix kept in the fields (``@metadata.hvd.prefix``):
    hvdlog/parse/prefixes.py learns it for the file's other lines."""
    if line.startswith("[") and _CORE_HEADER.match(line) is not None:
        return Tagged(line, {})  # Horovod's own line, as a per-rank file holds it: no tag, no prefix before it
    head = line[:200]
    if ">:" in head:
        fields = _OPENMPI.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "openmpi"
            return Tagged(_OPENMPI_ANY.sub("", fields.pop(_PAYLOAD, "")), fields)
        fields = _GLOO.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "gloo"
            return Tagged(fields.pop(_PAYLOAD, ""), fields)
    if "] " in head:
        fields = _MPICH.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "mpich"
            return Tagged(fields.pop(_PAYLOAD, ""), fields)
    if ": " in head:
        fields = _SRUN.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "srun"
            return Tagged(fields.pop(_PAYLOAD, ""), fields)
    if "] " in head or "Traceback" in head or "*** SIG" in head or ": error: " in head:  # also behind a collector's prefix
        fields = _PREFIXED_CORE.match(line)
        if fields is not None:
            prefix = fields[_PREFIX]
            return Tagged(line[len(prefix):], {_PREFIX: prefix})
    # every HOROVOD_COLLECTOR_PREFIX holds `[pod/` or a date: a line without either is tried no
    # further (the pattern's scheduler alternative would scan 160 characters of every print)
    maybe = "[pod/" in line or ("-" in line and _COLLECTOR_DATE.search(line) is not None)
    fields = _COLLECTOR.match(line) if maybe else None
    if fields is not None:
        prefix = fields.get(_PREFIX)  # a scheduler's prefix before the collector's
        return Tagged(fields.pop(_PAYLOAD, ""), {_PREFIX: prefix} if prefix else {})
    return Tagged(line, {})


Key = tuple[Any, Any, Any]
#: reads one line without an Open MPI tag: its tag and payload, or None while it is held
Single = Callable[[str, "str | None"], "Tagged | None"]


def _key(fields: dict[str, Any]) -> Key:
    return fields.get("horovod.launcher.job"), fields.get("rank"), fields.get("horovod.launcher.stream")


class TagSplitter:
    """Splits launcher tags off a console's lines, and re-joins the lines that other ranks'
    output cut in two.

    Open MPI writes each chunk a rank emits with that rank's tag, as it comes: when rank 1
    wrote ``[2026-11-29 16:02:20`` and rank 0 a whole line before rank 1 wrote the rest,
    the console shows ``[1,1]<stdout>:[2026-11-29 16:02:20[1,0]<stdout>:<rank 0's line>``
    and later ``[1,1]<stdout>:.703050: D ...``. The piece before a tag of another rank is
    kept aside and put in front of that rank's next piece, which restores both lines.
    """

    __slots__ = ("_learn", "_partial", "_single")

    def __init__(self, single: Single | None = None, learn: Callable[[str], None] | None = None) -> None:
        """``single`` reads a line with no Open MPI tag (default: :func:`strip_tag`; None from
        it: the line is held), ``learn`` is told the prefix an Open MPI tag stood behind
        (both: hvdlog/parse/prefixes.py, which learns a file's prefix)."""
        self._partial: dict[Key, tuple[str, dict[str, Any]]] = {}
        self._single = single
        self._learn = learn

    def feed(self, line: str, arrival: str | None = None) -> list[Tagged]:
        """The complete lines ``line`` finishes (usually itself, untagged); ``arrival`` its
        arrival time, for a line held (see ``single``)."""
        fields = _OPENMPI.match(line) if "]<" in line else None
        if fields is None:  # gloo, MPICH, untagged: no chunk tags inside lines
            tagged = strip_tag(line) if self._single is None else self._single(line, arrival)
            return [] if tagged is None else unglued(tagged)
        fields["horovod.launcher.format"] = "openmpi"
        prefix = fields.pop(_PREFIX, None)
        if prefix and self._learn is not None:
            self._learn(prefix)
        payload = fields.pop(_PAYLOAD, "")
        pieces: list[tuple[dict[str, Any], list[str]]] = [(fields, [])]
        position = 0
        for found in _OPENMPI_TAG.regex.finditer(payload):
            pieces[-1][1].append(payload[position:found.start()])
            position = found.end()
            tag = _OPENMPI_TAG.fields_of(found)
            if _key(tag) != _key(pieces[-1][0]):
                tag["horovod.launcher.format"] = "openmpi"
                pieces.append((tag, []))
        pieces[-1][1].append(payload[position:])
        for piece_fields, parts in pieces[:-1]:  # cut short by another rank's output
            key = _key(piece_fields)
            before, first_fields = self._partial.get(key, ("", piece_fields))
            self._partial[key] = (before + "".join(parts), first_fields)
        last_fields, parts = pieces[-1]
        before, first_fields = self._partial.pop(_key(last_fields), ("", last_fields))
        return [Tagged(before + "".join(parts), first_fields)]

    def close(self) -> list[Tagged]:
        """Pieces still waiting for the rest of their line when the input ended."""
        pieces = [Tagged(text, fields) for text, fields in self._partial.values()]
        self._partial.clear()
        return pieces


def unglued(tagged: Tagged) -> list[Tagged]:
    """A horovodrun --gloo worker's line as the lines it holds. horovodrun forwards whole lines,
    but the last piece of a worker that died in the middle of a line has no newline, so what
    comes next on the same stream stands behind it: another worker's tagged line
    (``[1]<stderr>:tor[0]<stderr>:Traceback ...``), or horovodrun's own exit line
    (``[1]<stdout>:tor`` + ``Process 1 exit with status code 137.``, HOROVOD_GLUED_LAUNCHER_LINE).
    Without the split, the other rank's line is read as this rank's, and the exit is no evidence."""
    if tagged.fields.get("horovod.launcher.format") != "gloo":
        return [tagged]
    lines: list[Tagged] = []
    payload, fields = tagged.payload, tagged.fields
    while (inner := _GLOO_TAG.regex.search(payload)) is not None:  # as TagSplitter.feed reads Open MPI's tags
        lines.append(Tagged(payload[:inner.start()], fields))
        payload, fields = payload[inner.end():], {**_GLOO_TAG.fields_of(inner), "horovod.launcher.format": "gloo"}
    glued = _GLUED.match(payload)
    if glued is None:
        return [*lines, Tagged(payload, fields)]
    return [*lines, Tagged(glued["@metadata.hvd.torn"], fields), Tagged(glued["@metadata.hvd.launcher_line"], {})]


def path_fields(path: str | None) -> dict[str, Any]:
    """What a per-rank path says: rank and stream, and job and host for hvdlog's layout (the job
    alone for the ``<job>/launcher.log`` that ``hvdlog run`` keeps)."""
    if not path:
        return {}
    path = path.replace("\\", "/")
    fields = _RANK_PATH.search(path) or {}
    layout = _LAYOUT_PATH.search(path)
    if layout is None and (launcher := LAUNCHER_LOG_PATH.search(path)) is not None:
        layout = {"job": launcher["job"]}
    fields.update(layout or {})
    return fields

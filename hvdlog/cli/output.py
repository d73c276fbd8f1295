"""How commands print: one line per event (coloured on a terminal), or NDJSON with ``--json``.

Plain output collapses the messages of one template (hvdlog.analyses.templates: the same text
but for numbers, addresses, paths and hosts) that several ranks print within a short window
into one line naming the ranks (``ranks 0-7``), because eight copies of the same Horovod
shutdown line hide the one line that differs; numbers that differ show as their range
(``Timed out waiting <30000..31000>ms``). ``--json`` and ``--no-group`` show every event.
Colour only on a terminal; ``NO_COLOR`` (honoured by rich) and pipes get plain text.
rich is imported only when colour is on.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import orjson

from hvdlog.analyses.summary import one_line
from hvdlog.analyses.templates import Template, canonical
from hvdlog.cli.text import escape_controls
from hvdlog.documents import Document, get_field, timestamp_millis
from hvdlog.query.spec import format_ranks

__all__ = ["Group", "Printer", "dedupe", "format_time", "json_line", "show_local_time"]

_LEVEL_STYLES: Final = {
    "trace": "dim",
    "debug": "dim",
    "info": "green",
    "warning": "yellow",
    "error": "bold red",
    "critical": "bold white on red",
}


@dataclass
class Group:
    """One printed line: an event, plus the other ranks that printed the same message."""

    doc: Document
    ranks: set[int] = field(default_factory=set)
    count: int = 1
    #: The template of each member's line, in arrival order (empty: one event, printed as it is).
    members: list[Template] = field(default_factory=list)

    def message(self) -> str:
        """The line to print: the event's own when every member printed the same text, else the
        template with the values every member shares, numbers that differ as their range
        (``<30000..31000>``) and other values that differ as their placeholder (``<HOST>``)."""
        text = one_line(self.doc)
        if len(self.members) < 2 or all(member.values == self.members[0].values for member in self.members):
            return text
        first = self.members[0]
        pieces = _PLACEHOLDER.split(first.text)
        out = [pieces[0]]
        for slot, (kind, value) in enumerate(first.values):
            seen = [member.values[slot][1] for member in self.members if slot < len(member.values)]
            if all(other == value for other in seen):
                out.append(value)
            elif kind == "N" and (numbers := _numbers(seen)) is not None:
                low, high = min(numbers), max(numbers)
                out.append(f"<{seen[numbers.index(low)]}..{seen[numbers.index(high)]}>")
            else:
                out.append(f"<{kind}>")
            out.append(pieces[slot + 1] if slot + 1 < len(pieces) else "")
        return "".join(out)


_PLACEHOLDER: Final = re.compile(r"<(?:TIME|PATH|IP|HOST|HEX|N)>")


def _numbers(values: list[str]) -> list[float] | None:
    try:
        return [float(value) for value in values]
    except ValueError:
        return None


def _hashable(value: Any) -> Any:
    """Data can put an object or a list where a string belongs; compare those by their text."""
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _key(doc: Document, line: Template) -> tuple[Any, ...]:
    return tuple(_hashable(value) for value in (get_field(doc, "log.level"), line.text, doc.get("job"), doc.get("step")))


def dedupe(docs: Iterable[Document], window: float = 2.0) -> Iterator[Group]:
    """Collapse the same level+template+step (same job) from *different* ranks within ``window`` s.

    Lines come out in the order of their first event; a rank repeating itself starts a new line.
    """
    window_ms = int(window * 1000)
    queue: deque[tuple[int, tuple[Any, ...], Group]] = deque()
    open_groups: dict[tuple[Any, ...], Group] = {}
    for doc in docs:
        millis = timestamp_millis(doc.get("@timestamp")) or 0
        while queue and queue[0][0] < millis - window_ms:
            _, old, group = queue.popleft()
            if open_groups.get(old) is group:
                del open_groups[old]
            yield group
        line = canonical(one_line(doc))
        key = _key(doc, line)
        rank = doc.get("rank")
        existing = open_groups.get(key)
        if existing is not None and isinstance(rank, int) and rank not in existing.ranks:
            existing.ranks.add(rank)
            existing.count += 1
            existing.members.append(line)
            continue
        group = Group(doc, {rank} if isinstance(rank, int) else set(), members=[line])
        open_groups[key] = group
        queue.append((millis, key, group))
    for _, _, group in queue:
        yield group


def json_line(value: Any) -> bytes:
    """``value`` as one NDJSON line; what orjson refuses (nesting deeper than 255, integers
    beyond 64 bits) goes through the standard library, and what nothing can print becomes
    a line that says so instead of stopping the command."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_APPEND_NEWLINE)
    except (orjson.JSONEncodeError, TypeError):
        pass
    import json

    try:
        return (json.dumps(value, default=str, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")
    except (RecursionError, ValueError, TypeError) as error:
        return orjson.dumps({"message": f"(document not printable as JSON: {error})"}, option=orjson.OPT_APPEND_NEWLINE)


#: The zone times are printed in: UTC (``--utc``, the default) or this machine's (``--local``).
_display = {"local": False}


def show_local_time(local: bool) -> None:
    """``--local``: print this machine's time with its offset; ``--utc`` (default): UTC, marked ``Z``."""
    _display["local"] = local


def format_time(value: object) -> str:
    """``2026-11-29 15:47:55.123Z`` (UTC, marked) from an ``@timestamp``, or local time with its offset
    (``+01:00``) after ``--local``; ``-`` when there is none."""
    millis = timestamp_millis(value)
    if millis is None:
        return "-"
    seconds, rest = divmod(millis, 1000)
    try:
        if not _display["local"]:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{rest:03d}Z"
        local = time.localtime(seconds)
        offset = time.strftime("%z", local)
        return time.strftime("%Y-%m-%d %H:%M:%S", local) + f".{rest:03d}{offset[:3]}:{offset[3:]}"
    except (OverflowError, OSError, ValueError):  # a year no calendar function takes
        return "-"


class Printer:
    """Writes events to stdout as text lines (optionally coloured) or NDJSON."""

    def __init__(self, *, as_json: bool, color: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.as_json = as_json
        #: Put each event's job after its time: set when the events come from several jobs (a root of many).
        self.show_job = False
        auto = self.stream.isatty() and not os.environ.get("NO_COLOR")  # https://no-color.org
        self.color = (auto if color is None else color) and not as_json
        #: Logged text is data: on a terminal its control characters are shown, not obeyed.
        self.escape = self.color or self.stream.isatty()
        self._console: Any = None
        # NDJSON goes to the binary buffer when there is one (orjson gives bytes).
        self._binary = getattr(self.stream, "buffer", None) if as_json else None
        if self.color:
            from rich.console import Console

            # force_terminal: --color on a pipe still colours (and overrides NO_COLOR, like jc's -C).
            self._console = Console(file=self.stream, highlight=False, soft_wrap=True, force_terminal=True, no_color=False)

    def json(self, value: Any) -> None:
        """One JSON document per line (bytes straight to the binary stream when there is one)."""
        line = json_line(value)
        if self._binary is not None:
            self._binary.write(line)
        else:
            self.stream.write(line.decode())

    def flush(self) -> None:
        """Push buffered output (before a --follow wait, and at the end)."""
        if self._binary is not None:
            self._binary.flush()
        self.stream.flush()

    def text(self, line: str, style: str | None = None) -> None:
        """A free-form line (styled only when colour is on)."""
        if self.escape:
            line = escape_controls(line)
        if self._console is not None and self.color:
            self._console.print(line, style=style, markup=False)
        else:
            self.stream.write(line + "\n")

    def event(self, group: Group) -> None:
        """One event line: time, rank(s), level, step, message (+ error type)."""
        doc = group.doc
        if self.as_json:
            self.json(doc)
            return
        ranks = sorted(group.ranks)
        who = f"ranks {format_ranks(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}" if ranks else "rank ?"
        level = str(get_field(doc, "log.level") or "-")
        step = doc.get("step")
        message = group.message()
        parts = [format_time(doc.get("@timestamp")), f"{who:<9}", f"{level.upper():<8}", f"step {step}" if step is not None else "-", message]
        styles: tuple[str | None, ...] = ("cyan", "magenta", _LEVEL_STYLES.get(level, ""), "blue", None)
        if self.show_job:
            parts.insert(1, f"{str(doc.get('job') or '-')[:24]:<24}")
            styles = ("cyan", "yellow", *styles[1:])
        if self.escape:
            parts = [escape_controls(part) for part in parts]
        if self._console is None or not self.color:
            self.stream.write("  ".join(parts) + "\n")
            return
        from rich.text import Text

        line = Text()
        for part, style in zip(parts, styles, strict=True):
            line.append(part, style=style)
            line.append("  ")
        self._console.print(line)

"""Documents as the pipeline stores them: nested JSON objects keyed by the contract's names.

Our per-rank files hold flat ECS-logging style keys (``"log.level": "info"``), which
Filebeat's ``expand_keys`` and :func:`expand` turn into nested objects; Logstash,
Elasticsearch, ``hvdlog parse`` and every CLI command work on the nested form.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import Any, Final

from hvdlog.fields import UNTIMED
from hvdlog.layout import console_job
from hvdlog.types import Document

__all__ = [
    "Document", "as_int", "as_read", "expand", "flatten", "floor_millis", "get_field", "in_place", "job_of", "rank_of", "read_time", "set_field",
    "sort_key", "timestamp_millis",
]

_MISSING = object()



def as_int(value: object) -> int | None:
    """``value`` when it is an integer, else None: a bool is no integer here (JSON's ``true`` in a
    ``rank`` or ``step`` field is data, not rank 1)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def rank_of(doc: Mapping[str, Any]) -> int | None:
    """The document's ``rank`` when it is an integer (:func:`as_int`), else None."""
    return as_int(doc.get("rank"))


def read_time(doc: Document, at: str) -> Document:
    """``doc`` to store: with its own ``@timestamp``, as it is; without, ``at`` and :data:`UNTIMED`."""
    if "@timestamp" in doc:
        return doc
    stored = {**doc, "@timestamp": at, "hvdlog": dict(doc.get("hvdlog") or {})}  # a copy: set_field writes into it
    set_field(stored, UNTIMED, True)
    return stored


def as_read(doc: Document) -> Document:
    """A stored document as it was parsed: a read time (:data:`UNTIMED`) is no time of the line's,
    so the readers over Elasticsearch see the line untimed, as over the files."""
    if get_field(doc, UNTIMED) not in (True, "true"):
        return doc
    group, mark = UNTIMED.split(".")
    parsed = {key: value for key, value in doc.items() if key not in ("@timestamp", group)}
    rest = {key: value for key, value in (doc.get(group) or {}).items() if key != mark}
    return {**parsed, group: rest} if rest else parsed


def expand(flat: Mapping[str, Any]) -> Document:
    """``{"log.level": "x"}`` -> ``{"log": {"level": "x"}}``; ``@timestamp`` stays as is."""
    doc: Document = {}
    for key, value in flat.items():
        set_field(doc, key, value)
    return doc


def set_field(doc: Document, dotted: str, value: Any) -> None:
    """Set a dotted field in a nested document, creating objects on the way."""
    *parents, leaf = dotted.split(".")
    node = doc
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    if isinstance(value, Mapping) and isinstance(node.get(leaf), dict):
        for key, sub in value.items():
            set_field(node[leaf], key, sub)
    else:
        node[leaf] = value


@functools.lru_cache(maxsize=1024)
def _steps(dotted: str) -> tuple[tuple[str, str], ...]:
    """``a.b.c`` -> ``(("a", "b.c"), ("b", "c"))``: each object to descend into, and the dotted
    rest a mixed document may hold as one key there (split once per name, not once per read)."""
    parts = dotted.split(".")
    return tuple((part, ".".join(parts[index + 1:])) for index, part in enumerate(parts))


def get_field(doc: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """Read a dotted field from a nested (or flat, or mixed) document."""
    if dotted in doc:
        return doc[dotted]
    node: Any = doc
    for part, rest in _steps(dotted):
        node = node.get(part, _MISSING)
        if node is _MISSING:
            return default
        if not rest:
            return node
        if type(node) is not dict and not isinstance(node, Mapping):  # type(): the hot path skips the ABC check
            return default
        if rest in node:
            return node[rest]
    return node


def flatten(doc: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(dotted_name, leaf_value)`` pairs; the ``extra`` catch-all is one leaf."""
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name != "extra":
            yield from flatten(value, f"{name}.")
        else:
            yield name, value


# --- where a document sits: its time, its job, its place in a merged stream ---------------------

_CANONICAL: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\Z")


@functools.lru_cache(maxsize=4096)
def _minute_millis(prefix: str) -> int:
    """Epoch ms of a ``YYYY-MM-DDTHH:MM`` UTC prefix (cached: a log spans few minutes)."""
    return int(datetime.fromisoformat(prefix).replace(tzinfo=timezone.utc).timestamp()) * 1000


#: Epoch ms of the ``YYYY-MM-DDTHH:MM:SS`` prefixes of canonical timestamps already seen
#: (a log spans few seconds per event): the hot path of :func:`timestamp_millis`.
_SECOND_MILLIS: dict[str, int] = {}
_MAX_SECONDS: Final = 65536


def timestamp_millis(value: object) -> int | None:
    """Milliseconds since the epoch of an ``@timestamp`` value (ISO string or epoch millis)."""
    if type(value) is str:
        # The hot path: a canonical time whose second was seen before. Same result as
        # below: the prefix passed _CANONICAL then, and the rest is checked as it would be.
        second = _SECOND_MILLIS.get(value[:19])
        if second is not None:
            rest = value[19:]
            if rest == "Z":
                return second
            digits = rest[1:-1]
            if rest[:1] == "." and rest[-1:] == "Z" and digits.isdecimal():  # isdecimal: what \d matches
                return second + int(digits[:3].ljust(3, "0"))
    return _timestamp_millis(value)


def _timestamp_millis(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    try:
        if _CANONICAL.match(value):  # our writer's form: 2026-11-29T15:47:55.123456Z
            second = _minute_millis(value[:16]) + int(value[17:19]) * 1000
            if len(_SECOND_MILLIS) >= _MAX_SECONDS:
                _SECOND_MILLIS.clear()
            _SECOND_MILLIS[value[:19]] = second
            return second + int(value[20:-1][:3].ljust(3, "0"))
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return floor_millis(parsed)
    except (ValueError, OverflowError):  # not a date, or one no calendar holds (month 13, year 0)
        return None


def floor_millis(parsed: datetime) -> int:
    """Truncate to the millisecond exactly like Elasticsearch's ``date`` type does."""
    whole = parsed.replace(microsecond=0)
    return int(whole.timestamp()) * 1000 + parsed.microsecond // 1000


def job_of(doc: Mapping[str, Any]) -> str | None:
    """Which job a document belongs to: ``job``, else its ``--output-filename`` tree, else its file."""
    if job := doc.get("job"):
        return str(job)
    path = get_field(doc, "log.file.path")
    return console_job(path) if isinstance(path, str) else None


#: The sort key of every document without a time.
_NO_TIME_KEY: Final = (-(2**62), -1)


def sort_key(doc: Mapping[str, Any]) -> tuple[int, int]:
    """The order every source yields: ``@timestamp`` (ms), then ``rank``; untimed documents first.

    Untimed documents (a console without timestamps, Horovod before 0.16) all share one key,
    so a stable sort keeps them in the order they were read: their position is the only
    order they have (files keep it exactly; Elasticsearch returns them by rank, then in
    ingestion order).
    """
    millis = timestamp_millis(doc.get("@timestamp"))
    if millis is None:
        return _NO_TIME_KEY
    rank = doc.get("rank")
    return (millis, rank if isinstance(rank, int) else -1)


def in_place(docs: Iterable[Mapping[str, Any]]) -> list[Any]:
    """``docs`` sorted by :func:`sort_key`, but a document without a time of its own right after the
    timed one read before it in the same file: its position is its only order (a TensorFlow line's
    time must not put the untimed Open MPI box printed after it first). Untimed documents before any
    timed one of their file keep the untimed key; the sort is stable."""
    last: dict[Any, tuple[int, int]] = {}
    keyed = []
    for doc in docs:
        key = sort_key(doc)
        path = get_field(doc, "log.file.path")
        if key == _NO_TIME_KEY:
            key = last.get(path, key)
        else:
            last[path] = key
        keyed.append((key, doc))
    keyed.sort(key=lambda item: item[0])  # stable: equal keys keep the order read
    return [doc for _, doc in keyed]

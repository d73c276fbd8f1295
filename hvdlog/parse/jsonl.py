"""Our own JSON event lines -> documents, fast: they are most of the volume.

Lines hold flat dotted ECS-logging keys. Turning them into nested documents key by key
costs more than decoding them, so for each distinct key set (a file has a handful) a
builder is generated once that lays out the nested dict in one expression.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from hvdlog.documents import Document, expand

__all__ = ["APP_DATASET", "decode_event", "nest", "to_document"]

#: Dataset of our JSON events when a line does not say.
APP_DATASET: Final = "horovod.app"

Builder = Callable[[Mapping[str, Any]], Document]

_BUILDERS: dict[tuple[str, ...], Builder] = {}
_MAX_BUILDERS: Final = 1024


def _tree(keys: tuple[str, ...]) -> dict[str, Any] | None:
    """Nested layout of dotted keys; None when a key is both a leaf and a parent."""
    tree: dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.split(".") if key != "@timestamp" else [key]
        node = tree
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        if leaf in node:
            return None
        node[leaf] = key
    return tree


def _source(tree: dict[str, Any]) -> str:
    items = ", ".join(
        f"{name!r}: {_source(value) if isinstance(value, dict) else f'd[{value!r}]'}" for name, value in tree.items()
    )
    return "{" + items + "}"


def _builder(keys: tuple[str, ...]) -> Builder:
    builder = _BUILDERS.get(keys)
    if builder is None:
        tree = _tree(keys)
        # A key that is both `a` and `a.b` (or an `extra` object beside `extra.x`) merges
        # like documents.expand does; rare, so the slow general path is fine.
        if tree is None or any(isinstance(tree.get(k), dict) and k in keys for k in tree):
            builder = expand
        else:
            builder = eval(f"lambda d: {_source(tree)}")  # noqa: S307 - source built from repr() of keys
        if len(_BUILDERS) >= _MAX_BUILDERS:
            _BUILDERS.clear()
        _BUILDERS[keys] = builder
    return builder


def nest(flat: Mapping[str, Any]) -> Document:
    """Flat dotted keys -> nested document (same result as documents.expand, faster)."""
    return _builder(tuple(flat))(flat)


def to_document(flat: Mapping[str, Any]) -> Document:
    """Nested document from one decoded event; ``event.dataset`` defaults to horovod.app."""
    doc = _builder(tuple(flat))(flat)
    event = doc.get("event")
    if not isinstance(event, dict):
        doc["event"] = {"dataset": APP_DATASET}
    elif "dataset" not in event:
        event["dataset"] = APP_DATASET
    return doc


def decode_event(line: str | bytes) -> Document | None:
    """The document of one JSON event line, or None when the line is not a JSON object."""
    try:
        flat = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return to_document(flat) if isinstance(flat, dict) else None

"""Our own JSON event lines -> documents, fast: they are most of the volume.

Lines hold flat dotted ECS-logging keys. Turning them into nested documents key by key
costs more than decoding them, so for each distinct key set (a file has a handful) a
builder is generated once that lays out the nested dict in one expression.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from hvdlog.documents import Document, expand, set_field
from hvdlog.fields import APP_DATASET, EXTRA

__all__ = [
    "APP_DATASET", "MAX_VALUE_DEPTH", "TOO_DEEP", "TooDeepError", "bound_depth", "decode_event", "event_builder", "event_builders",
    "loads_replacing", "nest", "to_document",
]

#: Dataset of our JSON events when a line does not say.

Builder = Callable[[Mapping[str, Any], Any], Document]

#: (event, with_path) -> key set -> builder: one lookup per line, keyed by the keys alone.
_BUILDERS: dict[tuple[bool, bool], dict[tuple[str, ...], Builder]] = {
    (event, with_path): {} for event in (False, True) for with_path in (False, True)
}
_MAX_BUILDERS: Final = 1024
#: Dotted levels a key may have: Elasticsearch's default ``index.mapping.depth.limit`` (20)
#: would refuse deeper documents, and generated builders would not compile.
MAX_KEY_DEPTH: Final = 20
_PATH: Final = "log.file.path"


def _tree(leaves: dict[str, str]) -> dict[str, Any] | None:
    """Nested layout of dotted keys (leaf = its value's source code); None when a key is
    both a leaf and a parent."""
    tree: dict[str, Any] = {}
    for key, code in leaves.items():
        *parents, leaf = key.split(".") if key != "@timestamp" else [key]
        node = tree
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return None
            node = child
        if leaf in node:
            return None
        node[leaf] = code
    return tree


def _source(tree: dict[str, Any]) -> str:
    items = ", ".join(f"{name!r}: {_source(value) if isinstance(value, dict) else value}" for name, value in tree.items())
    return "{" + items + "}"


def _slow_builder(event: bool, with_path: bool) -> Builder:
    def build(flat: Mapping[str, Any], path: Any) -> Document:
        doc = expand(flat)
        if event:
            given = doc.setdefault("event", {})
            if not isinstance(given, dict):  # "event": 5 where the contract has an object: kept under extra
                set_field(doc, f"{EXTRA}.event", given)
                given = doc["event"] = {}
            given.setdefault("dataset", APP_DATASET)
        if with_path:
            set_field(doc, _PATH, path)
        return doc

    return build


class TooDeepError(ValueError):
    """A key with more dotted levels than any store takes: the line is a parse failure."""


def _too_deep(flat: Mapping[str, Any], path: Any) -> Document:
    raise TooDeepError(f"a key has more than {MAX_KEY_DEPTH} dotted levels")


def _compile(count: int, source: str) -> Builder:
    """``def build(d, p)`` returning ``source``, with the ``count`` values of ``d`` as v0, v1..."""
    unpack = "".join(f"v{index}, " for index in range(count))
    code = f"def build(d, p):\n    {unpack}= d.values()\n    return {source}\n" if count else f"def build(d, p):\n    return {source}\n"
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - source built from repr() of keys
    builder: Builder = namespace["build"]
    return builder


def _builder(keys: tuple[str, ...], *, event: bool, with_path: bool) -> Builder:
    """A function laying out documents of this key set in one expression, made once."""
    builders = _BUILDERS[event, with_path]
    builder = builders.get(keys)
    if builder is None and any(key.count(".") >= MAX_KEY_DEPTH for key in keys):
        builder = builders[keys] = _too_deep
    if builder is None:
        # Values are read by unpacking d.values() into locals (the key tuple fixes their
        # order): cheaper than one d[key] lookup per key.
        leaves = {key: f"v{index}" for index, key in enumerate(keys)}
        if event and "event.dataset" not in leaves:
            leaves["event.dataset"] = repr(APP_DATASET)
        if with_path:
            leaves[_PATH] = "p"
        tree = _tree(leaves)
        # A key that is both `a` and `a.b` (or an object beside a dotted key under it)
        # merges like documents.expand does; rare, so the general path is fine.
        builder = _slow_builder(event, with_path) if tree is None else _compile(len(keys), _source(tree))
        if len(builders) >= _MAX_BUILDERS:
            builders.clear()
        builders[keys] = builder
    return builder


def nest(flat: Mapping[str, Any]) -> Document:
    """Flat dotted keys -> nested document (same result as documents.expand, faster)."""
    return _builder(tuple(flat), event=False, with_path=False)(flat, None)


_WITH_PATH: Final = _BUILDERS[True, True]


def event_builders(*, with_path: bool) -> Mapping[tuple[str, ...], Builder]:
    """The made builders of events, by key set (the same mapping for the process's life):
    a caller decoding many lines looks its keys up here first, then :func:`event_builder`."""
    return _BUILDERS[True, with_path]


def event_builder(keys: tuple[str, ...], *, with_path: bool) -> Builder:
    """``(flat, path) -> document`` for decoded events with these keys, in this order
    (what :func:`to_document` uses); raises TooDeepError when called on too deep keys."""
    return _builder(keys, event=True, with_path=with_path)


def to_document(flat: Mapping[str, Any], path: str | None = None) -> Document:
    """Nested document from one decoded event; ``event.dataset`` defaults to horovod.app,
    ``log.file.path`` is ``path`` when given."""
    keys = tuple(flat)
    builder = _WITH_PATH.get(keys) if path is not None else None  # the hot path: one lookup
    if builder is None:
        builder = _builder(keys, event=True, with_path=path is not None)
    return builder(flat, path)


def loads_replacing(raw: bytes | str) -> Any:
    """A line orjson refused, decoded again with each invalid UTF-8 byte replaced (U+FFFD):
    one bad byte in a message must not turn an error event into a raw info line. None when
    that does not help (the line is not JSON)."""
    if not isinstance(raw, bytes):
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
    else:
        if "\\u" not in text:
            return None  # valid UTF-8 and no escape: the JSON itself is broken
    # A lone surrogate escape (``\ud800``, from a foreign writer) is valid JSON orjson refuses: U+FFFD, as for a bad byte.
    text = _LONE_SURROGATE.sub(r"\\ufffd", text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


#: A high surrogate escape without its low half after it, or a low one without its high half before it.
_LONE_SURROGATE: Final = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)

#: Levels a value may nest (objects and arrays): Elasticsearch's ``index.mapping.depth.limit``
#: and a flattened field's ``depth_limit`` (20 both) refuse deeper ones, and a reader that
#: recurses (pickle between processes, msgspec) would die on a line nested a thousand deep.
MAX_VALUE_DEPTH: Final = 20
#: What takes the place of a value nested deeper.
TOO_DEEP: Final = f"[hvdlog: nested deeper than {MAX_VALUE_DEPTH} levels, cut]"


def bound_depth(flat: dict[str, Any]) -> bool:
    """Replace, in place, every value nested deeper than :data:`MAX_VALUE_DEPTH` with
    :data:`TOO_DEEP` (no recursion: the line may be nested thousands deep); True if one was."""
    cut = False
    stack: list[tuple[Any, int]] = [(flat, 1)]
    while stack:
        node, depth = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(value, (dict, list)):
                if depth >= MAX_VALUE_DEPTH:
                    node[key] = TOO_DEEP
                    cut = True
                else:
                    stack.append((value, depth + 1))
    return cut


def decode_event(line: str | bytes, path: str | None = None) -> Document | None:
    """The document of one JSON event line, or None when the line is not a JSON object."""
    try:
        try:
            flat = orjson.loads(line)
        except orjson.JSONDecodeError:
            flat = loads_replacing(line)
        if type(flat) is not dict:
            return None
        nested = line.count(b"{") + line.count(b"[") if isinstance(line, bytes) else line.count("{") + line.count("[")
        if nested > MAX_VALUE_DEPTH:
            bound_depth(flat)
        return to_document(flat, path)
    except TooDeepError:
        return None

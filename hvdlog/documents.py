"""Documents as the pipeline stores them: nested JSON objects keyed by the contract's names.

Our per-rank files hold flat ECS-logging style keys (``"log.level": "info"``), which
Filebeat's ``expand_keys`` and :func:`expand` turn into nested objects; Logstash,
Elasticsearch, ``hvdlog parse`` and every CLI command work on the nested form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["Document", "expand", "flatten", "get_field", "set_field"]

Document = dict[str, Any]

_MISSING = object()


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


def get_field(doc: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """Read a dotted field from a nested (or flat, or mixed) document."""
    if dotted in doc:
        return doc[dotted]
    node: Any = doc
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if not isinstance(node, Mapping):
            return default
        rest = ".".join(parts[index:])
        if rest in node:
            return node[rest]
        node = node.get(part, _MISSING)
        if node is _MISSING:
            return default
    return node


def flatten(doc: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yield ``(dotted_name, leaf_value)`` pairs; the ``extra`` catch-all is one leaf."""
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name != "extra":
            yield from flatten(value, f"{name}.")
        else:
            yield name, value

"""The general render path's serialisation: whatever the event holds, one valid JSON line.

The spliced hot path (:mod:`hvdlog.runtime.renderer`) hands over to these helpers whenever
it cannot splice: values orjson refuses (surrogates from ``os.listdir`` of undecodable
names, integers beyond 64 bits, objects whose ``str()`` fails, nesting too deep) are
cleaned and rendered again; a line over :data:`MAX_LINE_BYTES` has its longest strings cut
(tag ``_hvdlog_truncated``) so it stays one shippable line; as a last resort
:func:`failure_line` says what could not be rendered. Kept apart from the hot path so
each module has one job: speed there, safety here.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Any

import orjson

from hvdlog.fields import EXTRA

__all__ = ["MAX_LINE_BYTES", "TRUNCATED_TAG", "default", "dumps_event", "exception_fields", "failure_line", "sort_fields"]

Event = dict[str, Any]

# OPT_NON_STR_KEYS makes every dump ~40 % slower: used only when the fast dump refuses.
_FORGIVING = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY

#: Longest line we write (Filebeat's own limit is 10 MiB); longer events have strings cut.
MAX_LINE_BYTES = 1 << 20
_CUT_TO = 64 * 1024
_MAX_DEPTH = 64
TRUNCATED_TAG = "_hvdlog_truncated"


def exception_fields(exc_info: Any) -> Event:
    """``error.*`` fields from ``exc_info`` (True, an exception, or a sys.exc_info() tuple)."""
    if exc_info is True:
        exc_info = sys.exc_info()
    elif isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    if not isinstance(exc_info, tuple) or exc_info[0] is None:
        return {}
    exc_type, exc, tb = exc_info
    return {
        "error.type": exc_type.__qualname__ if exc_type.__module__ == "builtins" else f"{exc_type.__module__}.{exc_type.__qualname__}",
        "error.message": str(exc),
        "error.stack_trace": "".join(traceback.format_exception(exc_type, exc, tb)),
    }


def sort_fields(event: Event, fields: Event, undeclared: set[str]) -> None:
    """Contract fields to the top level, ``exc_info`` to ``error.*``, the rest to ``extra``."""
    extra: Event = dict(event.pop(EXTRA, None) or {})  # bound extras: never mutate the context
    for key, value in fields.items():
        if key not in undeclared:
            event[key] = value
        elif key == "exc_info":
            if value:
                event.update(exception_fields(value))
        else:
            extra[key] = value
    if extra:
        event[EXTRA] = extra


def default(value: Any) -> Any:
    """orjson fallback: tensors and numpy scalars become numbers or lists, the rest str()."""
    item = getattr(value, "tolist", None)
    if item is not None:
        with contextlib.suppress(Exception):  # any failure: fall back to str()
            return item()
    try:
        return _text(str(value))
    except Exception:  # noqa: BLE001 - a __str__ that raises must not lose the event
        return f"<unrepresentable {type(value).__qualname__}>"


def _text(text: str) -> str:
    """Valid UTF-8 text: undecodable bytes carried as surrogates are shown as ``\\xNN``."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # lone surrogates that are not escaped bytes
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clean(value: Any, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value`` for the slow path (only after orjson refused)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 64) else str(value)
    if depth >= _MAX_DEPTH:
        return "<nested too deep>"
    if isinstance(value, dict):
        return {_text(key) if isinstance(key, str) else default(key): _clean(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(item, depth + 1) for item in value]
    return _clean(default(value), depth + 1) if not isinstance(value, (bytes, bytearray)) else _text(bytes(value).decode("utf-8", "surrogateescape"))


def _cut(value: Any) -> Any:
    """Strings longer than _CUT_TO shortened, with a note of how much was cut."""
    if isinstance(value, str) and len(value) > _CUT_TO:
        return f"{value[:_CUT_TO]}... [hvdlog: {len(value) - _CUT_TO} characters cut]"
    if isinstance(value, dict):
        return {key: _cut(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut(item) for item in value]
    return value


def dumps_event(event: Event) -> bytes:
    """One JSON line for ``event``: orjson first, the cleaned copy when it refuses, strings
    cut when the line is over :data:`MAX_LINE_BYTES`."""
    try:
        line = orjson.dumps(event, default=default, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # e.g. non-str dict keys, surrogates, huge ints: clean, then the forgiving options
        line = orjson.dumps(_clean(event), default=default, option=_FORGIVING)
    if len(line) > MAX_LINE_BYTES:
        shortened = _cut(orjson.loads(line))
        shortened["tags"] = [*(shortened.get("tags") or []), TRUNCATED_TAG]
        line = orjson.dumps(shortened, option=orjson.OPT_APPEND_NEWLINE)
    return line


def failure_line(head: Event, static: Event, exc: BaseException) -> bytes:
    """The minimal event written when an event could not be rendered: ``head`` (timestamp,
    level, message), the static fields cleaned, and what went wrong."""
    message = head.get("message")
    text = _text(message) if isinstance(message, str) else default(message)
    event = {
        **head,
        "message": text[:_CUT_TO],
        **_clean(static),
        "error.type": type(exc).__qualname__,
        "error.message": f"hvdlog could not render this event: {default(exc)}",
        "tags": ["_hvdlog_render_failure"],
    }
    return orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)

"""The one processor of our chain: event dict -> one ECS JSON line (bytes).

A lean chain is what keeps an enabled call near the cost of ``orjson.dumps`` + one
``write``: this class adds the timestamp, level, the process's static fields and the
bound step context, sorts keys into contract fields and the ``extra`` catch-all,
formats exceptions, redacts secrets and renders with orjson — all in one call.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import orjson

from hvdlog import context
from hvdlog.fields import EXTRA, FIELDS_BY_NAME
from hvdlog.secrets import Redactor

__all__ = ["METHOD_LEVELS", "EcsJsonRenderer", "UtcClock", "exception_fields", "level_name"]

Event = dict[str, Any]

_KNOWN = frozenset(FIELDS_BY_NAME)

#: structlog method names and stdlib level names -> contract level names.
METHOD_LEVELS: dict[str, str] = {
    "trace": "trace",
    "debug": "debug",
    "info": "info",
    "msg": "info",
    "log": "info",
    "warning": "warning",
    "warn": "warning",
    "error": "error",
    "exception": "error",
    "critical": "critical",
    "fatal": "critical",
}

# OPT_NON_STR_KEYS makes every dump ~40 % slower: used only when the fast dump refuses.
_FORGIVING = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def level_name(method_or_level: str) -> str:
    """Contract level for a structlog method name or a stdlib level name."""
    return METHOD_LEVELS.get(method_or_level.lower(), "info")


class UtcClock:
    """ISO 8601 UTC timestamps with microseconds; the date part is formatted once a second."""

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self) -> str:
        micros = int(time.time() * 1_000_000)
        second = micros // 1_000_000
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        return self._prefix + _THOUSANDS[micros // 1000 % 1000] + _THOUSANDS[micros % 1000] + "Z"


_THOUSANDS = [f"{n:03d}" for n in range(1000)]


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


def _sort_fields(event: Event, fields: Event, undeclared: set[str]) -> None:
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


def _default(value: Any) -> Any:
    """orjson fallback: tensors and numpy scalars become numbers or lists, the rest str()."""
    item = getattr(value, "tolist", None)
    if item is not None:
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)


class EcsJsonRenderer:
    """structlog processor rendering the final line; configured once, no branching per event.

    Args:
        static: fields fixed for the process (host, pid, job, dataset, rank info).
        redactor: secret replacement applied to the rendered bytes.
        console: optional sink for a human line (rank 0's terminal), given the event.
    """

    __slots__ = ("clock", "console", "redactor", "static")

    def __init__(self, static: Event, redactor: Redactor | None = None, console: Callable[[Event], None] | None = None) -> None:
        self.clock = UtcClock()
        self.reset(static, redactor, console)

    def reset(self, static: Event, redactor: Redactor | None = None, console: Callable[[Event], None] | None = None) -> None:
        """Re-point in place, so loggers structlog cached keep using this renderer."""
        self.static = static
        self.redactor = redactor if redactor else None
        self.console = console

    def render(self, level: str, message: Any, fields: Event) -> bytes:
        """Render one event; ``fields`` may hold contract fields, extras and ``exc_info``."""
        event: Event = {
            "@timestamp": self.clock(),
            "log.level": level,
            "message": message if message.__class__ is str else str(message),
            **self.static,
        }
        bound = context._CONTEXT.get()  # noqa: SLF001 - one lookup on the hot path; pre-split at bind time
        if bound:
            event.update(bound)
        if fields:
            undeclared = fields.keys() - _KNOWN
            if undeclared or EXTRA in event:
                _sort_fields(event, fields, undeclared)
            else:  # the common case: only contract fields, one C-level update
                event.update(fields)
        if self.console is not None:
            self.console(event)
        try:
            line = orjson.dumps(event, default=_default, option=orjson.OPT_APPEND_NEWLINE)
        except TypeError:  # e.g. non-str dict keys in an extra: the slower, forgiving options
            line = orjson.dumps(event, default=_default, option=_FORGIVING)
        if self.redactor is not None:
            line = self.redactor(line)
        return line

    def __call__(self, logger: Any, method_name: str, event_dict: Event) -> bytes:
        """structlog entry point: the returned bytes go to the writer's level method."""
        message = event_dict.pop("event", "")
        return self.render(METHOD_LEVELS.get(method_name, "info"), message, event_dict)

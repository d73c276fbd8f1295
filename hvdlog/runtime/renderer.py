"""The one processor of our chain: event dict -> one ECS JSON line (bytes).

A lean chain is what keeps an enabled call near the cost of ``orjson.dumps`` + one
``write``: this class adds the timestamp, level, the process's static fields and the
bound step context, sorts keys into contract fields and the ``extra`` catch-all,
formats exceptions, redacts secrets and renders with orjson — all in one call.

The hot path (:meth:`EcsJsonRenderer.render`) splices bytes instead of serialising the
whole event each time: the static fields are rendered (and checked for secrets) once, at
configuration; the bound step context once per binding; the timestamp's date part once a
second; per event only the message (when new) and the call's own fields go through orjson,
and only those bytes are searched for secrets. The line is byte for byte what serialising the whole event dict gives
(:meth:`EcsJsonRenderer.render_event`, the general path, still used for whatever the splice
does not cover: keys that collide with static fields — those go under ``extra``, the
reserved fields are never overwritten —, values orjson refuses, over-long lines).

Rendering never raises into the training code (:meth:`EcsJsonRenderer.render_safely`); the
general path's serialisation — cleaning what orjson refuses, cutting over-long lines, the
last-resort event — lives in :mod:`hvdlog.runtime.safe_json`, and both paths read one clock
(:mod:`hvdlog.runtime.clock`).

``render`` is deliberately one long function: it is the measured hot path
(``bench/bench_logging.py``), and every call or attribute lookup split out of it shows up
in the per-event cost. Everything it does not need per event is outside it.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from time import time_ns as _now_ns
from typing import Any

import orjson

from hvdlog.fields import EXTRA, FIELDS_BY_NAME
from hvdlog.runtime import context
from hvdlog.runtime.clock import HEAD as _HEAD
from hvdlog.runtime.clock import THOUSANDS_B as _THOUSANDS_B
from hvdlog.runtime.clock import UtcClock
from hvdlog.runtime.safe_json import MAX_LINE_BYTES, default, dumps_event, failure_line, sort_fields
from hvdlog.runtime.secrets import Redactor

__all__ = ["METHOD_LEVELS", "EcsJsonRenderer", "level_name"]

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

def level_name(method_or_level: str) -> str:
    """Contract level for a structlog method name or a stdlib level name."""
    return METHOD_LEVELS.get(method_or_level.lower(), "info")


_HEAD_KEYS = ("@timestamp", "log.level", "message")
#: Where the timestamp's text sits in a spliced line: after _HEAD, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
_STAMP = slice(len(_HEAD), len(_HEAD) + len("2026-01-01T00:00:00.000000Z"))
#: What follows the timestamp's digits, up to the message's value, per level.
_LEVEL_JSON = {level: b'Z","log.level":' + orjson.dumps(level) + b',"message":' for level in {*METHOD_LEVELS.values(), "trace"}}
_UNPLANNED = object()
_EMPTY: Event = {}
_SORT = object()
_UNBOUND: Any = object()
#: (the bound context, static + bound fields pre-rendered or None, plans for that binding's keys)
_Binding = tuple[Any, "bytes | None", dict[tuple[str, ...], Any]]
_MAX_REMEMBERED = 512
_MAX_REMEMBERED_MESSAGE = 256  # characters; longer messages are serialised every time
_bound = context._CONTEXT.get  # the hot path reads the bound context directly
_dumps = orjson.dumps
_APPEND_NEWLINE = orjson.OPT_APPEND_NEWLINE


def _layout(keys: Sequence[str], undeclared: Sequence[str]) -> Callable[[Event], Event]:
    """A function moving the undeclared keys of a fields dict (of this key set) under
    ``extra``, in place: ``{contract fields in call order..., "extra": {the others...}}``, what
    sort_fields does without a loop per event. Keys are written with repr(), so any string
    is a literal, never code."""
    extra = ", ".join(f"{key!r}: f.pop({key!r})" for key in undeclared)
    namespace: dict[str, Any] = {}
    exec(f"def layout(f):\n    f[{EXTRA!r}] = {{{extra}}}\n    return f\n", namespace)  # noqa: S102 - source built from repr()s only
    layout: Callable[[Event], Event] = namespace["layout"]
    return layout


class EcsJsonRenderer:
    """structlog processor rendering the final line; configured once, no branching per event.

    Args:
        static: fields fixed for the process (host, pid, job, dataset, rank info).
        redactor: secret replacement applied to the rendered bytes.
        console: optional sink for a human line (rank 0's terminal), given the event (on the
            spliced path, only what a human line shows: timestamp, level, message, rank, step).
    """

    __slots__ = (
        "_binding", "_bindings", "_messages", "_present", "_secret_messages", "_static_json", "_static_keys",
        "clock", "console", "redactor", "static",
    )

    def __init__(self, static: Event, redactor: Redactor | None = None, console: Callable[[Event], None] | None = None) -> None:
        self.clock = UtcClock()
        self.reset(static, redactor, console)

    def reset(self, static: Event, redactor: Redactor | None = None, console: Callable[[Event], None] | None = None) -> None:
        """Re-point in place, so loggers structlog cached keep using this renderer."""
        self.static = static
        self.redactor = redactor if redactor else None
        self.console = console
        self._prepare()

    def update_static(self, fields: Event) -> None:
        """Change static fields (rank after ``hvd.init()``); re-renders the spliced bytes."""
        self.static.update(fields)
        self._prepare()

    def _prepare(self) -> None:
        """Render the static fields once, or leave the splice off when it would not give the
        same line: static fields orjson refuses or holding a secret."""
        self._messages: dict[str, bytes] = {}
        self._secret_messages: set[bytes] = set()
        self._static_keys = frozenset((*_HEAD_KEYS, *self.static))
        # A static field without a value (``rank`` of a process no launcher numbered) is left out
        # of the line: its absence says "unknown" (docs/fields.md), never ``"rank": null``.
        self._present: Event = {key: value for key, value in self.static.items() if value is not None}
        self._static_json: bytes | None = None
        # The bound context last seen and what goes with it (see _see_bound); plans by bound keys.
        self._binding: _Binding = (_UNBOUND, None, {})
        self._bindings: dict[tuple[str, ...], dict[tuple[str, ...], Any]] = {}
        if EXTRA in self.static:
            return
        try:
            body = orjson.dumps(self._present)
        except TypeError:
            return
        if self.redactor is not None and self.redactor.holds_secret(body):
            return
        self._static_json = b"," + body[1:-1] + b"," if len(body) > 2 else b","  # ends with the comma before the tail

    def render(self, level: str, message: Any, fields: Event, owned: bool = False) -> bytes:
        """Render one event; ``fields`` may hold contract fields, extras and ``exc_info``;
        ``owned``: the caller gives ``fields`` away (a ``**kw`` dict), so it may be rearranged.

        The line is ``{timestamp, level, message, *static, *bound context, *fields}``. The static
        fields and the bound context come pre-rendered (the context once per binding, i.e. once a
        step); only the call's own fields are serialised and searched for secrets per event.
        """
        bound = _bound()
        binding = self._binding  # one attribute read: another thread's binding never mixes in
        if binding[0] is not bound:
            binding = self._see_bound(bound)
        _, prefix, plans = binding
        level_json = _LEVEL_JSON.get(level)
        if level_json is None or message.__class__ is not str:
            return self.render_event(level, message, fields, bound)
        plan: Any = ()
        if fields:
            keys = tuple(fields)
            plan = plans.get(keys, _UNPLANNED)
            if plan is _UNPLANNED:
                plan = self._plan(keys, plans, bound)
        if prefix is None or plan is None or plan is _SORT:
            merged = self._merged(fields, bound, plan)
            if merged is None:
                return self.render_event(level, message, fields, bound)
            before, tail = merged
        else:  # pre-rendered static + bound fields, then the call's: contract fields in call order, the rest under extra
            before, tail = prefix, (plan(fields if owned else dict(fields)) if plan else fields)
        message_json: bytes | None = self._messages.get(message)
        try:
            if message_json is None:
                message_json = self._message_json(message)
            tail_json = _dumps(tail, default, _APPEND_NEWLINE)
        except TypeError:
            message_json = None  # surrogates, non-str keys, huge ints: the general path cleans them
            tail_json = b""
        if message_json is None:  # outside the except block, so exc_info=True still sees the caller's exception
            return self.render_event(level, message, fields, bound)
        now = _now_ns()
        start, end, head = self.clock.current  # one attribute: another thread never sees a half update
        if not start <= now < end:
            start, end, head = self.clock.second(now)
        micros = (now - start) // 1000  # below 10**6: small-int arithmetic from here
        if len(tail_json) > 3:  # then the tail without its '{'
            line = b"".join((head, _THOUSANDS_B[micros // 1000], _THOUSANDS_B[micros % 1000], level_json, message_json, before, tail_json[1:]))
        else:  # no fields of its own: close after the pre-rendered ones
            line = b"".join((head, _THOUSANDS_B[micros // 1000], _THOUSANDS_B[micros % 1000], level_json, message_json, before[:-1], b"}\n"))
        if len(line) > MAX_LINE_BYTES:
            return self.render_event(level, message, fields, bound)
        redactor = self.redactor
        if redactor is not None:  # the quick "no" inline: most tails cannot hold a secret
            quick = redactor.quick_no
            if message_json in self._secret_messages or (
                (quick is None or tail_json.translate(quick[0]).find(quick[1]) >= 0) and redactor.holds_secret(tail_json)
            ):
                line = redactor.json_line(line)
        if self.console is not None:  # rank 0's terminal: the fields of a human line
            step = tail.get("step", (bound or _EMPTY).get("step"))
            self.console({"@timestamp": line[_STAMP].decode(), "log.level": level, "message": message, "rank": self.static.get("rank"), "step": step})
        return line

    def _see_bound(self, bound: Event | None) -> _Binding:
        """Render the static fields plus this bound context once (a binding lives for a step):
        (bound, prefix, plans). ``prefix`` is their JSON without braces, ending in a comma, or
        None when the splice would not give the general path's line (no static splice, a bound
        key colliding with a static field or ``extra`` to merge, a value orjson refuses, a
        secret); ``plans`` are those for calls under a binding with these keys."""
        keys = tuple(bound) if bound else ()
        plans = self._bindings.get(keys)
        if plans is None:
            if len(self._bindings) >= _MAX_REMEMBERED:
                self._bindings.clear()
            plans = self._bindings[keys] = {}
        binding: _Binding = (bound, self._bound_prefix(bound), plans)  # holds bound: its id cannot be reused
        self._binding = binding
        return binding

    def _bound_prefix(self, bound: Event | None) -> bytes | None:
        static_json = self._static_json
        if static_json is None or not bound:
            return static_json
        if EXTRA in bound or not self._static_keys.isdisjoint(bound):
            return None
        try:
            body = _dumps(bound)
        except TypeError:
            return None
        if self.redactor is not None and self.redactor.holds_secret(body):
            return None
        return static_json + body[1:-1] + b","

    def _merged(self, fields: Event, bound: Event | None, plan: Any) -> tuple[bytes, Event] | None:
        """The rarer cases, spliced after the static fields: bound extras to merge with the
        call's, ``exc_info``, a call key overriding a bound one; None for the general path
        (no static splice, a key colliding with a static field, an explicit ``extra``)."""
        static_json = self._static_json
        if static_json is None or plan is None or (bound and not self._static_keys.isdisjoint(bound)):
            return None
        tail: Event = dict(bound) if bound else {}
        if fields:
            sort_fields(tail, fields, fields.keys() - _KNOWN)
        return static_json, tail

    def _message_json(self, message: str) -> bytes:
        """The message as a JSON string, remembered (messages are mostly literals); raises
        TypeError for text orjson refuses. Whether it holds a secret is decided here, once."""
        message_json = _dumps(message)
        if len(self._messages) >= _MAX_REMEMBERED or len(self._secret_messages) >= _MAX_REMEMBERED:
            self._messages.clear()  # ever-new messages (f-strings): start over, stay small
            self._secret_messages.clear()
        if len(message) <= _MAX_REMEMBERED_MESSAGE:
            self._messages[message] = message_json
        if self.redactor is not None and self.redactor.holds_secret(message_json):
            self._secret_messages.add(message_json)
        return message_json

    def _plan(self, keys: tuple[str, ...], plans: dict[tuple[str, ...], Any], bound: Event | None) -> Any:
        """How to place the call's fields with these keys (under a binding of ``bound``'s keys):
        None (the general path) for a key colliding with a static or head field, or an explicit
        ``extra``; ``_SORT`` (merge with the bound fields) for ``exc_info`` or a key the binding
        has; ``()`` when all are contract fields; else a function putting the undeclared ones
        under ``extra``. Made once per key set and binding keys."""
        undeclared = [key for key in keys if key not in _KNOWN]
        if EXTRA in keys or not self._static_keys.isdisjoint(keys):
            plan = None
        elif "exc_info" in undeclared or (bound and not bound.keys().isdisjoint(keys)):
            plan = _SORT
        else:
            plan = _layout(keys, undeclared) if undeclared else ()
        if len(plans) >= _MAX_REMEMBERED:  # calls with ever-new key sets: start over, stay small
            plans.clear()
        plans[keys] = plan
        return plan

    def render_event(self, level: str, message: Any, fields: Event, bound: Event | None = _UNBOUND) -> bytes:
        """The general path: build the whole event dict, then serialise it. A bound or given
        key that is the timestamp, the level, the message or a static field (``rank``, ``job``,
        ``event.dataset``...) never replaces it: the caller's value goes under ``extra``."""
        event: Event = {
            "@timestamp": self.clock(),
            "log.level": level,
            "message": message if message.__class__ is str else str(message),
            **self._present,
        }
        if bound is _UNBOUND:
            bound = context._CONTEXT.get()
        reserved = self._static_keys  # timestamp, level, message and the static fields: never overwritten
        if bound:
            if reserved.isdisjoint(bound):
                event.update(bound)
            else:  # a bound rank, job, message...: kept, under extra
                sort_fields(event, bound, bound.keys() & reserved)
        if fields:
            undeclared = fields.keys() - _KNOWN
            if not reserved.isdisjoint(fields):
                undeclared |= fields.keys() & reserved
            if undeclared or EXTRA in event:
                sort_fields(event, fields, undeclared)
            else:  # only contract fields, one C-level update
                event.update(fields)
        if self.console is not None:
            self.console(event)
        line = dumps_event(event)
        if self.redactor is not None:
            line = self.redactor.json_line(line)
        return line

    def render_safely(self, level: str, message: Any, fields: Event) -> bytes:
        """:meth:`render` that never raises: at worst a minimal event naming the failure."""
        try:
            return self.render(level, message, fields)
        except Exception as exc:  # noqa: BLE001 - logging must never raise into training code
            return self.failure(level, message, exc)

    def failure(self, level: str, message: Any, exc: BaseException) -> bytes:
        """The minimal event written when an event could not be rendered."""
        try:
            line = failure_line({"@timestamp": self.clock(), "log.level": level, "message": message}, self._present, exc)
            return self.redactor.json_line(line) if self.redactor is not None else line
        except Exception:  # noqa: BLE001
            return b'{"message":"hvdlog could not render an event","tags":["_hvdlog_render_failure"]}\n'

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> bytes:
        """structlog entry point: the returned bytes go to the writer's level method."""
        fields = event_dict if isinstance(event_dict, dict) else dict(event_dict)  # structlog's is a dict
        message = fields.pop("event", "")
        return self.render_safely(METHOD_LEVELS.get(method_name, "info"), message, fields)

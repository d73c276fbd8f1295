"""The bound logger class: structlog's filtering logger with a direct path per level.

structlog's generic path (``_proxy_to_logger`` -> ``_process_event`` -> processors ->
wrapped logger) costs about as much as rendering itself. Our chain is one processor,
so each enabled level method calls it and the writer directly (neither raises: a
bad format string or an unrenderable value gives a minimal event naming the failure); ``bind()``/``new()``
and the processor path (``log.log(...)``) still come from structlog. Disabled levels are
static no-ops: the call costs what a plain function call costs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from hvdlog.runtime.renderer import METHOD_LEVELS, EcsJsonRenderer
from hvdlog.runtime.writer import RankFileWriter

__all__ = ["make_bound_logger_class"]

# structlog's numeric levels for the contract's level names (trace below debug).
LEVEL_NUMBERS = {"trace": 5, "debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}



def _nop(*args: Any, **kwargs: Any) -> None:
    return None


def _direct(level: str, renderer: EcsJsonRenderer, write: Callable[[bytes], object], exc_info: bool) -> Callable[..., None]:
    render = renderer.render

    def method(self: Any, event: Any, *args: Any, **kw: Any) -> None:
        # No exception leaves a log call: the try costs nothing until something raises.
        try:
            if args:
                event = event % args
            if self._context:
                kw = {**self._context, **kw}
            if exc_info:
                kw.setdefault("exc_info", True)
            line = render(level, event, kw, True)  # kw is this call's own dict
        except Exception as exc:  # noqa: BLE001 - logging must never raise into training code
            line = renderer.failure(level, event, exc)
        write(line)  # the writer never raises either

    method.__name__ = level
    return method


def make_bound_logger_class(min_level: str, renderer: EcsJsonRenderer, writer: RankFileWriter) -> type:
    """A BoundLogger class writing levels >= ``min_level`` through ``renderer`` straight to
    ``writer`` (the process's one writer, which structlog's logger factory returns too)."""
    base = structlog.make_filtering_bound_logger(LEVEL_NUMBERS[min_level])
    threshold = LEVEL_NUMBERS[min_level]
    namespace: dict[str, Any] = {}
    for name, level in METHOD_LEVELS.items():
        if name == "log":  # structlog's log(level, event) keeps its own signature
            continue
        if LEVEL_NUMBERS[level] >= threshold:
            namespace[name] = _direct(level, renderer, writer.write, exc_info=name == "exception")
        else:
            namespace[name] = staticmethod(_nop)
    return type("HvdlogBoundLogger", (base,), namespace)

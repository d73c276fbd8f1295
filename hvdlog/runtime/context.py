"""Per-step context: ``step``/``epoch`` bound through a contextvar, and progress marks.

Every event logged inside ``with hvdlog.step(n):`` carries ``step`` (and ``epoch``) —
our events and stdlib logging from library code alike. Entering a step also marks
progress for the stall watchdog. The hot path is one ContextVar set and one float store.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hvdlog.fields import EXTRA, FIELDS_BY_NAME

__all__ = ["bind", "bind_step", "current", "mark_progress", "progress_state", "step"]

_CONTEXT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("hvdlog_context", default=None)


class _Progress:
    """Last progress time (monotonic) and which thread made it; read by the watchdog."""

    __slots__ = ("last", "step", "thread_id")

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.step: int | None = None
        self.thread_id = threading.get_ident()


progress_state = _Progress()


def mark_progress(step: int | None = None) -> None:
    """Tell the watchdog the training loop is alive (called by :func:`step` for you)."""
    progress_state.last = time.monotonic()
    progress_state.thread_id = threading.get_ident()
    if step is not None:
        progress_state.step = step


def current() -> dict[str, Any] | None:
    """The fields bound in this context (read by the renderer on every event)."""
    return _CONTEXT.get()


def bind_step(step: int, epoch: int | None = None) -> contextvars.Token[dict[str, Any] | None]:
    """Bind ``step`` (and ``epoch``) until :func:`unbind`/the next bind; marks progress."""
    mark_progress(step)
    fields = dict(_CONTEXT.get() or {})
    fields["step"] = step
    if epoch is not None:
        fields["epoch"] = epoch
    return _CONTEXT.set(fields)


def unbind(token: contextvars.Token[dict[str, Any] | None]) -> None:
    """Restore the context from before the matching bind."""
    _CONTEXT.reset(token)


@contextmanager
def step(step: int, epoch: int | None = None) -> Iterator[None]:
    """``with hvdlog.step(n, epoch=e):`` — every event inside carries step and epoch."""
    token = bind_step(step, epoch)
    try:
        yield
    finally:
        _CONTEXT.reset(token)


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Bind contract fields (others go under ``extra``) for the duration of a block.

    The split into contract fields and extras happens here, once, not on every event.
    """
    merged = dict(_CONTEXT.get() or {})
    extra = dict(merged.get(EXTRA) or {})
    for key, value in fields.items():
        if key in FIELDS_BY_NAME and key != EXTRA:
            merged[key] = value
        else:
            extra[key] = value
    if extra:
        merged[EXTRA] = extra
    token = _CONTEXT.set(merged)
    try:
        yield
    finally:
        _CONTEXT.reset(token)

"""Elastic Horovod: ranks right from the first event after a reset, and each reset as data.

``hvd.elastic.run`` resets a worker by calling ``horovod.torch.elastic._reset``, which runs
``shutdown(); init()`` from its own module namespace (not the ``hvd.init`` :mod:`config`
wraps), then ``State.on_reset()``, which runs the user's reset callbacks. Both names are
looked up at call time, so wrapping them works whenever hvdlog is configured:

- ``horovod.torch.elastic.init``: rank, size, local rank and local size are re-read right
  after Horovod's re-init, so nothing logged after it (reset callbacks, replayed steps)
  carries the old membership; the native capture learns the new rank at the same moment;
- ``State.on_reset``: before the user's callbacks, this process's reset count (the
  membership epoch, ``horovod.elastic.epoch``, on every later event) goes up by one and an
  ``elastic_reset`` event records the old and new rank/size/local rank, the reason and the
  step restored to;
- ``State.check_host_updates``: the ``HostsUpdatedInterrupt`` it raises says hosts were
  added or removed; a reset without one followed a failure (``HorovodInternalError``).

Nothing here may raise into training: a failing wrapper logs nothing and calls the original.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hvdlog import layout
from hvdlog.types import Emit

__all__ = ["EPOCH_FIELD", "ElasticTracker", "install", "is_elastic", "process_paths", "tracker"]

#: The membership epoch: this process's reset count (absent before the first reset).
EPOCH_FIELD: Final = "horovod.elastic.epoch"
_MEMBERSHIP: Final = ("rank", "size", "local_rank")
#: Attributes of a Horovod State object that hold the training step, most specific first.
_STEP_ATTRIBUTES: Final = ("step", "global_step", "batch")


def is_elastic(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a worker of an elastic job (``horovodrun`` sets ``HOROVOD_ELASTIC=1``)."""
    env = os.environ if env is None else env
    return env.get("HOROVOD_ELASTIC", "").strip() == "1"


def process_paths(root: Path, job: str, host: str, rank: int | None) -> dict[str, Path]:
    """This process's files, per kind: named after the process in elastic jobs (one process
    per file, whatever ranks it holds), else after its rank (``unknown-pid<pid>`` if none)."""
    if is_elastic():
        return {kind: layout.process_file(root, job, host, os.getpid(), kind) for kind in layout.KINDS}
    name = rank if rank is not None else f"unknown-pid{os.getpid()}"
    return {kind: layout.rank_file(root, job, host, name, kind) for kind in layout.KINDS}  # type: ignore[arg-type]


@dataclass
class ElasticTracker:
    """The reset count and what the wrappers need from the configured logging."""

    emit: Emit | None = None
    #: Re-reads rank fields from Horovod (config.refresh_rank); returns the fields now in force.
    refresh: Callable[[], Mapping[str, Any]] | None = None
    #: Puts a field into every later event (the renderer's static fields).
    set_static: Callable[[dict[str, Any]], None] | None = None
    epoch: int = 0
    reason: str | None = None
    #: Called with the coming epoch before Horovod re-inits (the timeline's next file).
    before_reinit_hooks: list[Callable[[int], None]] = field(default_factory=list)
    before_init: dict[str, Any] | None = None
    previous: dict[str, Any] = field(default_factory=dict)

    def attach(
        self, emit: Emit, refresh: Callable[[], Mapping[str, Any]], set_static: Callable[[dict[str, Any]], None],
        before_reinit: list[Callable[[int], None]] | None = None,
    ) -> None:
        """Point the wrappers at a (new) configuration; a reconfigured process keeps its epoch."""
        self.emit, self.refresh, self.set_static = emit, refresh, set_static
        self.before_reinit_hooks = before_reinit or []
        self.previous = dict(refresh())
        if self.epoch:
            set_static({EPOCH_FIELD: self.epoch})

    def detach(self) -> None:
        """Logging shut down: the wrappers only call Horovod's originals."""
        self.emit = self.refresh = self.set_static = None
        self.before_reinit_hooks = []

    def _current(self) -> dict[str, Any]:
        return dict(self.refresh()) if self.refresh is not None else {}

    def before_reinit(self) -> None:
        """Horovod is about to re-init: remember the membership that is ending."""
        self.before_init = self._current()
        for hook in self.before_reinit_hooks:
            _quietly(lambda hook=hook: hook(self.epoch + 1))  # type: ignore[misc]

    def after_reinit(self) -> None:
        """Horovod re-initialised: every later event carries the new rank fields."""
        self._current()

    def on_reset(self, state: Any) -> None:
        """One reset, before the user's callbacks: new epoch, then the ``elastic_reset`` event."""
        if self.emit is None or self.set_static is None:
            return
        self.epoch += 1
        self.set_static({EPOCH_FIELD: self.epoch})
        now = self._current()
        before = self.before_init or self.previous
        self.before_init, self.previous = None, now
        reason, self.reason = self.reason or "failure", None
        fields: dict[str, Any] = {"event.action": "elastic_reset", "horovod.elastic.reason": reason}
        for name in _MEMBERSHIP:
            if before.get(name) is not None:
                fields[f"horovod.elastic.previous_{name}"] = before[name]
        step = restored_step(state)
        if step is not None:
            fields["horovod.elastic.restored_step"] = step
        self.emit("info", "elastic reset", fields)


def restored_step(state: Any) -> int | None:
    """The step a Horovod State holds after its restore (``step``, ``global_step`` or ``batch``)."""
    for name in _STEP_ATTRIBUTES:
        with contextlib.suppress(Exception):
            value = getattr(state, name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


#: One per process: resets are the process's, whatever configure() calls happen.
tracker = ElasticTracker()


def _quietly(action: Callable[[], None]) -> None:
    """Run a bookkeeping step of a wrapper; logging must never hurt training."""
    with contextlib.suppress(Exception):
        action()


def _wrap_reinit(module: Any) -> None:
    original = module.init

    def init(*args: Any, **kwargs: Any) -> Any:
        _quietly(tracker.before_reinit)
        result = original(*args, **kwargs)
        _quietly(tracker.after_reinit)
        return result

    init._hvdlog_wrapped = True  # type: ignore[attr-defined]
    module.init = init


def _wrap_state(state_class: Any) -> None:
    on_reset, check_host_updates = state_class.on_reset, state_class.check_host_updates

    def wrapped_on_reset(self: Any) -> Any:
        _quietly(lambda: tracker.on_reset(self))
        return on_reset(self)

    def wrapped_check_host_updates(self: Any) -> Any:
        try:
            return check_host_updates(self)
        except Exception as exc:
            if getattr(exc, "skip_sync", None) is not None:  # HostsUpdatedInterrupt(removed only)
                tracker.reason = "hosts_removed" if exc.skip_sync else "hosts_added"  # type: ignore[attr-defined]
            raise

    wrapped_on_reset._hvdlog_wrapped = True  # type: ignore[attr-defined]
    state_class.on_reset = wrapped_on_reset
    state_class.check_host_updates = wrapped_check_host_updates


def install() -> None:
    """Wrap Horovod's elastic reset path, if Horovod's elastic modules are imported (idempotent).

    Only looks at modules already imported: asking must never import torch or Horovod.
    """
    torch_elastic = sys.modules.get("horovod.torch.elastic")
    if torch_elastic is not None and not getattr(getattr(torch_elastic, "init", None), "_hvdlog_wrapped", False):
        _quietly(lambda: _wrap_reinit(torch_elastic))
    common = sys.modules.get("horovod.common.elastic")
    state_class = getattr(common, "State", None)
    if state_class is not None and not getattr(state_class.on_reset, "_hvdlog_wrapped", False):
        _quietly(lambda: _wrap_state(state_class))

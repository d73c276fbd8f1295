"""Which tensors a stalled rank waits for, and which it has not submitted, from its DistributedOptimizer.

A rank stalled in ``optimizer.step()`` blocks on one allreduce handle; its Python stack
names no tensor. The optimizer knows more: ``_handles`` maps each parameter (or group of
parameters) whose gradient hook fired to its allreduce handle, ``_parameter_names`` names
them, and Horovod can poll a handle without blocking. So when the watchdog reports a stall
it asks every DistributedOptimizer of the process:

* **waiting** — submitted and not complete (``hvd.poll`` is false): what this rank waits for;
* **unsubmitted** — parameters whose allreduce this rank has not started in its current
  step (gradient hook not fired yet, or accumulating under ``backward_passes_per_step``).
  A rank waiting for a tensor another rank has not submitted names that other rank.

Names are Horovod's own (``allreduce.<param>``, ``grouped_allreduce.<first>_<i>of<n>``),
the ones its stall inspector prints. Optimizers are found through a weak registry fed by a
wrapped ``hvd.DistributedOptimizer`` (one set insert when an optimizer is created, nothing
per step) and, for optimizers made before :func:`hvdlog.configure`, in the stalled thread's
stack (locals, and their attributes one level down). All of it runs in the watchdog thread
and only when a stall is reported; it reads snapshots of the optimizer's dicts, and any
failure is swallowed, counted in :data:`FAILURES` and named in the stall event.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType, ModuleType
from typing import Any, Final

__all__ = [
    "FAILURES",
    "PendingTensors",
    "add_pending_tensors",
    "find_optimizers",
    "horovod_op_name",
    "inspect_optimizer",
    "summarize",
    "track_distributed_optimizers",
]

#: Inspection failures by exception type, since the process started (never raised).
FAILURES: Counter[str] = Counter()

#: ``synchronize`` of the classes hvd.DistributedOptimizer builds from (it copies their __dict__).
_SYNCHRONIZE_QUALNAMES: Final = frozenset({"_DistributedOptimizer.synchronize", "_DistributedAdasumOptimizer.synchronize"})

#: Horovod's Python entry points whose ``name`` argument the C++ core prefixes with the op.
_OPS: Final = frozenset({"allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "broadcast", "alltoall", "reducescatter", "grouped_reducescatter"})

#: Stop scanning the stalled stack after this many objects (a huge module's globals).
_SCAN_LIMIT: Final = 20_000

_REGISTRY: weakref.WeakSet[Any] = weakref.WeakSet()
_FACTORY_MODULES: Final = ("horovod.torch", "horovod.torch.optimizer")


@dataclass
class PendingTensors:
    """What one rank's DistributedOptimizers say about the current step, in Horovod's tensor names."""

    waiting: list[str] = field(default_factory=list)
    unsubmitted: list[str] = field(default_factory=list)
    #: At least one gradient of the current step was submitted: the step is under way.
    started: bool = False

    def extend(self, other: PendingTensors) -> None:
        """Add another optimizer's names (kept once, in order)."""
        self.waiting = list(dict.fromkeys([*self.waiting, *other.waiting]))
        self.unsubmitted = list(dict.fromkeys([*self.unsubmitted, *other.unsubmitted]))
        self.started = self.started or other.started


def horovod_op_name(function: str, name: str) -> str | None:
    """The tensor name Horovod's core gives ``name`` passed to ``function`` (None if not an op).

    ``allreduce``/``allreduce_async_``/``HorovodAllreduce`` helpers: only the public op
    functions count, e.g. ``allreduce_async_(t, name="loss")`` is ``allreduce.loss``.
    """
    op = function.removesuffix("_").removesuffix("_async").removeprefix("_")
    return f"{op}.{name}" if op in _OPS else None


def _note_failure(error: BaseException) -> str:
    kind = type(error).__name__
    FAILURES[kind] += 1
    return f"{kind}: {error}"


# --- finding the optimizers ---------------------------------------------------------------


def is_distributed_optimizer(obj: object) -> bool:
    """True for an optimizer made by ``hvd.DistributedOptimizer``; reads class dicts only (runs no user code)."""
    try:
        for klass in type(obj).__mro__:
            method = klass.__dict__.get("synchronize")
            if method is not None:
                return getattr(method, "__qualname__", None) in _SYNCHRONIZE_QUALNAMES
    except Exception:  # noqa: BLE001 - an exotic metaclass must not break a stall report
        return False
    return False


def track_distributed_optimizers() -> None:
    """Wrap ``hvd.DistributedOptimizer`` (if Horovod is imported) so new optimizers are registered.

    Idempotent and cheap: called by :func:`hvdlog.configure` and on every watchdog tick,
    so an ``import horovod.torch`` after configure is still caught.
    """
    try:
        factories = {name: getattr(sys.modules.get(name), "DistributedOptimizer", None) for name in _FACTORY_MODULES}
        unwrapped = [sys.modules[name] for name, factory in factories.items() if factory and not getattr(factory, "_hvdlog_wrapped", False)]
        if not unwrapped:
            return
        # One wrapper for every module exporting the factory: `hvd.DistributedOptimizer is
        # horovod.torch.optimizer.DistributedOptimizer` stays true.
        wrapped = _registering(unwrapped[0].DistributedOptimizer)
        for module in unwrapped:
            if module.DistributedOptimizer is wrapped.__wrapped__:  # type: ignore[attr-defined]  # functools.wraps sets __wrapped__
                module.DistributedOptimizer = wrapped  # type: ignore[attr-defined]  # a module takes any attribute; ModuleType's stub has no __setattr__
    except Exception as error:  # noqa: BLE001 - a half-imported horovod must not stop the watchdog
        _note_failure(error)


def _registering(factory: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(factory)
    def distributed_optimizer(*args: Any, **kwargs: Any) -> Any:
        optimizer = factory(*args, **kwargs)
        try:
            _REGISTRY.add(optimizer)
        except Exception as error:  # noqa: BLE001 - never fail the user's optimizer creation
            _note_failure(error)
        return optimizer

    distributed_optimizer._hvdlog_wrapped = True  # type: ignore[attr-defined]
    return distributed_optimizer


def _instance_values(obj: object) -> list[Any]:
    """An object's own attribute values, without running its code (no properties, no __getattr__)."""
    if issubclass(type(obj), (type, ModuleType)):  # not isinstance: it may read a __class__ property
        return []
    try:
        attributes = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return []
    return list(attributes.values()) if isinstance(attributes, dict) else []


def _stack_objects(frame: FrameType | None) -> Iterator[Any]:
    """Locals of every frame of a stack, then their attributes (``self.optimizer``), bounded."""
    seen = 0
    locals_: list[Any] = []
    while frame is not None and seen < _SCAN_LIMIT:
        values = list(frame.f_locals.values())
        seen += len(values)
        locals_.extend(values)
        frame = frame.f_back
    yield from locals_
    for value in locals_:
        attributes = _instance_values(value)
        seen += len(attributes)
        if seen > _SCAN_LIMIT:
            return
        yield from attributes


def find_optimizers(frame: FrameType | None = None) -> list[Any]:
    """Every DistributedOptimizer known: registered ones, then any on ``frame``'s stack."""
    found = {id(optimizer): optimizer for optimizer in _snapshot(_REGISTRY)}
    for obj in _stack_objects(frame):
        if id(obj) not in found and is_distributed_optimizer(obj):
            found[id(obj)] = obj
    return list(found.values())


# --- reading one optimizer ----------------------------------------------------------------


def _snapshot(container: Any) -> Any:
    """A copy of a dict/set the training thread may be mutating (C-level copy; retried if torn)."""
    for _ in range(3):
        try:
            return container.copy()
        except RuntimeError:  # "changed size during iteration" on a non-atomic copy
            continue
    return container.copy()


def _poll() -> Callable[[int], bool] | None:
    mpi_ops = sys.modules.get("horovod.torch.mpi_ops")
    return getattr(mpi_ops, "poll", None)


def _is_complete(handle: int, poll: Callable[[int], bool]) -> bool:
    try:
        return bool(poll(handle))
    except ValueError:  # "not created or has been cleared": synchronize() already took the result
        return True


def inspect_optimizer(optimizer: Any, poll: Callable[[int], bool] | None = None) -> PendingTensors:
    """Waiting and unsubmitted tensor names of one DistributedOptimizer's current step.

    Raises whatever reading the optimizer raises; :func:`pending_fields` swallows it.
    """
    poll = poll or _poll()
    state = object.__getattribute__(optimizer, "__dict__")
    parameters: dict[Any, str] = _snapshot(state["_parameter_names"])  # in name order
    names = {id(param): name for param, name in parameters.items()}
    handles: dict[Any, Any] = _snapshot(state["_handles"])
    groups = {id(param): group for param, group in _snapshot(state.get("_p_to_group") or {}).items()}
    needed = {id(param) for param in _snapshot(state["_requires_update"])}
    result = PendingTensors()
    submitted: set[int] = set()
    for key, value in handles.items():
        handle = value[0] if isinstance(value, tuple) and value else None
        if handle is None:  # hook fired, gradient accumulating locally (backward_passes_per_step)
            continue
        params = key if isinstance(key, tuple) else (key,)
        submitted.update(id(param) for param in params)
        if not isinstance(handle, int) or poll is None:
            continue  # a sparse allreduce's closure cannot be polled
        if not _is_complete(handle, poll):
            result.waiting.extend(_tensor_name(param, names, groups if isinstance(key, tuple) else {}) for param in params)
    for param in parameters:
        if id(param) in needed and id(param) not in submitted:
            result.unsubmitted.append(_tensor_name(param, names, groups))
    result.started = bool(submitted)
    return result


def _tensor_name(param: Any, names: dict[int, str], groups: dict[int, tuple[Any, ...]]) -> str:
    """Horovod's name for a parameter's gradient allreduce; in a group: ``<first param>_<i>of<n>``."""
    group = groups.get(id(param))
    if group:
        index = next(i for i, member in enumerate(group) if member is param)
        return f"grouped_allreduce.{names.get(id(group[0]), '?')}_{index + 1}of{len(group)}"
    return f"allreduce.{names[id(param)]}"


# --- the stall event's fields ---------------------------------------------------------------


def add_pending_tensors(fields: dict[str, Any], frame: FrameType | None) -> None:
    """Add the optimizers' waiting tensors to ``horovod.stall.tensors`` and their unsubmitted
    ones as ``horovod.stall.unsubmitted_tensors``; never raises.

    Unsubmitted gradients are told for a rank stuck outside any collective, or mid-step. A
    rank waiting in another collective between steps (a broadcast, a metric allreduce) has
    submitted nothing of its *next* step yet: listing every gradient would only mislead.

    A failure is counted in :data:`FAILURES` and named in ``horovod.stall.inspection_error``,
    next to whatever the other optimizers still told.
    """
    total = PendingTensors()
    try:
        optimizers = find_optimizers(frame)
        poll = _poll()
    except Exception as error:  # noqa: BLE001 - the watchdog must keep reporting
        fields["horovod.stall.inspection_error"] = _note_failure(error)
        return
    for optimizer in optimizers:
        try:
            total.extend(inspect_optimizer(optimizer, poll))
        except Exception as error:  # noqa: BLE001
            fields["horovod.stall.inspection_error"] = _note_failure(error)
    if total.waiting:
        fields["horovod.stall.tensors"] = list(dict.fromkeys([*fields.get("horovod.stall.tensors", ()), *total.waiting]))
    if total.unsubmitted and (total.started or "horovod.stall.operation" not in fields):
        fields["horovod.stall.unsubmitted_tensors"] = total.unsubmitted


def summarize(names: list[str], shown: int = 3) -> str:
    """A few names for a one-line message: ``a, b, c and 5 more``."""
    head = ", ".join(names[:shown])
    return f"{head} and {len(names) - shown} more" if len(names) > shown else head

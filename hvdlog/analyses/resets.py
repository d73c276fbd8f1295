"""Elastic jobs in the failure model: which rank vanished at a reset, and whether the job went on.

hvdlog writes an ``elastic_reset`` event on every reset of every surviving process, with the
old and new rank and size (CONTRACT: ``horovod.elastic.previous_rank``, ``previous_size``,
``reason``, ``restored_step``, ``epoch``). A SIGKILLed worker leaves no traceback, but its
events stop while the others reset: the ranks of the previous membership that no survivor
had are the ones that died. A reset for ``hosts_removed`` is a scale-down, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Final

from hvdlog.documents import Document, as_int, get_field, rank_of, timestamp_millis
from hvdlog.query.spec import MAX_JOB_SIZE, Condition, Filter

if TYPE_CHECKING:
    from hvdlog.analyses.failures import FailureReport

__all__ = ["Recovery", "epoch_of", "lost_ranks", "recovery_filter", "recovery_of", "resets"]

RESET_ACTION: Final = "elastic_reset"
Recovery = dict[str, Any]


def epoch_of(doc: Document) -> int:
    """The membership epoch of a document (absent: 0, before any reset)."""
    epoch = get_field(doc, "horovod.elastic.epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 else 0


def resets(docs: Iterable[Document]) -> dict[int, list[Document]]:
    """Reset events by the epoch they start."""
    found: dict[int, list[Document]] = {}
    for doc in docs:
        if get_field(doc, "event.action") == RESET_ACTION:
            found.setdefault(epoch_of(doc), []).append(doc)
    return found


def lost_ranks(docs: list[Document]) -> list[tuple[int, int, str]]:
    """Ranks that died at a failure reset: (rank at death, the reset's epoch, why we say so), earliest reset first."""
    lost = []
    for epoch, events in sorted(resets(docs).items()):
        reasons = {get_field(doc, "horovod.elastic.reason") for doc in events}
        if reasons <= {"hosts_added", "hosts_removed"}:
            continue  # growing or a scale-down: nobody failed
        sizes: set[int] = {size for doc in events if (size := as_int(get_field(doc, "horovod.elastic.previous_size"))) is not None}
        size = sizes.pop() if len(sizes) == 1 else 0
        if not 0 < size <= MAX_JOB_SIZE:
            continue
        survivors = {as_int(get_field(doc, "horovod.elastic.previous_rank")) for doc in events}
        workers = sorted(new for doc in events if (new := as_int(doc.get("size"))) is not None)
        after = workers[0] if workers else "?"
        for rank in range(size):
            if rank not in survivors:
                lost.append((rank, epoch, (f"rank {rank} (its rank at death, epoch {epoch - 1}) left no error, but its events stop while "
                                   f"the other {len(survivors)} reset (reset {epoch}, {size} -> {after} workers): "
                                   f"a killed worker (SIGKILL, often the OOM killer) leaves no traceback")))
    return lost


def recovery_filter(docs: list[Document], base: Filter) -> Filter | None:
    """Step events since the first reset (None when no job reset): did the job go on?"""
    times = [millis for events in resets(docs).values() for doc in events if (millis := timestamp_millis(doc.get("@timestamp"))) is not None]
    if not times:
        return None
    start = datetime.fromtimestamp(min(times) / 1000, tz=timezone.utc)
    return replace(base, since=max(base.since, start) if base.since else start, any_of=(Condition("step"),))


def recovery_of(docs: list[Document], report: FailureReport) -> bool | Recovery:
    """How the job went on after the failure: the first reset after it, its workers and the last step after it."""
    failed_at = timestamp_millis((report.culprit or {}).get("@timestamp"))
    for epoch, events in sorted(resets(docs).items()):
        at = min((m for doc in events if (m := timestamp_millis(doc.get("@timestamp"))) is not None), default=None)
        if at is None or (failed_at is not None and at < failed_at):
            continue
        steps = [step for doc in docs if (step := as_int(doc.get("step"))) is not None and epoch_of(doc) >= epoch
                 and (m := timestamp_millis(doc.get("@timestamp"))) is not None and m >= at]
        if not steps:
            return False
        workers = len({rank_of(doc) for doc in events})
        text = f"recovered at reset {epoch} with {workers} workers, finished at step {max(steps)}"
        return {"reset": epoch, "workers": workers, "last_step": max(steps), "text": text}
    return False

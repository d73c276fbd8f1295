"""The first genuine failure of a job, and the ranks that only went down with it.

When one rank raises, Horovod tears the others down: they log SIGTERM, "Horovod has been
shut down", ``HorovodInternalError``, Gloo's "Connection closed by peer"... Blaming the
earliest error line would often blame a victim, so those messages are *collateral*: never
the culprit, and reported as such. The culprit is the earliest error (level error or
worse, or an uncaught exception) that is not collateral. When Horovod shuts the job down
because of a stall before any rank raised, the stall report (printed by rank 0) blames the
stalled ranks instead: the reporter did nothing wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.documents import Document, get_field
from hvdlog.fields import level_at_least
from hvdlog.query.spec import PATTERN_FIELDS, Condition, job_of, sort_key
from hvdlog.query.summary import one_line

__all__ = ["COLLATERAL", "FAILURE_EVENTS", "FailureReport", "first_failure", "is_collateral"]

#: What the analysis needs from a source: errors, uncaught exceptions and signals.
FAILURE_EVENTS: Final = (
    Condition("log.level", min_level="error"),
    Condition("event.action", ("signal", "uncaught_exception")),
)

#: Messages of a rank that failed because another one did.
COLLATERAL: Final = re.compile(
    r"Horovod has been shut down|HorovodInternalError|HorovodShutdownError|Connection closed by peer"
    r"|Connection reset by peer|Broken pipe|\bSIG(?:TERM|KILL|INT)\b|terminated by signal|Read error"
    r"|ProcessSet.*shut down|Gloo.*(?:closed|timed out|timeout)",
    re.IGNORECASE,
)


def is_collateral(doc: Document) -> bool:
    """True for a signal event or a message that says another rank went first."""
    if get_field(doc, "event.action") == "signal":
        return True
    texts = [get_field(doc, name) for name in (*PATTERN_FIELDS, "error.type")]
    return any(isinstance(text, str) and COLLATERAL.search(text) for text in texts)


def _reason(doc: Document) -> str:
    """Why a document counts as collateral: the signal name, or the message that says so."""
    if reason := get_field(doc, "event.reason"):
        return str(reason)
    for name in (*PATTERN_FIELDS, "error.type"):
        if isinstance(text := get_field(doc, name), str) and (match := COLLATERAL.search(text)):
            return match.group()
    return "signal"


def _is_failure(doc: Document) -> bool:
    if get_field(doc, "event.action") in ("signal", "uncaught_exception"):
        return True
    return level_at_least(str(get_field(doc, "log.level") or "info"), "error")


def _summary(doc: Document, reason: str | None = None) -> dict[str, Any]:
    out = {
        "@timestamp": doc.get("@timestamp"),
        "rank": doc.get("rank"),
        "host": get_field(doc, "host.name"),
        "level": get_field(doc, "log.level"),
        "message": one_line(doc),
    }
    if reason:
        out["reason"] = reason
    return out


@dataclass
class FailureReport:
    """Who is to blame (a culprit's error, or the ranks a stall shutdown named), and everyone else's fate."""

    job: str | None
    culprit: dict[str, Any] | None
    error_type: str | None = None
    error_message: str | None = None
    stack_trace: str | None = None
    collateral: list[dict[str, Any]] = field(default_factory=list)
    other_errors: list[dict[str, Any]] = field(default_factory=list)
    #: Set when Horovod shut the job down on a stall before any rank raised.
    stall: dict[str, Any] | None = None
    blamed_ranks: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def _is_stall_report(doc: Document) -> bool:
    """Horovod's (or our watchdog's) stall report: it names the missing ranks, it is not the reporter's failure."""
    return get_field(doc, "horovod.stall.missing_ranks") is not None or get_field(doc, "horovod.stall.source") is not None


def _stall_summary(doc: Document) -> dict[str, Any]:
    return {
        "@timestamp": doc.get("@timestamp"),
        "reported_by": doc.get("rank"),
        "missing_ranks": get_field(doc, "horovod.stall.missing_ranks") or [],
        "shutdown_ranks": get_field(doc, "horovod.stall.shutdown_ranks") or [],
        "tensors": get_field(doc, "horovod.stall.tensors") or [],
        "shutdown": bool(get_field(doc, "horovod.stall.shutdown")),
    }


def _report(job: Any, failures: list[Document]) -> FailureReport:
    stalls = [doc for doc in failures if _is_stall_report(doc)]
    genuine = [doc for doc in failures if not is_collateral(doc) and not _is_stall_report(doc)]
    # A native line without a time sorts first but says nothing about "first": prefer timed ones.
    timed = [doc for doc in genuine if doc.get("@timestamp") is not None]
    culprit = (timed or genuine or [None])[0]
    report = FailureReport(job, None)
    if stalls and (culprit is None or sort_key(stalls[0]) <= sort_key(culprit)):
        # Horovod gave up on a stall before any rank raised: the stalled ranks are to blame.
        report.stall = _stall_summary(stalls[0])
        report.blamed_ranks = report.stall["shutdown_ranks"] or report.stall["missing_ranks"]
        culprit = None
    if culprit is not None:
        report.culprit = _summary(culprit)
        report.blamed_ranks = [culprit.get("rank")]
        same_rank = [doc for doc in genuine if doc.get("rank") == culprit.get("rank")]
        with_trace = next((doc for doc in same_rank if get_field(doc, "error.stack_trace")), culprit)
        report.error_type = get_field(with_trace, "error.type")
        report.error_message = get_field(with_trace, "error.message") or culprit.get("message")
        report.stack_trace = get_field(with_trace, "error.stack_trace")
    seen: set[Any] = set(report.blamed_ranks)
    for doc in sorted(failures, key=lambda doc: doc.get("@timestamp") is None):
        rank = doc.get("rank")
        if rank in seen or _is_stall_report(doc):
            continue
        seen.add(rank)
        if is_collateral(doc):
            report.collateral.append(_summary(doc, _reason(doc)))
        else:
            report.other_errors.append(_summary(doc))
    return report


def first_failure(docs: Iterable[Document]) -> list[FailureReport]:
    """One report per job that has any failure, ordered by the job's first failure."""
    by_job: dict[Any, list[Document]] = {}
    for doc in sorted(docs, key=sort_key):
        if _is_failure(doc):
            by_job.setdefault(job_of(doc), []).append(doc)
    return [_report(job, failures) for job, failures in by_job.items()]

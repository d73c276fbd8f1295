"""The first failure of a job: who died first and why, who only went down with it, and what the launcher saw.

Horovod jobs die in chains: one rank fails, Horovod shuts the others down ("Horovod has been
shut down", Gloo's "Connection closed by peer"), the launcher kills the rest (SIGTERM, exit
143; SIGKILL, 137) and prints a summary. Blaming the earliest error line would often blame a
victim, so every failure is sorted into one of four kinds (docs/query.md, "Failure model"):

* **primary**: what can start a chain: an exception, a crash signal from the kernel (SIGSEGV,
  SIGBUS, SIGABRT, SIGFPE, SIGILL), a SIGKILL that comes before any other failure (the OOM
  killer), a NCCL/CUDA error, an error line; a ``HorovodInternalError`` that carries its own
  cause (``ncclAllReduce failed: ...``) is primary, only the shutdown message is collateral;
* **collateral**: what a rank says when another one went first: the shutdown message, a lost
  peer, SIGTERM, a SIGKILL after another rank's failure;
* **evidence**: the launcher's own lines about ranks (``Process N exit with status code X``,
  horovodrun's and mpirun's "first process to do so", ``mpirun noticed ... signal 9``, Hydra's
  BAD TERMINATION, ``srun: error: ... task N``, the elastic driver's "-> stop running"): used
  to confirm, or when the ranks said nothing, to point to the culprit; never blamed themselves;
* **stall**: Horovod's stall inspector giving up: the stalled ranks are blamed, not the reporter.

A rank's first failure decides its fate; the culprit is the earliest primary (a rank's before
the launcher's own errors). Without a primary the evidence names the rank and says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.documents import Document, get_field, job_of, sort_key
from hvdlog.fields import level_at_least
from hvdlog.query.echoes import drop_echoes
from hvdlog.query.spec import MAX_JOB_SIZE, PATTERN_FIELDS, Condition
from hvdlog.query.stalls import names_in, ranks_in
from hvdlog.query.summary import one_line

__all__ = ["COLLATERAL", "FAILURE_EVENTS", "FailureReport", "first_failure", "is_collateral", "kind_of"]

#: What the analysis needs from a source: errors, uncaught exceptions, signals, exit codes.
FAILURE_EVENTS: Final = (
    Condition("log.level", min_level="error"),
    Condition("event.action", ("signal", "uncaught_exception")),
    Condition("process.exit_code"),
)

#: Messages of a rank that failed because another one did.
COLLATERAL: Final = re.compile(
    r"Horovod has been shut down|HorovodShutdownError|Connection closed by (?:remote )?peer"
    r"|Connection reset by peer|Broken pipe|\bSIG(?:TERM|INT)\b|terminated by signal 15|Read error \["
    r"|ProcessSet.*shut down",
    re.IGNORECASE,
)

#: The launcher's own lines about how ranks ended (evidence, never the culprit).
LAUNCHER_SUMMARY: Final = re.compile(
    r"Horovod detected that one or more processes exited with non-zero status"
    r"|mpirun (?:noticed|detected) that|Primary job\s+terminated normally|BAD TERMINATION|KILLED BY SIGNAL"
    r"|EXIT CODE: \d+|^srun: error: \S+: tasks? [\d,-]+: |^slurmstepd: error: (?:\*\*\* STEP|Detected \d+ oom-kill)"
    r"|-> stop running|^Process \d+ exit with status code \d+|Terminating remaining workers",
    re.IGNORECASE,
)

_SIGNALS: Final = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
                   11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
_SIGNAL_WORDS: Final = (
    (re.compile(r"Segmentation fault", re.I), "SIGSEGV"),
    (re.compile(r"\bBus error\b", re.I), "SIGBUS"),
    (re.compile(r"\bAbort(?:ed)?\b", re.I), "SIGABRT"),
    (re.compile(r"\bKilled\b", re.I), "SIGKILL"),
    (re.compile(r"\bTerminated\b", re.I), "SIGTERM"),
)
_SIGNAL_NUMBER: Final = re.compile(r"signal:? (\d+)\b", re.I)
_EXIT_CODE: Final = re.compile(r"Exit code:\s+(\d+)", re.I)
#: Signals a rank receives from the launcher (or an operator) rather than from its own fault.
_TERMINATION: Final = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
_RANK_IN_TEXT: Final = (
    re.compile(r"process rank (\d+)"),
    re.compile(r"\btask (\d+):"),
    re.compile(r"\bRANK (\d+) PID"),
    re.compile(r"Process name: (?:\[\[\d+,\d+\],)?(\d+)\]?\s*$", re.M),
    re.compile(r"^Process (\d+) exit with"),
)
_CHAIN: Final = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)", re.M)
_EXCEPTION_LINE: Final = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|[\w.]+::\w+): (.+)$", re.M)


def _texts(doc: Document) -> list[str]:
    return [t for t in (get_field(doc, name) for name in (*PATTERN_FIELDS, "error.type")) if isinstance(t, str)]


def signal_of(doc: Document) -> str | None:
    """The signal a document reports (event.reason, an exit code above 128, or its words)."""
    reason = get_field(doc, "event.reason")
    if isinstance(reason, str) and reason.startswith("SIG"):
        return reason
    code = get_field(doc, "process.exit_code")
    if isinstance(code, int) and 128 < code < 160:
        return _SIGNALS.get(code - 128, f"signal {code - 128}")
    action_signal = get_field(doc, "event.action") == "signal"
    summary = not action_signal and _is_summary(doc)
    if not action_signal and not summary:
        return None  # words like "signal 9" inside an exception message are not this rank's signal
    message = str(doc.get("message") or "")
    if (number := _SIGNAL_NUMBER.search(message)) is not None:
        return _SIGNALS.get(int(number[1]), f"signal {number[1]}")
    if summary:  # a launcher's line: its exit code, or the state at its end (srun's "task 1: Killed")
        if (code := _EXIT_CODE.search(" ".join(_texts(doc)))) is not None and 128 < int(code[1]) < 160:
            return _SIGNALS.get(int(code[1]) - 128, f"signal {int(code[1]) - 128}")
        state = message.rstrip(". ").rsplit(": ", 1)[-1].strip().lower()
        return {"segmentation fault": "SIGSEGV", "bus error": "SIGBUS", "aborted": "SIGABRT", "killed": "SIGKILL",
                "terminated": "SIGTERM"}.get(state)
    for pattern, name in _SIGNAL_WORDS:
        if pattern.search(message):
            return name
    return None


def _is_summary(doc: Document) -> bool:
    """A launcher line about ranks (never a rank's own output)."""
    if get_field(doc, "event.dataset") == "horovod.app":
        return False
    return any(LAUNCHER_SUMMARY.search(text) for text in _texts(doc))


def _is_stall_report(doc: Document) -> bool:
    """Horovod's (or our watchdog's) stall report: it names the missing ranks, it is not the reporter's failure."""
    return get_field(doc, "horovod.stall.missing_ranks") is not None or get_field(doc, "horovod.stall.source") is not None


def is_collateral(doc: Document) -> bool:
    """True for a message or signal that says another rank went first (shutdown, lost peer, SIGTERM)."""
    if signal_of(doc) in _TERMINATION and not _is_summary(doc):
        return True
    return any(COLLATERAL.search(text) for text in _texts(doc))


def kind_of(doc: Document) -> str:
    """``stall``, ``evidence``, ``collateral`` or ``primary`` (before the order is known: see first_failure)."""
    if _is_stall_report(doc):
        return "stall"
    if _is_summary(doc):
        return "evidence"
    if is_collateral(doc):
        return "collateral"
    return "primary"


def _is_failure(doc: Document) -> bool:
    if get_field(doc, "event.action") in ("signal", "uncaught_exception"):
        return True
    if isinstance(code := get_field(doc, "process.exit_code"), int) and code != 0:
        return True
    return level_at_least(str(get_field(doc, "log.level") or "info"), "error")


def _own_rank(doc: Document) -> int | None:
    """The rank that wrote a document; a rank of another type (a list) names none."""
    rank = doc.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def rank_of(doc: Document) -> Any:
    """The rank a document is about: its own, or the one a launcher line names."""
    rank = doc.get("rank")
    if isinstance(rank, int):
        return rank
    for text in _texts(doc):
        for pattern in _RANK_IN_TEXT:
            if (match := pattern.search(text)) is not None:
                return int(match[1])
    return None


def _summary(doc: Document, reason: str | None = None) -> dict[str, Any]:
    out = {
        "@timestamp": doc.get("@timestamp"),
        "rank": rank_of(doc),
        "host": get_field(doc, "host.name"),
        "level": get_field(doc, "log.level"),
        "message": one_line(doc),
    }
    if reason:
        out["reason"] = reason
    return out


def _reason(doc: Document) -> str:
    """Why a document counts as collateral: the signal, or the words that say so."""
    for text in _texts(doc):
        if (match := COLLATERAL.search(text)) is not None:
            return match.group()
    signal = signal_of(doc)
    if signal is not None:
        return f"{signal} after the first failure"
    code = get_field(doc, "process.exit_code")
    return f"exit code {code} after the first failure" if code is not None else "after the first failure"


def _root_exception(trace: str) -> str | None:
    """The first exception of a chained traceback (the one the others were raised while handling)."""
    if not _CHAIN.search(trace):
        return None
    match = _EXCEPTION_LINE.search(trace)
    return f"{match[1]}: {match[2]}" if match else None


def _cause(doc: Document) -> str:
    """What went wrong, in one line: ``Type: message`` (and a chain's root), or the signal and the line."""
    error_type, message = get_field(doc, "error.type"), get_field(doc, "error.message")
    if error_type:
        trace = str(get_field(doc, "error.stack_trace") or "")
        # A message that goes on over lines (TensorFlow's node and cause lines) is all of it.
        if (at := trace.rfind(f"{error_type}:")) >= 0 and len(trace) - at > len(f"{error_type}: {message or ''}") + 1:
            message = trace[at + len(error_type) + 1 :]
        text = f"{error_type}: {' '.join(str(message or '').split())}".rstrip(": ")
        root = _root_exception(trace)
        return f"{text} (raised while handling {root})" if root and root not in text else text
    signal = signal_of(doc)
    line = one_line(doc)
    return f"{signal}: {line}" if signal else line


@dataclass
class FailureReport:
    """Who is to blame (a culprit's error, the ranks a stall shutdown named, or the rank the evidence points to) and everyone else's fate."""

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
    #: True when the cause is in the logs (a rank's own error or signal, a stall); False when only evidence points.
    primary: bool = False
    #: The cause in one line; without a primary, which evidence points to the blamed rank and why.
    cause: str = ""
    #: The launcher's lines about how ranks ended (exit codes, signals, its "first process" summary).
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def _stall_summary(doc: Document) -> dict[str, Any]:
    return {
        "@timestamp": doc.get("@timestamp"),
        "reported_by": doc.get("rank"),
        "missing_ranks": ranks_in(get_field(doc, "horovod.stall.missing_ranks")),
        "shutdown_ranks": ranks_in(get_field(doc, "horovod.stall.shutdown_ranks")),
        "tensors": names_in(get_field(doc, "horovod.stall.tensors")),
        "shutdown": bool(get_field(doc, "horovod.stall.shutdown")),
    }


def _classify(failures: list[Document]) -> list[tuple[str, Document]]:
    """Each failure with its kind, in order; a SIGKILL after another rank's own failure is collateral
    (victims' messages do not count: they cannot come before the cause)."""
    kinds: list[tuple[str, Document]] = []
    failed_ranks: set[Any] = set()
    for doc in failures:
        kind = kind_of(doc)
        if kind == "primary" and signal_of(doc) == "SIGKILL" and failed_ranks - {_own_rank(doc)}:
            kind = "collateral"  # the launcher's kill after another rank went down
        if kind in ("primary", "stall"):
            failed_ranks.add(_own_rank(doc))
        kinds.append((kind, doc))
    return kinds


def _evidence_culprit(evidence: list[Document]) -> tuple[Any, str] | None:
    """The rank the launcher's lines point to when no rank said why it died, and why."""
    ranked = [(doc, rank_of(doc), signal_of(doc)) for doc in evidence]
    ranked = [(doc, rank, signal) for doc, rank, signal in ranked if rank is not None]
    out_of_memory = [item for item in ranked if re.search(r"out of memory|oom", str(item[0].get("message")), re.I)]
    crashed = [item for item in ranked if item[2] is not None and item[2] not in _TERMINATION]
    first_exit = [item for item in ranked if "first process" in " ".join(_texts(item[0])) or "Process name" in " ".join(_texts(item[0]))]
    exited = [item for item in ranked if item[2] not in _TERMINATION and get_field(item[0], "process.exit_code") not in (None, 0)]
    for choice in (out_of_memory, crashed, first_exit, exited):
        if choice:
            doc, rank, signal = choice[0]
            what = "killed by the kernel's OOM killer" if choice is out_of_memory else (
                f"{signal}" + (": most likely the kernel's OOM killer" if signal == "SIGKILL" else "") if signal
                else f"exit code {get_field(doc, 'process.exit_code')}" if get_field(doc, "process.exit_code") is not None
                else "the launcher named it first")
            return rank, f"{what}; rank {rank} printed no error of its own; the launcher says: {one_line(doc)}"
    return None


def _silent_ranks(failures: list[Document]) -> list[int]:
    """Ranks of a job of known size that did not fail while every other one went down as collateral."""
    sizes = {doc["size"] for doc in failures if isinstance(doc.get("size"), int) and 0 < doc["size"] <= MAX_JOB_SIZE}
    if len(sizes) != 1:
        return []
    reported = {rank_of(doc) for doc in failures}
    return [rank for rank in range(sizes.pop()) if rank not in reported]


def _report(job: Any, failures: list[Document]) -> FailureReport:
    kinds = _classify(failures)
    report = FailureReport(job, None)
    report.evidence = [_summary(doc) for kind, doc in kinds if kind == "evidence"]
    primaries = [doc for kind, doc in kinds if kind == "primary"]
    # A rank's own failure before the launcher's: a rank-less error is a launcher's or the machine's.
    culprit = next((doc for doc in primaries if _own_rank(doc) is not None), primaries[0] if primaries else None)
    stalls = [doc for kind, doc in kinds if kind == "stall"]
    if stalls and (culprit is None or sort_key(stalls[0]) <= sort_key(culprit)):
        report.stall = _stall_summary(stalls[0])
        report.blamed_ranks = report.stall["shutdown_ranks"] or report.stall["missing_ranks"]
        report.primary = True
        tensors = ", ".join(report.stall["tensors"]) or "the collective"
        who = f"rank(s) {', '.join(map(str, report.blamed_ranks))}" if report.blamed_ranks else "a rank the report does not name"
        report.cause = (f"stall: {who} never joined {tensors} "
                        f"(reported by rank {report.stall['reported_by']}); Horovod shut the job down")
        culprit = None
    elif culprit is not None:
        report.culprit = _summary(culprit)
        report.blamed_ranks = [_own_rank(culprit)]
        report.primary = True
        same_rank = [doc for doc in primaries if _own_rank(doc) == _own_rank(culprit)]
        with_trace = next((doc for doc in same_rank if get_field(doc, "error.stack_trace")), culprit)
        report.error_type = get_field(with_trace, "error.type")
        report.error_message = get_field(with_trace, "error.message") or culprit.get("message")
        report.stack_trace = get_field(with_trace, "error.stack_trace")
        report.cause = _cause(culprit)
    elif (pointed := _evidence_culprit([doc for kind, doc in kinds if kind == "evidence"])) is not None:
        report.blamed_ranks = [pointed[0]]
        report.cause = pointed[1]
    elif silent := _silent_ranks(failures):
        report.blamed_ranks = silent
        report.cause = (f"no primary cause in these logs: every failure is collateral, and rank(s) "
                        f"{', '.join(map(str, silent))} of the job reported nothing: their output is where the cause is")
    else:
        report.cause = ("no primary cause in these logs: every failure is collateral (shutdown, lost peers, "
                        "terminated by the launcher); the rank that failed first left no output here")
    _fates(report, kinds)
    return report


def _fates(report: FailureReport, kinds: list[tuple[str, Document]]) -> None:
    """Every other rank: collateral, or a failure of its own; a rank's first failure decides."""
    seen: set[Any] = set(report.blamed_ranks) | {None}
    evidence_only: dict[Any, Document] = {}
    for kind, doc in kinds:
        rank = rank_of(doc) if kind == "evidence" else _own_rank(doc)
        if kind == "evidence":
            if rank not in seen:
                evidence_only.setdefault(rank, doc)
            continue
        if rank in seen or kind == "stall":
            continue
        seen.add(rank)
        evidence_only.pop(rank, None)
        if kind == "collateral":
            report.collateral.append(_summary(doc, _reason(doc)))
        else:
            report.other_errors.append(_summary(doc))
    if report.blamed_ranks:
        for doc in evidence_only.values():
            report.collateral.append(_summary(doc, _reason(doc)))


def first_failure(docs: Iterable[Document]) -> list[FailureReport]:
    """One report per job that has any failure, ordered by the job's first failure.

    The native echo of an uncaught exception hvdlog recorded counts once (see echoes).
    """
    by_job: dict[Any, list[Document]] = {}
    for doc in drop_echoes(sorted(docs, key=sort_key)):
        if _is_failure(doc):
            by_job.setdefault(job_of(doc), []).append(doc)
    return [_report(job, failures) for job, failures in by_job.items()]

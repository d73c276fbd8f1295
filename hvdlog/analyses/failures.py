"""The first failure of a job: one model that reasons over evidence (docs/failure-model.md).

Horovod jobs die in chains: one rank fails, Horovod shuts the others down, peers lose their
connection, the launcher terminates the rest and prints a verdict. The parse step classified
every document that is evidence about a failure (``hvdlog.evidence.*``, from the message
table); this module only reads those fields:

1. collect, per rank the evidence is *about*: its own errors and signals, the exit status and
   signals launchers report for it, its peer-loss and shutdown errors;
2. a rank's fate is decided by the kind of its first own evidence (a launcher's word only
   when the rank said nothing): a fault (exception, crash or kill signal, exit status, error
   line) makes it a candidate; a consequence (peer loss, Horovod shutdown, SIGTERM) makes it
   collateral, also when it aborts afterwards; an expected exit (elastic scale-down) is no
   failure; launchers and the elastic driver are never candidates; what the rest of the logs
   decide (hvdlog.analyses.last_words): a receive timeout no peer's failure explains is a fault,
   and so is an NCCL WARN whose error chain ends the rank's output;
3. the culprit is the strongest candidate, and among equals the first: by time when every
   one has a time, else by the launcher's "first process to do so", else a rank's own output
   before a launcher's word, then by position; a rank that printed nothing but was killed is
   still a culprit; "rank unknown" only when no known rank is a candidate;
4. nothing primary: the evidence points somewhere (silent ranks of a job of known size, a
   rank that vanished at an elastic reset), and the answer says so.

Every report carries one line of reasoning and a confidence, by the rules of docs/failure-model.md
("Confidence"): ``certain`` only when the culprit's own failure is recognised, comes first, and
no failure-shaped line no rule knows (kind ``unrecognised``, the safety net) and no other rank's
death evidence comes before it; ``likely`` when recognised evidence points to it but the order
is not established, or the cause is a consequence nothing else explains (a receive timeout);
``possible`` when an unrecognised failure comes first or is all there is, or the cause is a
warning read as the failure from the rank's silence after it (an NCCL chain);
``unknown`` when no rank can be named. Ranks a launcher reports failed the same way (the same
exit status or signal, nothing of their own) are named together: the order of a launcher's
lines is not causality.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from hvdlog.analyses.explain import cause_of, describe, noun, reason_of
from hvdlog.analyses.failure_evidence import Evidence, evidence_of, per_source
from hvdlog.analyses.fingerprint import fingerprint_of
from hvdlog.analyses.last_words import Key, find_last_words, read_in_context, why_read
from hvdlog.analyses.resets import epoch_of, lost_ranks, recovery_filter, recovery_of
from hvdlog.analyses.stalls import names_in, ranks_in
from hvdlog.analyses.summary import one_line
from hvdlog.documents import Document, get_field, in_place, job_of
from hvdlog.query.echoes import drop_echoes
from hvdlog.query.spec import MAX_JOB_SIZE, Condition, Filter, format_ranks

__all__ = ["FAILURE_EVENTS", "FailureReport", "find_first_failure", "first_failure"]

#: What the analysis needs from a source: evidence, errors, signals, exit codes, elastic resets.
FAILURE_EVENTS: Final = (
    Condition("log.level", min_level="error"),
    Condition("event.action", ("signal", "uncaught_exception", "elastic_reset")),
    Condition("process.exit_code"),
    Condition("hvdlog.evidence.kind"),
)


@dataclass
class FailureReport:
    """Who is to blame, why (one line), how sure, and everyone else's fate."""

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
    #: True when the cause is in the culprit's own output (or a stall report); False when only others' evidence points.
    primary: bool = False
    #: The cause in one line; without a primary, which evidence points to the blamed rank.
    cause: str = ""
    #: Why, in one line: the culprit's evidence and what the others' follows from.
    reasoning: str = ""
    #: certain | likely | possible | unknown (docs/failure-model.md, "Confidence").
    confidence: str = "unknown"
    #: False, or how an elastic job went on after the failure.
    recovered: bool | dict[str, Any] = False
    #: The launchers' lines about ranks (exit codes, signals, their verdicts).
    evidence: list[dict[str, Any]] = field(default_factory=list)
    #: What makes two jobs' failures the same (hvdlog.analyses.fingerprint): id, error_type, message, frame.
    fingerprint: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def _summary(item: Evidence, reason: str | None = None) -> dict[str, Any]:
    out = {
        "@timestamp": item.doc.get("@timestamp"),
        "rank": item.rank,
        "host": get_field(item.doc, "host.name"),
        "level": get_field(item.doc, "log.level"),
        "message": one_line(item.doc),
        "kind": item.kind,
        "source": item.source,
        "noun": noun(item),
        # the step the failing event carries (an exception inside hvdlog.step(7) says 7), None when it has none
        "step": step if isinstance(step := item.doc.get("step"), int) and not isinstance(step, bool) else None,
    }
    if epoch := epoch_of(item.doc):
        out["epoch"] = epoch
    if reason:
        out["reason"] = reason
    return out


@dataclass
class _Rank:
    """What the evidence says about one rank of one incarnation (an elastic reset renumbers ranks)."""

    rank: int | None
    epoch: int = 0
    items: list[Evidence] = field(default_factory=list)

    def relevant(self) -> list[Evidence]:
        """Its own evidence when it said anything, else the launchers' (verdicts are not about fate)."""
        items = [item for item in self.items if item.meaning in ("fault", "consequence", "expected")]
        own = [item for item in items if item.own]
        return own or items

    def fate(self) -> tuple[str, Evidence | None]:
        """``candidate``, ``collateral``, ``expected`` or ``none``, with the deciding evidence."""
        items = self.relevant()
        if any(item.meaning == "expected" for item in self.items):
            return "expected", next(item for item in self.items if item.meaning == "expected")
        if not items:
            return "none", None
        first = items[0]
        if first.meaning != "fault":
            return "collateral", first
        # the rank's opening faults (an `ERROR:` line, then its exception): the strongest says why
        leading = list(itertools.takewhile(lambda item: item.meaning == "fault", items))
        why = max(leading, key=lambda item: (item.strength, -item.order))
        before = [item for item in leading if item.order < why.order]
        if why.signal == "SIGABRT" and why.own and before:
            # an abort is how a process ends itself on an error it found: its own errors before it say why
            why = max(before, key=lambda item: (item.strength, -item.order))
        return "candidate", why

    def strength(self) -> int:
        return max((item.strength for item in self.relevant() if item.meaning == "fault"), default=0)


_Key = tuple[int, int | None]


def _by_rank(items: list[Evidence]) -> dict[_Key, _Rank]:
    """Evidence per (epoch, rank it is about): rank 1 before a reset is not rank 1 after it."""
    ranks: dict[_Key, _Rank] = {}
    for item in items:
        if item.meaning != "verdict" and item.kind != "stall_report":
            epoch = epoch_of(item.doc)
            ranks.setdefault((epoch, item.rank), _Rank(item.rank, epoch)).items.append(item)
    return ranks


def _verdict_ranks(items: list[Evidence]) -> list[int]:
    """Ranks the launchers name as the first to exit, in the order they say so."""
    return [item.rank for item in items if item.meaning == "verdict" and item.rank is not None]


def _top(candidates: list[tuple[_Rank, Evidence]]) -> list[tuple[_Rank, Evidence]]:
    top = max(rank.strength() for rank, _ in candidates)
    return [(rank, first) for rank, first in candidates if rank.strength() == top]


def _same_way(candidates: list[tuple[_Rank, Evidence]]) -> list[int]:
    """Ranks of the top candidates when each is only a launcher's word of the same exit status or
    signal (``ranks 0-3 exited with 1``): which of them came first, the launcher's lines do not say."""
    best = _top(candidates)
    if len(best) < 2 or any(first.own or rank.rank is None for rank, first in best):
        return []
    if len({(first.kind, first.exit_code, first.signal) for _, first in best}) != 1:
        return []
    return sorted(rank.rank for rank, _ in best if rank.rank is not None)


def _killed_while_terminating(pair: tuple[_Rank, Evidence], items: list[Evidence]) -> bool:
    """A stated causal rule: a rank killed (SIGKILL) after a launcher said it is terminating the
    workers because another rank failed was killed by it; it is not a candidate."""
    rank, first = pair
    if first.signal != "SIGKILL":
        return False
    return any(item.meaning == "verdict" and item.rank is not None and item.rank != rank.rank and item.order < first.order
               and (item.millis is None) == (first.millis is None) for item in items)


def _choose(candidates: list[tuple[_Rank, Evidence]], verdicts: list[int]) -> tuple[_Rank, Evidence, str]:
    """The culprit among candidates of the top strength, and what ordered it (time, verdict, position)."""
    best = _top(candidates)
    if len(best) == 1:
        return (*best[0], "only")
    if all(first.millis is not None for _, first in best):
        return (*min(best, key=lambda pair: (pair[1].millis, pair[1].order)), "time")
    for named in verdicts:
        for rank, first in best:
            if rank.rank == named:
                return rank, first, "verdict"
    return (*min(best, key=lambda pair: (not pair[1].own, pair[1].order)), "position")


def _stall_shutdown(items: list[Evidence]) -> Evidence | None:
    return next((item for item in items if item.kind == "stall_report" and item.meaning == "fault"), None)


def _verdict_note(items: list[Evidence], culprit: int | None) -> str:
    """What the launcher's "first process to do so" adds: it agrees, or it names a rank that only exited first."""
    verdict = next((item for item in items if item.meaning == "verdict" and item.rank is not None), None)
    if verdict is None:
        return ""
    if verdict.rank == culprit:
        return f"; {per_source(verdict.source).removeprefix('per ')} names it first too"
    return f"; {per_source(verdict.source).removeprefix('per ')} names rank {verdict.rank} first: it only exited first"


def _stall_first(stall: Evidence, chosen: tuple[_Rank, Evidence, str] | None) -> bool:
    """A stall shutdown comes before the candidate: always before a launcher's word or a rank-unknown line,
    by time when both have one, else by position."""
    if chosen is None or chosen[0].rank is None or not chosen[1].own:
        return True
    first = chosen[1]
    if stall.millis is not None and first.millis is not None:
        return stall.millis <= first.millis
    return stall.order <= first.order


def _last_stall_warning(items: list[Evidence]) -> Evidence | None:
    """The last stall report that names missing ranks (a warning: Horovod did not shut down on it)."""
    found = [item for item in items if item.kind == "stall_report" and ranks_in(get_field(item.doc, "horovod.stall.missing_ranks"))]
    return found[-1] if found else None


def _stall_outranks(warning: Evidence | None, chosen: tuple[_Rank, Evidence, str] | None) -> bool:
    """A stall hvdlog found outranks a launcher's word about a rank that only exited (it was
    waiting): the stall came first and the launcher names a rank the stall does not."""
    if warning is None or (chosen is not None and chosen[1].own):
        return False
    first = chosen[1] if chosen is not None else None
    if first is not None and first.millis is not None and warning.millis is not None and first.millis < warning.millis:
        return False  # the launcher's word is older than the stall (an untimed summary ends a job: it comes last)
    return chosen is None or chosen[0].rank not in ranks_in(get_field(warning.doc, "horovod.stall.missing_ranks"))


def _apply_stall(report: FailureReport, stall: Evidence, *, shutdown: bool = True) -> None:
    doc = stall.doc
    report.stall = {
        "@timestamp": doc.get("@timestamp"),
        "reported_by": doc.get("rank"),
        "missing_ranks": ranks_in(get_field(doc, "horovod.stall.missing_ranks")),
        "shutdown_ranks": ranks_in(get_field(doc, "horovod.stall.shutdown_ranks")),
        "tensors": names_in(get_field(doc, "horovod.stall.tensors")),
        "shutdown": shutdown,
    }
    report.blamed_ranks = report.stall["shutdown_ranks"] or report.stall["missing_ranks"]
    report.primary = True
    tensors = ", ".join(report.stall["tensors"]) or "the collective"
    who = f"rank(s) {', '.join(map(str, report.blamed_ranks))}" if report.blamed_ranks else "a rank the report does not name"
    report.cause = f"stall: {who} never joined {tensors} (reported by rank {report.stall['reported_by']}); Horovod shut the job down"
    report.reasoning = f"{who}: Horovod's stall inspector shut the job down waiting for them; every later error follows from it"
    report.confidence = "certain" if report.blamed_ranks else "likely"
    if not shutdown:
        report.cause = (f"stall: {who} never joined {tensors} (reported by rank {report.stall['reported_by']}); "
                        "the job then ended, and the launcher's word names only a rank that was waiting")
        report.reasoning = f"{who}: the last stall report names them missing; a launcher's exit summary does not outrank it"
        report.confidence = "likely"


def _apply_culprit(report: FailureReport, rank: _Rank, first: Evidence, ordered_by: str, items: list[Evidence]) -> None:
    report.culprit = _summary(first)
    report.blamed_ranks = [rank.rank]
    report.primary = first.own
    own_docs = [item.doc for item in rank.relevant() if item.meaning == "fault"]
    with_trace = next((doc for doc in own_docs if get_field(doc, "error.stack_trace")), first.doc)
    report.error_type = get_field(with_trace, "error.type")
    report.error_message = get_field(with_trace, "error.message") or first.doc.get("message")
    report.stack_trace = get_field(with_trace, "error.stack_trace")
    report.cause = cause_of(first)
    if not first.own:
        report.cause = f"{describe(first)}; rank {rank.rank} printed no error of its own; the launcher says: {one_line(first.doc)}"
    who = "rank unknown (an untagged line)" if rank.rank is None else f"rank {rank.rank}" + (f" (epoch {rank.epoch})" if rank.epoch else "")
    report.reasoning = f"{who}: {describe(first)} {_per(first)}{why_read(first)}"
    if not first.recognised:
        report.cause = f"a failure in a format hvdlog does not know: {who}: {report.cause}"
    report.confidence = _confidence(rank, first, ordered_by, items)


def _confidence(rank: _Rank, first: Evidence, ordered_by: str, items: list[Evidence]) -> str:
    """The rules of docs/failure-model.md ("Confidence") for a named culprit."""
    earlier = [item for item in items if item.order < first.order and item.meaning == "fault"]
    if not first.recognised or any(not item.recognised for item in earlier):
        return "possible"  # a failure in a format hvdlog does not know is the culprit, or came first (its own too)
    if first.kind == "nccl_warn":
        return "possible"  # a warning read as the failure from the rank's silence after it: no failure line confirms it
    if rank.rank is None:
        return "possible" if first.own else "unknown"  # a failure, but whose the logs do not say
    # another rank's death evidence came first (not a death after its own reaction to a lost peer: a consequence too)
    other_death = any(item.rank is not None and (epoch_of(item.doc), item.rank) != (rank.epoch, rank.rank)
                      and not _reacted_before(item, items) for item in earlier)
    # a consequence read as the failure (hvdlog.analyses.last_words) rests on what the logs lack
    sure = ordered_by in ("only", "time") and first.own and not other_death and first.read_as is None
    return "certain" if sure else "likely"


def _reacted_before(death: Evidence, items: list[Evidence]) -> bool:
    """``death``'s rank reacted to another rank's failure (peer loss, Horovod's shutdown, SIGTERM)
    before it: its exit is part of that reaction, no sign that it failed first."""
    key = (epoch_of(death.doc), death.rank)
    return any(item.meaning == "consequence" and item.order < death.order and (epoch_of(item.doc), item.rank) == key for item in items)


def _apply_same_way(report: FailureReport, ranks: list[int], first: Evidence) -> None:
    """Several ranks a launcher reports ended the same way: none of them is made the cause of the others."""
    who = format_ranks(ranks)
    report.blamed_ranks = list(ranks)
    report.cause = (f"ranks {who} failed the same way ({describe(first)} {_per(first)}); none printed an error of its own, "
                    "and the order of the launcher's lines does not say which came first")
    report.reasoning = f"ranks {who}: {describe(first)} {_per(first)}, each; no rank is the cause of the others"
    report.confidence = "possible" if report.confidence == "possible" else "likely"


def _per(item: Evidence) -> str:
    return per_source(item.source)


def _fates(report: FailureReport, ranks: dict[_Key, _Rank], culprit: Evidence | None, blamed: set[_Key]) -> None:
    """Every other known rank: collateral (a consequence, or a kill or exit status after the first
    failure) or a failure of its own (its own exception or crash after the culprit's), in the
    order they went down (their first evidence; rank order only breaks ties)."""
    def went_down(key: _Key) -> tuple[int, _Key]:
        return min((item.order for item in ranks[key].relevant()), default=0), key

    for key in sorted((k for k in ranks if k[1] is not None and k not in blamed), key=went_down):
        fate, first = ranks[key].fate()
        if first is None or fate in ("expected", "none"):
            continue
        own_failure = fate == "candidate" and first.own and first.signal != "SIGKILL" and report.stall is None
        if own_failure and report.blamed_ranks:
            report.other_errors.append(_summary(first))
        else:
            report.collateral.append(_summary(first, reason_of(first, culprit is not None)))
    if report.collateral and report.blamed_ranks:
        shown = report.collateral[:2]
        followers = " and ".join(f"rank {item['rank']}'s {item['noun']}" for item in shown)
        more = f" (and {len(report.collateral) - 2} more)" if len(report.collateral) > 2 else ""
        reasons = "; ".join(dict.fromkeys(str(item.get("reason")) for item in shown))
        verb = "follows" if len(shown) == 1 else "follow"
        report.reasoning += f"; {followers}{more} {verb} from it ({reasons})"


def _launcher_named(report: FailureReport, items: list[Evidence]) -> bool:
    """Every rank's own evidence is collateral, but a launcher names the first process to exit
    with a failure (Open MPI's box, horovodrun's verdict): that rank is where the evidence
    points, though its cause is not in these logs."""
    verdict = next((item for item in items if item.meaning == "verdict" and item.rank is not None), None)
    if verdict is None:
        return False
    source = per_source(verdict.source)
    report.blamed_ranks = [verdict.rank]
    report.cause = (f"no primary cause in these logs: rank {verdict.rank} exited first with a failure {source}; "
                    "its own output does not say why")
    report.reasoning = f"rank {verdict.rank}: the first process to exit with a failure {source}; every rank's own evidence is a consequence"
    report.confidence = "likely"
    return True


def _silent_ranks(docs: list[Document], ranks: dict[_Key, _Rank], size: int | None) -> tuple[list[int], int | None]:
    """Ranks of a job of known size that left no evidence while the others went down."""
    sizes = {doc["size"] for doc in docs if isinstance(doc.get("size"), int) and 0 < doc["size"] <= MAX_JOB_SIZE}
    if size is None and len(sizes) == 1:
        size = sizes.pop()
    if size is None:
        return [], None
    reported = {key[1] for key in ranks}
    return [rank for rank in range(size) if rank not in reported], size


def _no_primary(report: FailureReport, docs: list[Document], items: list[Evidence], ranks: dict[_Key, _Rank], size: int | None) -> None:
    """Nothing primary in the logs: say where the evidence points, and why."""
    if _launcher_named(report, items):
        return
    lost = lost_ranks(docs)
    if lost:
        first_reset = lost[0][1]
        report.blamed_ranks = [rank for rank, epoch, _ in lost if epoch == first_reset]
        report.cause = "; ".join(text for _, epoch, text in lost if epoch == first_reset)
        report.reasoning = f"rank(s) {', '.join(map(str, report.blamed_ranks))}: {report.cause}"
        report.confidence = "likely"
        return
    silent, known = _silent_ranks(docs, ranks, size)
    if silent:
        report.blamed_ranks = silent
        report.cause = (f"no primary cause in these logs: every failure is collateral, and rank(s) "
                        f"{', '.join(map(str, silent))} of the job reported nothing: their output is where the cause is")
        report.reasoning = f"rank(s) {', '.join(map(str, silent))} of {known}: the only ranks that left no evidence while the others went down"
        report.confidence = "likely"
        return
    report.cause = ("no primary cause in these logs: every failure is collateral (shutdown, lost peers, "
                    "terminated by the launcher); the rank that failed first left no output here")
    report.reasoning = "rank unknown: every rank's evidence is a consequence" + ("" if known else " (size unknown)")
    report.confidence = "unknown"


def _report(job: Any, docs: list[Document], items: list[Evidence], size: int | None, warning: Evidence | None = None) -> FailureReport:
    report = FailureReport(job, None)
    report.evidence = [_summary(item) for item in items if not item.own]
    ranks = _by_rank(items)
    candidates = [(rank, first) for rank in ranks.values() if (fate := rank.fate())[0] == "candidate" and (first := fate[1]) is not None]
    candidates = [pair for pair in candidates if not _killed_while_terminating(pair, items)] or candidates
    known = [pair for pair in candidates if pair[0].rank is not None]
    stall = _stall_shutdown(items)
    chosen = _choose(known or candidates, _verdict_ranks(items)) if candidates else None
    lost = lost_ranks(docs)
    if chosen is not None and lost and chosen[0].epoch >= lost[0][1]:
        chosen = None  # a rank vanished at an earlier reset: that came first (its candidates are later incarnations')
    if stall is not None and _stall_first(stall, chosen):
        _apply_stall(report, stall)
        if any(item.meaning == "fault" and not item.recognised and item.order < stall.order for item in items):
            report.confidence = "possible"  # a failure hvdlog does not know came before it
        chosen = None
    elif stall is None and _stall_outranks(warning, chosen) and warning is not None:
        _apply_stall(report, warning, shutdown=False)
        chosen = None
    elif chosen is not None:
        _apply_culprit(report, *chosen, items)
        same = _same_way(known or candidates)
        if same:
            _apply_same_way(report, same, chosen[1])
    else:
        _no_primary(report, docs, items, ranks, size)
    epoch = chosen[0].epoch if chosen else 0
    blamed = {(epoch, rank) for rank in report.blamed_ranks}
    _fates(report, ranks, chosen[1] if chosen else None, blamed)
    if chosen is not None:
        report.reasoning += _verdict_note(items, chosen[0].rank)
    report.recovered = recovery_of(docs, report)
    return report


def _failed(items: list[Evidence]) -> bool:
    """Something failed: a rank's fault or consequence (not an expected exit), a stall shutdown, a launcher verdict."""
    if _stall_shutdown(items) is not None or any(item.meaning == "verdict" for item in items):
        return True
    return any(rank.fate()[0] in ("candidate", "collateral") for rank in _by_rank(items).values())


def _is_failure(item: Evidence) -> bool:
    return item.meaning in ("fault", "consequence", "verdict") or item.kind == "expected_exit"


def first_failure(docs: Iterable[Document], *, size: int | None = None, last_words: Mapping[Key, Document] | None = None) -> list[FailureReport]:
    """One report per job that has any failure, ordered by the job's first failure.

    ``size``: the job size when the user knows it (``--size``); else the jobs' own events
    say it, or it is unknown. The native echo of an uncaught exception counts once (echoes).
    ``last_words``: per (job, rank), the NCCL WARN that opens the error chain the rank's output
    ends in (:func:`~hvdlog.analyses.last_words.find_last_words`); without it, no NCCL chain is a failure.
    """
    by_job: dict[Any, list[Document]] = {}
    for doc in drop_echoes(in_place(docs)):
        by_job.setdefault(job_of(doc), []).append(doc)
    reports = []
    for job, job_docs in by_job.items():
        items = [item for order, doc in enumerate(job_docs) if (item := evidence_of(doc, order)) is not None]
        lost = lost_ranks(job_docs)
        quiet: set[tuple[int | None, int]] = {(epoch - 1, rank) for rank, epoch, _ in lost}
        quiet |= {(None, rank) for rank in _silent_ranks(job_docs, _by_rank(items), size)[0]}
        items = read_in_context(items, {key: doc for key, doc in (last_words or {}).items() if key[0] == job}, quiet)
        failures = [item for item in items if _is_failure(item)]
        if _failed(failures) or lost:
            report = _report(job, job_docs, failures, size, _last_stall_warning(items))
            report.fingerprint = fingerprint_of(report)
            reports.append(report)
    return reports


def find_first_failure(search: Callable[[Filter], Iterable[Document]], base: Filter, *, size: int | None = None) -> list[FailureReport]:
    """:func:`first_failure` from a source: failure evidence first, then, for an elastic job that
    reset, the steps after its first reset (did it go on, and up to which step), and for a rank
    with an NCCL WARN, its last words (did NCCL go on after it)."""
    docs = list(search(replace(base, any_of=FAILURE_EVENTS)))
    extra = recovery_filter(docs, base)
    if extra is not None:
        docs += [doc for doc in search(extra) if not Filter(any_of=FAILURE_EVENTS).matches(doc)]
    return first_failure(docs, size=size, last_words=find_last_words(search, docs, base))


"""``hvdlog report``: every analysis of a job from ONE read of its documents.

The documents are read once. Each one updates the job's facts (ranks, hosts, time span,
last step, exit codes); those an analysis needs (failures, stalls, steps, resources) are
kept, and each section runs the existing analysis on the kept list through a small adapter
(:func:`failure_section`, :func:`stall_section`, ...). The adapters read the analyses' JSON,
not their classes, and take new keys (``reasoning``, ``confidence``, ``recovered`` of
first-failure) when present, so an analysis can change without this module changing.

Every verdict says why in one line and how sure: ``certain``, ``likely`` or ``unknown``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from hvdlog.analyses.autotune import AutotuneResult, describe
from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.resources import RESOURCE_EVENTS, figures, short
from hvdlog.analyses.stalls import STALL_EVENTS, find_stalls
from hvdlog.analyses.stragglers import STEP_EVENTS, RankProgress, stragglers
from hvdlog.documents import Document, get_field, job_of, timestamp_millis
from hvdlog.query.spec import MAX_JOB_SIZE, Condition, Filter, format_ranks

__all__ = ["QUIET_SECONDS", "JobFacts", "autotune_section", "collect", "iso", "job_status", "report"]

#: A job whose newest event is younger than this, with no failure and no exit record, is running.
QUIET_SECONDS: Final = 300.0
#: What any section needs; everything else only updates the facts.
_KEPT: Final = Filter(any_of=(*FAILURE_EVENTS, *STALL_EVENTS, *STEP_EVENTS, *RESOURCE_EVENTS))


@dataclass
class JobFacts:
    """What one pass over a job's documents says without any analysis."""

    job: str | None
    ranks: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    first_ms: int | None = None
    last_ms: int | None = None
    last_step: int | None = None
    size: int | None = None
    events: int = 0
    #: rank -> exit code, from the launcher's or the capture's lines.
    exit_codes: dict[int, int] = field(default_factory=dict)
    #: (epoch ms, step) of the earliest and the latest timed event that carries a step.
    first_step_at: tuple[int, int] | None = None
    last_step_at: tuple[int, int] | None = None

    def step_seconds(self) -> float | None:
        """Mean seconds per step between the first and the last stepped event; None when they span no step.
        ``report`` and ``jobs`` both judge silence by it, so they give a job the same status."""
        if self.first_step_at is None or self.last_step_at is None or self.last_step_at[1] <= self.first_step_at[1]:
            return None
        return (self.last_step_at[0] - self.first_step_at[0]) / 1000 / (self.last_step_at[1] - self.first_step_at[1])

    def saw_step(self, millis: int, step: int) -> None:
        """A timed event at ``step``: widens the stepping span."""
        if self.first_step_at is None or millis < self.first_step_at[0]:
            self.first_step_at = (millis, step)
        if self.last_step_at is None or millis > self.last_step_at[0]:
            self.last_step_at = (millis, step)

    def add(self, doc: Document) -> None:
        """Fold one document into the facts."""
        self.events += 1
        rank, step, size = doc.get("rank"), doc.get("step"), doc.get("size")
        if isinstance(rank, int) and not isinstance(rank, bool):
            self.ranks.add(rank)
            code = get_field(doc, "process.exit_code")
            if isinstance(code, int):
                self.exit_codes[rank] = code
        if isinstance(host := get_field(doc, "host.name"), str):
            self.hosts.add(host)
        if isinstance(step, int) and not isinstance(step, bool):
            self.last_step = step if self.last_step is None else max(self.last_step, step)
        if isinstance(size, int) and 0 < size <= MAX_JOB_SIZE:
            self.size = max(self.size or 0, size)
        millis = timestamp_millis(doc.get("@timestamp"))
        if millis is not None:
            self.first_ms = millis if self.first_ms is None else min(self.first_ms, millis)
            self.last_ms = millis if self.last_ms is None else max(self.last_ms, millis)
            if isinstance(step, int) and not isinstance(step, bool):
                self.saw_step(millis, step)


def collect(docs: Iterable[Document], on_progress: Callable[[int], None] | None = None) -> tuple[dict[str | None, JobFacts], list[Document]]:
    """One pass: facts per job, and the documents the sections need."""
    facts: dict[str | None, JobFacts] = {}
    kept: list[Document] = []
    for count, doc in enumerate(docs, 1):
        job = job_of(doc)
        (facts.get(job) or facts.setdefault(job, JobFacts(job))).add(doc)
        if _KEPT.matches(doc):
            kept.append(doc)
        if on_progress is not None and count % 5000 == 0:
            on_progress(count)
    return facts, kept


def iso(millis: int | None) -> str | None:
    """``2026-11-29T15:47:55.123Z`` from epoch milliseconds."""
    if millis is None:
        return None
    seconds, rest = divmod(millis, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{rest:03d}Z"


def _verdict(state: str, confidence: str, reasoning: str) -> dict[str, str]:
    return {"state": state, "confidence": confidence, "reasoning": reasoning}


def job_status(facts: JobFacts, failure: Mapping[str, Any] | None, now: float | None = None) -> dict[str, str]:
    """running / finished / failed / recovered / unknown, with how sure and why (one line).

    Without a failure or exit records, silence decides: a job is running while its newest
    event is younger than 20 of its step intervals (:meth:`JobFacts.step_seconds`; at least
    30 s, at most :data:`QUIET_SECONDS`, which is also the rule when it logs no steps). A
    hung rank is not silent: its watchdog keeps reporting.
    """
    step_seconds = facts.step_seconds()
    if failure is not None:
        recovered = failure.get("recovered")
        if recovered:
            why = recovered.get("reasoning") if isinstance(recovered, Mapping) else None
            return _verdict("recovered", "likely", str(why or "the job went on after the failure"))
        return _verdict("failed", str(failure.get("confidence") or "likely"), str(failure.get("summary") or "a rank failed"))
    codes = facts.exit_codes
    if codes and all(code == 0 for code in codes.values()) and (facts.size is None or len(codes) >= facts.size):
        return _verdict("finished", "certain", f"every rank exited with status 0 ({len(codes)} exit records)")
    if facts.last_ms is None:
        return _verdict("unknown", "unknown", "no event carries a time")
    age = (now if now is not None else time.time()) - facts.last_ms / 1000
    quiet = QUIET_SECONDS if not step_seconds else min(QUIET_SECONDS, max(30.0, 20 * step_seconds))
    if age < quiet:
        return _verdict("running", "likely", f"the newest event is {_age(age)} old and no failure is recorded")
    return _verdict("finished", "likely", f"no failure in the logs and no event for {_age(age)}"
                    + (f" (over 20 step intervals of {step_seconds:.2g} s)" if step_seconds else "")
                    + "; no exit record says so for certain")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def failure_section(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """first-failure's JSON cut to what a report shows; ``reasoning``/``confidence``/``recovered`` when the analysis gives them."""
    if found is None:
        return None
    blamed = [rank for rank in found.get("blamed_ranks") or [] if rank is not None]
    culprit = found.get("culprit") or {}
    confidence = found.get("confidence") or ("certain" if found.get("primary") else "likely" if blamed else "unknown")
    who = f"rank {format_ranks(blamed)}" if blamed else "no rank named"
    summary = f"{who}: {found.get('cause') or 'a failure'}"
    return {
        "summary": summary,
        "blamed_ranks": blamed,
        "at": culprit.get("@timestamp") or (found.get("stall") or {}).get("@timestamp"),
        "reasoning": found.get("reasoning") or found.get("cause") or "",
        "confidence": confidence,
        "recovered": found.get("recovered"),
        "collateral_ranks": sorted({item.get("rank") for item in found.get("collateral") or [] if isinstance(item.get("rank"), int)}),
    }


def stall_section(episodes: list[Mapping[str, Any]]) -> dict[str, Any]:
    """How many stall episodes, the longest, who was missing, whether one shut the job down."""
    if not episodes:
        return {"episodes": 0, "summary": "no stall"}
    longest = max(episodes, key=lambda e: e.get("duration_s") or 0.0)
    missing = sorted({rank for e in episodes for rank in e.get("missing_ranks") or []})
    ended = "one shut the job down" if any(e.get("shutdown") for e in episodes) else (
        "all resolved" if all(e.get("resolved") for e in episodes) else "not all resolved")
    return {
        "episodes": len(episodes),
        "missing_ranks": missing,
        "longest_s": longest.get("duration_s"),
        "longest_step": longest.get("step"),
        "shutdown": any(e.get("shutdown") for e in episodes),
        "summary": (f"{len(episodes)} episode(s), longest {longest.get('duration_s') or 0:.1f} s"
                    + (f" at step {longest['step']}" if longest.get("step") is not None else "")
                    + f"; missing rank(s) {format_ranks(missing) or '?'}; {ended}"),
    }


def straggler_section(rows: list[RankProgress]) -> dict[str, Any]:
    """Flagged ranks with their first reason, and every rank's last step (the picture)."""
    flagged = [row for row in rows if row.outlier]
    progress = {row.rank: row.last_step for row in rows}
    if not rows:
        return {"flagged": [], "progress": {}, "summary": "no step events: progress unknown"}
    text = "; ".join(f"rank {row.rank}: {row.reasons[0]}" for row in flagged[:3]) if flagged else "none: every rank keeps pace"
    more = f" (+{len(flagged) - 3} more)" if len(flagged) > 3 else ""
    return {
        "flagged": [{"rank": row.rank, "reasons": row.reasons} for row in flagged],
        "progress": progress,
        "summary": text + more,
    }


def timeline_section(analysis: Any, named: list[Any]) -> dict[str, Any]:
    """The timeline's verdict: who the collectives waited for, or that nobody stood out."""
    if analysis is None:
        return {"recorded": False, "summary": "no Horovod timeline recorded (HVDLOG_TIMELINE=1 records one)"}
    ranks = [row.rank for row in named]
    top = analysis.top_ranks(1)
    if ranks:
        worst = named[0]
        text = (f"the others waited for rank {format_ranks(ranks)}: last ready in {worst.times_last}/{analysis.attributed} "
                f"negotiations, {worst.wait_caused_seconds:.3g} s of waiting caused")
    elif top:
        text = f"no rank made the others wait consistently ({analysis.negotiations} negotiations, {analysis.attributed} with per-rank readiness)"
    else:
        text = "the timeline names no rank (no negotiation with per-rank readiness)"
    return {"recorded": True, "named_ranks": ranks, "negotiations": analysis.negotiations, "summary": text,
            "wait_caused": {row.rank: round(row.wait_caused_seconds, 6) for row in analysis.ranks}}


def resource_section(found: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """Each rank's figures in a few words."""
    if not found:
        return {"ranks": {}, "summary": "no resources events (configure(resources=...) samples CPU, memory, GPU)"}
    text = "; ".join(f"rank {rank}: {short(dict(values)) or 'no figures'}" for rank, values in sorted(found.items())[:4])
    return {"ranks": {rank: dict(values) for rank, values in found.items()}, "summary": text + (" …" if len(found) > 4 else "")}


def autotune_section(result: AutotuneResult | None) -> dict[str, Any] | None:
    """The fusion threshold and cycle time Horovod's autotuner kept; None when the job did not autotune."""
    if result is None:
        return None
    return {**asdict(result), "summary": describe(result)}


def _searcher(kept: list[Document]) -> Callable[[Filter], Iterable[Document]]:
    """Search the kept documents like a source (for find_stalls, which asks twice)."""
    return lambda spec: (doc for doc in kept if spec.matches(doc))


def report(
    facts: Mapping[str | None, JobFacts],
    kept: list[Document],
    timelines: Mapping[str | None, Any],
    culprits: Callable[[Any], list[Any]],
    base: Filter | None = None,
    now: float | None = None,
    autotune: Mapping[str, AutotuneResult] | None = None,
    reread: Callable[[Filter], Iterable[Document]] | None = None,
) -> list[dict[str, Any]]:
    """One report per job, newest activity last; the analyses run on the kept documents only.
    ``autotune``: per job, what Horovod's autotuner kept (from the job folder's log).
    ``reread``: the source searched again where the kept documents cannot answer (untimed
    stall reports, split by the reporter's own prints: :func:`~hvdlog.analyses.stalls.find_stalls`),
    so ``report`` and ``stalls`` give the same episodes."""
    base = replace(base or Filter(), any_of=())
    failures = {str(r.job): r.to_json() for r in first_failure(d for d in kept if Filter(any_of=FAILURE_EVENTS).matches(d))}
    episodes = [e.to_json() for e in find_stalls(_searcher(kept), base, reread=reread)]
    rows = stragglers(d for d in kept if Filter(any_of=STEP_EVENTS).matches(d))
    resources = figures(d for d in kept if Filter(any_of=RESOURCE_EVENTS).matches(d))
    reports = []
    for job, job_facts in sorted(facts.items(), key=lambda item: item[1].last_ms or 0):
        failure = failure_section(failures.get(str(job)))
        timeline = timelines.get(job) or (timelines.get(None) if len(facts) == 1 else None)
        reports.append({
            "job": job,
            "ranks": sorted(job_facts.ranks),
            "size": job_facts.size,
            "hosts": sorted(job_facts.hosts),
            "first": iso(job_facts.first_ms),
            "last": iso(job_facts.last_ms),
            "last_step": job_facts.last_step,
            "events": job_facts.events,
            "status": job_status(job_facts, failure, now),
            "first_failure": failure,
            "stalls": stall_section([e for e in episodes if e.get("job") == job]),
            "stragglers": straggler_section([row for row in rows if row.job == job]),
            "timeline": timeline_section(timeline, culprits(timeline) if timeline is not None else []),
            "resources": resource_section({rank: values for (j, rank), values in resources.items() if j == job}),
            "autotune": autotune_section((autotune or {}).get(str(job))),
        })
    return reports


#: Conditions re-exported for callers that narrow a source to what a report needs.
NEEDED: Final[tuple[Condition, ...]] = _KEPT.any_of

"""``hvdlog report``: every analysis of a job from ONE read of its documents.

The documents are read once. Each one updates the job's facts (ranks, hosts, time span,
last step, exit records); those an analysis needs (failures, stalls, steps, resources, exit
records) are kept, the job model (:mod:`hvdlog.analyses.job`) is built from the analyses'
results on the kept list, and each section renders a part of it (:func:`failure_section`,
:func:`stall_section`, ...): the status, culprit and step are the model's, as in every other command.

Every verdict says why in one line and how sure: ``certain``, ``likely``, ``possible`` or ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Final

from hvdlog.analyses.autotune import AutotuneResult, describe
from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.job import QUIET_SECONDS, JobModel, build
from hvdlog.analyses.job_facts import END_EVENTS, JobFacts, iso
from hvdlog.analyses.last_words import find_last_words
from hvdlog.analyses.resets import recovery_filter
from hvdlog.analyses.resources import RESOURCE_EVENTS, figures, short
from hvdlog.analyses.stalls import STALL_EVENTS, find_stalls
from hvdlog.analyses.stragglers import STEP_EVENTS, RankProgress, corroborate, picture_figure, settle, stragglers
from hvdlog.documents import Document, job_of
from hvdlog.query.spec import Condition, Filter, format_ranks

__all__ = ["QUIET_SECONDS", "JobFacts", "autotune_section", "collect", "iso", "models", "report"]

#: What any section needs; everything else only updates the facts.
_KEPT: Final = Filter(any_of=(*FAILURE_EVENTS, *STALL_EVENTS, *STEP_EVENTS, *RESOURCE_EVENTS, *END_EVENTS))


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


def failure_section(model: JobModel) -> dict[str, Any] | None:
    """The model's culprit as a report shows it: who, at which step, why, how sure; None when nothing failed."""
    culprit, found = model.culprit, model.failure
    if culprit is None or found is None:
        return None
    blamed = list(culprit["ranks"])
    who = f"rank {format_ranks(blamed)}" if blamed else "no rank named"
    step = f" at step {culprit['step']}" if culprit.get("step") is not None else ""
    return {
        "summary": f"{who}{step}: {culprit.get('cause') or 'a failure'}",
        "blamed_ranks": blamed,
        "step": culprit.get("step"),
        "at": culprit.get("at"),
        "reasoning": culprit.get("reasoning") or culprit.get("cause") or "",
        "confidence": culprit.get("confidence") or "unknown",
        "recovered": model.recovered,
        "collateral_ranks": sorted({item.get("rank") for item in found.get("collateral") or [] if isinstance(item.get("rank"), int)}),
        "fingerprint": found.get("fingerprint"),
    }


def stall_section(episodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many stall episodes, the longest, who was missing, and how each ended (the model's words)."""
    if not episodes:
        return {"episodes": 0, "summary": "no stall"}
    longest = max(episodes, key=lambda e: e.get("duration_s") or 0.0)
    missing = sorted({rank for e in episodes for rank in e.get("missing_ranks") or []})
    ends = dict.fromkeys(str(e.get("ended")) for e in episodes)
    ended = "all resolved" if list(ends) == ["resolved"] else ", ".join(ends)
    hang = longest.get("hang") or {}
    said = ""
    if hang.get("kind"):  # the longest episode's hang class (stalls' verdict), with its culprits
        culprits = format_ranks(hang.get("culprits") or [])
        said = f"; hang: {str(hang['kind']).replace('_', ' ')} ({hang.get('confidence')})" + (f", rank {culprits}" if culprits else "")
    return {
        "episodes": len(episodes),
        "missing_ranks": missing,
        "longest_s": longest.get("duration_s"),
        "longest_step": longest.get("step"),
        "shutdown": any(e.get("shutdown") for e in episodes),
        "ended": list(ends),
        "hang": hang or None,
        "summary": (f"{len(episodes)} episode(s), longest {longest.get('duration_s') or 0:.1f} s"
                    + (f" at step {longest['step']}" if longest.get("step") is not None else "")
                    + f"; missing rank(s) {format_ranks(missing) or '?'}; {ended}{said}"),
    }


def straggler_section(model: JobModel, rows: list[RankProgress]) -> dict[str, Any]:
    """Flagged ranks with their first reason and evidence (step figures and the timeline), the job's
    verdict when none is flagged, every rank's last step, and the picture: each rank's samples/s
    (what differs between ranks; last steps are equal in synchronous training)."""
    flagged = model.stragglers
    progress = {row.rank: row.last_step for row in rows}
    title, values = picture_figure(rows)
    text = "; ".join(f"rank {item['rank']}: {item['reasons'][0]}" for item in flagged[:3]) if flagged else model.straggler_verdict
    more = f" (+{len(flagged) - 3} more)" if len(flagged) > 3 else ""
    return {"flagged": flagged, "progress": progress, "picture": {"figure": title, "ranks": values} if values else None,
            "summary": text + more}


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


def models(
    facts: Mapping[str | None, JobFacts],
    kept: list[Document],
    timelines: Mapping[str | None, Any],
    base: Filter | None = None,
    now: float | None = None,
    reread: Callable[[Filter], Iterable[Document]] | None = None,
) -> tuple[dict[str | None, JobModel], list[RankProgress]]:
    """Every job's model from the kept documents, and the stragglers rows (with the timeline's evidence, as
    ``hvdlog stragglers`` judges them). ``reread``: the source searched again where the kept documents
    cannot answer (untimed stall reports: :func:`~hvdlog.analyses.stalls.find_stalls`; a rank's last words
    after an NCCL WARN: :func:`~hvdlog.analyses.last_words.find_last_words`)."""
    from hvdlog.timeline.wait_evidence import attach

    base = replace(base or Filter(), any_of=())
    evidence = _failure_documents(kept, base)
    words = find_last_words(reread, evidence, base) if reread is not None else None  # did NCCL go on after a WARN?
    failures = {str(r.job): r.to_json() for r in first_failure(evidence, last_words=words)}
    episodes = find_stalls(_searcher(kept), base, reread=reread)
    rows = stragglers(d for d in kept if Filter(any_of=STEP_EVENTS).matches(d))
    attach(rows, dict(timelines))  # as `hvdlog stragglers` does: the same rows, the same flags
    corroborate(rows)
    settle(rows)
    found = {}
    for job, job_facts in facts.items():
        job_docs = [doc for doc in kept if job_of(doc) == job]
        found[job] = build(job_facts, failures.get(str(job)), [e for e in episodes if e.job == job],
                           [row for row in rows if row.job == job], job_docs, now)
    return found, rows


def _failure_documents(kept: list[Document], base: Filter) -> list[Document]:
    """What ``first-failure`` reads (:func:`~hvdlog.analyses.failures.find_first_failure`): the failure
    evidence, and for an elastic job that reset, the step events since its first reset."""
    is_failure = Filter(any_of=FAILURE_EVENTS)
    docs = [doc for doc in kept if is_failure.matches(doc)]
    extra = recovery_filter(docs, base)
    if extra is not None:
        docs += [doc for doc in kept if extra.matches(doc) and not is_failure.matches(doc)]
    return docs


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
    """One report per job, newest activity last: the job model (:func:`models`) rendered as sections.
    ``autotune``: per job, what Horovod's autotuner kept (from the job folder's log)."""
    found, rows = models(facts, kept, timelines, base, now, reread)
    resources = figures(d for d in kept if Filter(any_of=RESOURCE_EVENTS).matches(d))
    reports = []
    for job, job_facts in sorted(facts.items(), key=lambda item: item[1].last_ms or 0):
        model = found[job]
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
            "status": model.status,
            "verdict": model.verdict(),
            "first_failure": failure_section(model),
            "stalls": stall_section(model.stalls),
            "stragglers": straggler_section(model, [row for row in rows if row.job == job]),
            "timeline": timeline_section(timeline, culprits(timeline) if timeline is not None else []),
            "resources": resource_section({rank: values for (j, rank), values in resources.items() if j == job}),
            "autotune": autotune_section((autotune or {}).get(str(job))),
            "fates": model.fates,
            "incarnations": model.incarnations,
        })
    return reports


#: Conditions re-exported for callers that narrow a source to what a report needs.
NEEDED: Final[tuple[Condition, ...]] = _KEPT.any_of

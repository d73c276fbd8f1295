"""``hvdlog watch``'s detectors: events go in as they arrive, alerts come out once per episode.

The analyses stay where they are (:mod:`~hvdlog.analyses.failures`, :mod:`~hvdlog.analyses.stalls`,
:mod:`~hvdlog.analyses.stragglers`); this module keeps the few events each needs, per job and
bounded, re-runs them on every :meth:`Watcher.check` and turns what changed into
:class:`Alert` s. Small adapter functions read the analyses' results, and read the newer keys
(``reasoning``, ``confidence``) when the analysis provides them, so a rewrite of an analysis
does not touch this module.

Episodes and deduplication: one failure alert per job (later failures are ``update`` s of
it, naming the collateral ranks); at most one open stall alert per job whatever the number
of ranks or sources reporting it (``resolved`` when every episode ended); one straggler
alert per (job, rank); one silent-rank alert per job, updated as ranks go quiet; one
job-finished alert per job. A silent rank is one whose files (or documents) got nothing
for ``silent_after`` seconds while another rank of its job still logs: in a synchronous job
the others cannot advance without it, so their stall reports are what "still running" looks like.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.hang import HangVerdict, hang_verdict, roll_call
from hvdlog.analyses.job import culprit_of, status_of, verdict_of
from hvdlog.analyses.job_facts import JobFacts
from hvdlog.analyses.last_words import CHAIN_KINDS
from hvdlog.analyses.stalls import STALL_EVENTS, StallEpisode, stall_episodes
from hvdlog.analyses.stragglers import corroborate, settle, stragglers
from hvdlog.documents import Document, get_field, job_of, timestamp_millis
from hvdlog.parse.evidence_rules import KIND
from hvdlog.query.spec import MAX_JOB_SIZE, Filter, format_ranks
from hvdlog.timeline.wait_evidence import attach

__all__ = ["KINDS", "Alert", "Watcher", "failure_view", "straggler_view"]

#: The alert kinds, in the order the docs list them.
KINDS: Final = ("failure", "stall", "straggler", "silent_rank", "job_finished")
#: The smallest default silence threshold (seconds), whatever the step time.
MIN_SILENT_S: Final = 60.0
#: Seconds a first failure that names no culprit yet waits for the rest of its chain (the culprit's traceback
#: may land a poll later). A failure whose culprit the model already names (certain, or likely: the only
#: ranks that left no evidence) is alerted at once, and refined by an update if later evidence changes it.
SETTLE_S: Final = 2.0
#: Seconds a stall whose hang class rests on a rank's silence waits for that rank's own report: the
#: watchdogs of one job report about one watchdog poll (at most 1 s) apart, so a rank is not called
#: silent before its report had the time to land.
SILENCE_GRACE_S: Final = 1.5
#: Seconds a watchdog stall before the job's first step must last to be alerted: while ranks import and join, the
#: first ones wait in ``hvd.init``/``broadcast_parameters`` for the slowest (over 10 s on a loaded machine), which
#: is no hang; one that lasts this long is. (Horovod's inspector reports only after a minute of its own.)
STARTUP_STALL_S: Final = 60.0
#: Step events kept per rank for the straggler analysis, and the fewest it needs from every rank.
STEP_WINDOW: Final = 60
MIN_STEPS: Final = 5
#: How far below the median a rank's rate or samples/s must be to alert (the analysis' own default, 0.25,
#: flags noise on a loaded machine; a page at night should mean "less than half the others' speed").
STRAGGLER_TOLERANCE: Final = 0.5
#: Checks in a row a straggler must be flagged on before it is alerted.
STRAGGLER_CHECKS: Final = 3
#: Seconds between two reads of the job's Horovod timeline (the only evidence that can name one of 2 ranks).
TIMELINE_EVERY_S: Final = 30.0
#: Kept per job, so memory follows ranks and answers, not the events (the oldest go first).
MAX_KEPT: Final = 20_000

_IS_FAILURE: Final = Filter(any_of=FAILURE_EVENTS)
_IS_STALL: Final = Filter(any_of=STALL_EVENTS)


@dataclass
class Alert:
    """What a webhook receives: one episode's start (``firing``), ``update`` or ``resolved``."""

    kind: str
    status: str
    job: str | None
    ranks: list[int]
    summary: str
    reasoning: str
    time: str
    hosts: list[str] = field(default_factory=list)
    step: int | None = None
    confidence: str | None = None
    #: The episode this message belongs to: the same for its firing, updates and resolution.
    episode: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The alert as the JSON a webhook or ``--exec`` command gets."""
        return asdict(self)


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ranks(values: Iterable[Any]) -> list[int]:
    return sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool)})


def failure_view(report: Any) -> dict[str, Any]:
    """The failure analysis' report as an alert needs it; ``reasoning``/``confidence`` when the analysis gives them."""
    data = report.to_json() if hasattr(report, "to_json") else dict(report)
    blamed = _ranks(data.get("blamed_ranks") or [])
    others = _ranks(item.get("rank") for item in [*data.get("collateral", []), *data.get("other_errors", [])])
    cause = str(data.get("cause") or "")
    reasoning = str(data.get("reasoning") or cause)
    confidence = data.get("confidence") or ("certain" if data.get("primary") else "likely" if blamed else "unknown")
    culprit = data.get("culprit") or {}
    return {"blamed": blamed, "others": [r for r in others if r not in blamed], "cause": cause, "reasoning": reasoning,
            "confidence": confidence, "host": culprit.get("host"), "time": culprit.get("@timestamp"),
            "recovered": data.get("recovered")}


def straggler_view(row: Any) -> dict[str, Any] | None:
    """A stragglers row as a flag with its evidence, or None when it is not one (or the data cannot say).

    A row with the analysis' own ``confidence`` counts only when certain or likely; without
    it, a flag needs a reason other than "no step events" (silence is the silent-rank alert's).
    """
    data = row.to_json() if hasattr(row, "to_json") else dict(row)
    reasons = [r for r in data.get("reasons", []) if r != "no step events"]
    confidence = data.get("confidence")
    if not data.get("outlier") or not reasons or (confidence in ("unknown", None) and "confidence" in data):
        return None
    return {"rank": data["rank"], "host": data.get("host"), "step": data.get("last_step"), "reasons": reasons,
            "reasoning": str(data.get("reasoning") or "; ".join(reasons)), "confidence": confidence or "likely"}


@dataclass
class _Job:
    """What the detectors keep of one job: bounded by ranks, not by events."""

    name: str | None
    size: int | None = None
    last_seen: dict[int, float] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)
    last_step: dict[int, tuple[int, float]] = field(default_factory=dict)  # rank -> (step, event time s)
    step_seconds: dict[int, deque[float]] = field(default_factory=dict)
    steps: dict[int, deque[Document]] = field(default_factory=dict)
    latest_step_doc: dict[int, Document] = field(default_factory=dict)
    failures: deque[Document] = field(default_factory=lambda: deque(maxlen=MAX_KEPT))
    stall_docs: deque[Document] = field(default_factory=lambda: deque(maxlen=MAX_KEPT))
    first_failure_at: float | None = None
    failure_count: int = 0
    analysed_failures: int = 0
    # alert state
    failure_sent: set[int] | None = None
    #: The culprit the last failure alert named: (ranks, confidence, cause), so a refinement is an update.
    failure_named: tuple[tuple[int, ...], str, str] | None = None
    stall_open: str | None = None
    #: The hang class the open stall alert (or its last update) said.
    stall_class: str | None = None
    #: When each held stall episode was first seen, and when it began as seen then (its alert waits: a silent rank's
    #: report may be a poll away, a slow start is no hang).
    stall_held: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    stall_seen: set[tuple[str, str]] = field(default_factory=set)  # (start, source) of every episode seen
    stall_members: set[tuple[str, str]] = field(default_factory=set)  # episodes merged into the open alert
    straggling: dict[int, int] = field(default_factory=dict)  # rank -> consecutive flagged (>0) / cleared (<0) checks
    straggler_open: set[int] = field(default_factory=set)
    silent: set[int] = field(default_factory=set)
    #: Ranks that reported a failure of their own: their silence afterwards is explained.
    failed: set[int] = field(default_factory=set)
    finished: bool = False
    finish_sent: bool = False
    #: The recorded facts (exit records, the launcher's status) the job model's status rests on.
    facts: JobFacts = field(default_factory=lambda: JobFacts(None))
    #: Stall episodes alerted on (firing), for the finished line.
    stalls_alerted: int = 0

    def host_list(self, ranks: Iterable[int]) -> list[str]:
        return sorted({self.hosts[r] for r in ranks if r in self.hosts})


class Watcher:
    """Feed documents with :meth:`add`, call :meth:`check` every poll; each returns the new alerts."""

    def __init__(self, silent_after: float | None = None, finished_after: float | None = None, merge_gap: float = 150.0,
                 timelines: Callable[[], Mapping[str | None, Any]] | None = None) -> None:
        self.silent_after = silent_after
        self.finished_after = finished_after
        self.merge_gap = merge_gap
        self.jobs: dict[Any, _Job] = {}
        #: Reads the watched jobs' Horovod timelines (by job), at most every TIMELINE_EVERY_S and at a job's end.
        self.timelines = timelines
        self._timeline_read: tuple[float, dict[str | None, Any]] | None = None
        #: The earliest time (s) a held decision is due: the caller's loop checks again then, not a poll later.
        self.due: float | None = None

    def _timeline(self, now: float, *, fresh: bool = False) -> dict[str | None, Any]:
        """The timeline analyses, read again when older than TIMELINE_EVERY_S (or ``fresh``); never raises."""
        if self.timelines is None:
            return {}
        if fresh or self._timeline_read is None or now - self._timeline_read[0] >= TIMELINE_EVERY_S:
            try:
                self._timeline_read = (now, dict(self.timelines()))
            except Exception:  # noqa: BLE001 - a timeline being written may not parse yet: the next read will
                self._timeline_read = (now, self._timeline_read[1] if self._timeline_read else {})
        return self._timeline_read[1]

    def _with_timeline(self, rows: list[Any], now: float, *, fresh: bool = False) -> list[Any]:
        """The rows with the timeline's evidence, judged as ``hvdlog stragglers`` judges them."""
        analyses = self._timeline(now, fresh=fresh)
        if analyses:
            attach(rows, analyses)
            corroborate(rows)
            settle(rows)
        return rows

    def add(self, doc: Document, now: float) -> None:
        """One document, received at ``now`` (seconds since the epoch)."""
        name = job_of(doc)
        job = self.jobs.get(name)
        if job is None:
            job = self.jobs[name] = _Job(name, facts=JobFacts(name))
        job.facts.add(doc)
        job.finished = False  # a job that logs again was not finished (a long checkpoint, an elastic restart)
        rank = doc.get("rank")
        if isinstance(size := doc.get("size"), int) and 0 < size <= MAX_JOB_SIZE:
            job.size = size
        failure = _IS_FAILURE.matches(doc) and not _is_stall_report(doc) and not _clean_exit(doc) and not _nccl_chain(doc)
        stall = _IS_STALL.matches(doc)
        if isinstance(rank, int) and not isinstance(rank, bool):
            job.last_seen[rank] = now
            if isinstance(host := get_field(doc, "host.name"), str):
                job.hosts[rank] = host
            if isinstance(doc.get("step"), int) and not isinstance(doc.get("step"), bool) and not failure and not stall:
                self._add_step(job, rank, doc)  # progress: a stall report or a crash repeats the step it is at
        if failure:
            job.failures.append(doc)
            job.failure_count += 1
            if isinstance(rank, int):
                job.failed.add(rank)
            job.first_failure_at = job.first_failure_at or now
        if stall:
            job.stall_docs.append(doc)

    @staticmethod
    def _add_step(job: _Job, rank: int, doc: Document) -> None:
        job.steps.setdefault(rank, deque(maxlen=STEP_WINDOW)).append(doc)
        job.latest_step_doc[rank] = doc
        millis = timestamp_millis(doc.get("@timestamp"))
        if millis is None:
            return
        step, seconds = doc["step"], millis / 1000
        previous = job.last_step.get(rank)
        if previous is not None and step > previous[0] and seconds > previous[1]:
            job.step_seconds.setdefault(rank, deque(maxlen=STEP_WINDOW)).append((seconds - previous[1]) / (step - previous[0]))
        if previous is None or step >= previous[0]:
            job.last_step[rank] = (step, seconds)

    def silence_threshold(self, job: _Job) -> float:
        """``--silent-after``, or 3x the job's median step time, at least a minute."""
        if self.silent_after is not None:
            return self.silent_after
        times = [t for series in job.step_seconds.values() for t in series]
        return max(MIN_SILENT_S, 3 * statistics.median(times)) if times else MIN_SILENT_S

    def check(self, now: float) -> list[Alert]:
        """Every alert that is due: new episodes, updates, resolutions, finished jobs."""
        alerts: list[Alert] = []
        self.due = None
        for job in self.jobs.values():
            if job.finished:
                continue
            if job.finish_sent:  # it logged again after its end: a new episode of everything
                job.finish_sent = False
            alerts += self._failure(job, now)
            alerts += self._stall(job, now)
            alerts += self._stragglers(job, now)
            alerts += self._silent(job, now)
            alerts += self._finished(job, now)
        return alerts

    # --- failure ---------------------------------------------------------------------------------

    def _hold(self, until: float) -> None:
        self.due = until if self.due is None else min(self.due, until)

    def _failure(self, job: _Job, now: float) -> list[Alert]:
        if job.first_failure_at is None or job.analysed_failures == job.failure_count:
            return []
        found = self._model_failure(job)
        named = found is not None and bool(found[1]["ranks"]) and found[1]["confidence"] in ("certain", "likely")
        if not named and now - job.first_failure_at < SETTLE_S:
            self._hold(job.first_failure_at + SETTLE_S)  # no culprit yet: its own traceback may be a poll away
            return []
        job.analysed_failures = job.failure_count
        if found is None:
            return []
        view, culprit = found
        ranks, step = culprit["ranks"], culprit["step"]
        who = f"rank {format_ranks(ranks)}" if ranks else "rank unknown"
        at = f" at step {step}" if step is not None else ""
        naming = (tuple(ranks), str(culprit["confidence"]), str(culprit["cause"]))
        if job.failure_sent is None:
            job.failure_sent, job.failure_named = set(view["others"]) - set(ranks), naming
            summary = f"job {job.name}: first failure on {who}{at}: {culprit['cause'] or 'see reasoning'}"
            return [self._alert("failure", "firing", job, ranks, summary, culprit["reasoning"], now, culprit["confidence"],
                                {"collateral_ranks": view["others"], "cause": culprit["cause"]}, step=step)]
        new = [r for r in view["others"] if r not in job.failure_sent and r not in ranks]
        refined = naming != job.failure_named
        if not new and not refined:
            return []
        job.failure_sent.update(new)
        job.failure_named = naming
        details = {"collateral_ranks": sorted(job.failure_sent), "new_collateral_ranks": new, "cause": culprit["cause"], "refined": refined}
        if refined:  # later evidence (the culprit's own traceback, the other ranks' errors) said more
            summary = f"job {job.name}: first failure on {who}{at} ({culprit['confidence']}): {culprit['cause'] or 'see reasoning'}"
            return [self._alert("failure", "update", job, ranks, summary, culprit["reasoning"], now, culprit["confidence"], details, step=step)]
        summary = f"job {job.name}: rank {format_ranks(new)} went down after {who} (collateral)"
        return [self._alert("failure", "update", job, ranks, summary, view["reasoning"], now, view["confidence"], details, step=step)]

    def _episodes(self, job: _Job) -> list[StallEpisode]:
        return stall_episodes([*job.stall_docs, *job.latest_step_doc.values()], self.merge_gap) if job.stall_docs else []

    def _model_failure(self, job: _Job) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """first-failure's view and the job model's culprit (a hang someone ended: the stalled rank) from what is kept;
        each rank's latest step says whether an elastic job went on after a reset."""
        docs = [*job.failures, *job.latest_step_doc.values()]
        reports = [r for r in first_failure(docs) if r.job == job.name] or first_failure(docs)
        if not reports:
            return None
        culprit = culprit_of(reports[0].to_json(), self._episodes(job))
        return (failure_view(reports[0]), culprit) if culprit is not None else None

    # --- stall -----------------------------------------------------------------------------------

    def _stall(self, job: _Job, now: float) -> list[Alert]:
        """One alert per stretch of overlapping episodes (ranks and sources merged); resolved when all of them ended.
        The alert says the episode's hang class (:func:`hang_verdict`); a class that rests on a rank's silence
        waits SILENCE_GRACE_S for that rank's own report, and a class that changes later is an update."""
        if not job.stall_docs:
            return []
        found = stall_episodes([*job.stall_docs, *job.latest_step_doc.values()], self.merge_gap)
        episodes = {(e.start or "", e.source): e for e in found}  # public fields only: the analysis may change inside
        alerts: list[Alert] = []
        for key, episode in sorted(episodes.items()):
            if key in job.stall_seen:
                continue
            verdict = hang_verdict(episode)
            if job.stall_open is None and self._held(job, key, episode, verdict, now):
                if episode.resolved:  # it ended while held (a slow start): nothing to alert
                    job.stall_seen.add(key)
                continue
            job.stall_seen.add(key)
            if job.stall_open is not None and all(episodes[m].resolved or episodes[m].shutdown for m in job.stall_members if m in episodes):
                alerts += self._stall_ended(job, [episodes[m] for m in job.stall_members if m in episodes], now)
            if job.stall_open is None:
                alerts.append(self._stall_started(job, episode, verdict, now))
            job.stall_members.add(key)
        members = [episodes[m] for m in job.stall_members if m in episodes]
        if job.stall_open is not None and all(e.resolved or e.shutdown for e in members):
            alerts += self._stall_ended(job, members, now)
        elif job.stall_open is not None and members:
            alerts += self._stall_refined(job, max(members, key=lambda e: (e.reports, e.start or "")), now)
        return alerts

    def _held(self, job: _Job, key: tuple[str, str], episode: StallEpisode, verdict: HangVerdict, now: float) -> bool:
        """Whether a new episode's alert waits: its class calls a rank silent that may just not have reported yet,
        or it is a wait before the job's first step (a slow start) that has not lasted STARTUP_STALL_S."""
        first, began = job.stall_held.setdefault(key, (now, now - episode.duration_s))  # seen, and the episode's start as seen
        until = first + SILENCE_GRACE_S if verdict.kind == "dead_or_silent" and verdict.confidence != "certain" else now
        if episode.source == "watchdog" and episode.step is None and not episode.shutdown:  # no step yet: the ranks are starting
            until = max(until, began + STARTUP_STALL_S)
        if now < until:
            self._hold(until)
            return True
        return False

    def _stall_started(self, job: _Job, episode: StallEpisode, verdict: HangVerdict, now: float) -> Alert:
        culprits = verdict.culprits or episode.missing_ranks
        who = f"rank {format_ranks(culprits)}" if culprits else "rank unknown"
        where = f" at step {episode.step}" if episode.step is not None else ""
        tensors = ", ".join(episode.tensors[:6]) or "the collective"
        waiting = format_ranks(episode.waiting_ranks)
        summary = (f"job {job.name}: stall{where}, hang: {_class_words(verdict)}: {who} not progressing; "
                   f"ranks waiting: {waiting or 'none reported'}")
        reasoning = (f"{episode.source} reports since {episode.start}: {who} missing from {tensors}"
                     + (f"; rank(s) {waiting} wait in {', '.join(episode.operations)}" if waiting else "")
                     + (f"; hang: {verdict.reasoning}" if verdict.reasoning else ""))
        job.stall_open, job.stall_members, job.stall_class = f"stall:{job.name}:{episode.start}", set(), verdict.kind
        job.stalls_alerted += 1
        confidence = verdict.confidence if verdict.kind != "unknown" else ("certain" if culprits else "unknown")
        return self._alert("stall", "firing", job, culprits, summary, reasoning, now, confidence,
                           _stall_details(episode, verdict), step=episode.step)

    def _stall_refined(self, job: _Job, episode: StallEpisode, now: float) -> list[Alert]:
        """An update when more reports change the open stall's hang class (a rank silent at first reported, a failure recorded)."""
        verdict = hang_verdict(episode)
        if verdict.kind == job.stall_class or verdict.kind == "unknown":
            return []
        job.stall_class = verdict.kind
        culprits = verdict.culprits or episode.missing_ranks
        summary = f"job {job.name}: stall, hang now: {_class_words(verdict)}: rank {format_ranks(culprits) or 'unknown'}"
        return [self._alert("stall", "update", job, culprits, summary, verdict.reasoning, now, verdict.confidence,
                            _stall_details(episode, verdict), step=episode.step)]

    def _stall_ended(self, job: _Job, members: list[StallEpisode], now: float) -> list[Alert]:
        if not members:
            job.stall_open = None
            return []
        last = max(members, key=lambda e: e.end or e.start or "")
        ended = "shut down (the job failed)" if last.shutdown else "resolved: progress resumed"
        summary = f"job {job.name}: stall {ended} after {last.duration_s:g} s"
        alert = self._alert("stall", "resolved", job, last.missing_ranks, summary, f"{last.source}: {ended}", now,
                            "certain", _stall_details(last, hang_verdict(last)), step=last.step, episode=job.stall_open)
        job.stall_open = job.stall_class = None
        return [alert]

    # --- stragglers ------------------------------------------------------------------------------

    def _stragglers(self, job: _Job, now: float) -> list[Alert]:
        if len(job.steps) < 2 or job.stall_open is not None:
            return []
        docs = [doc for series in job.steps.values() for doc in series]
        rows = self._with_timeline(stragglers(docs, tolerance=STRAGGLER_TOLERANCE), now)
        counts = {rank: len(series) for rank, series in job.steps.items()}
        flagged: dict[int, dict[str, Any]] = {}
        for row in rows:
            view = straggler_view(row)
            enough = counts.get(row.rank, 0) >= MIN_STEPS and min(counts.values()) >= MIN_STEPS
            if view is not None and (enough or "confidence" in row.to_json()):
                flagged[row.rank] = view
        alerts: list[Alert] = []
        for rank in sorted(set(job.steps) | job.straggler_open):
            streak = job.straggling.get(rank, 0)
            streak = max(streak, 0) + 1 if rank in flagged else min(streak, 0) - 1
            job.straggling[rank] = streak
            if streak >= STRAGGLER_CHECKS and rank not in job.straggler_open:  # flagged on several checks in a row: not a blip
                job.straggler_open.add(rank)
                view = flagged[rank]
                summary = f"job {job.name}: rank {rank} is a straggler: {view['reasons'][0]}"
                alerts.append(self._alert("straggler", "firing", job, [rank], summary, view["reasoning"], now, view["confidence"],
                                          {"reasons": view["reasons"]}, step=view["step"], episode=f"straggler:{job.name}:{rank}"))
            elif streak <= -3 and rank in job.straggler_open:
                job.straggler_open.discard(rank)
                alerts.append(self._alert("straggler", "resolved", job, [rank], f"job {job.name}: rank {rank} caught up",
                                          "no longer behind the median on three checks in a row", now, "likely",
                                          episode=f"straggler:{job.name}:{rank}"))
        return alerts

    # --- silent ranks and the end of the job -----------------------------------------------------

    def _silent(self, job: _Job, now: float) -> list[Alert]:
        if not job.last_step:
            return []  # before the first step (imports, hvd.init, the first broadcast) quiet ranks are normal
        threshold = self.silence_threshold(job)
        active = {rank for rank, seen in job.last_seen.items() if now - seen < threshold}
        quiet = {rank for rank in job.last_seen if rank not in active and rank not in job.failed} if active else set()
        alerts: list[Alert] = []
        new = sorted(quiet - job.silent)
        if new:
            status = "update" if job.silent else "firing"
            job.silent |= set(new)
            last = {rank: _iso(job.last_seen[rank]) for rank in sorted(job.silent)}
            steps = [job.last_step[r][0] for r in new if r in job.last_step]
            summary = f"job {job.name}: rank {format_ranks(new)} logged nothing for {threshold:g} s while rank(s) {format_ranks(active)} keep logging"
            reasoning = (f"no line from rank {format_ranks(new)} since {', '.join(last[r] for r in new)}; a rank killed by the kernel "
                         "(OOM, SIGKILL) or frozen cannot say so itself; the other ranks are still writing")
            alerts.append(self._alert("silent_rank", status, job, sorted(job.silent), summary, reasoning, now, "likely",
                                      {"silent_after_s": threshold, "last_seen": last}, step=min(steps) if steps else None))
        back = sorted(job.silent & active)
        if back:
            job.silent -= set(back)
            status = "resolved" if not job.silent else "update"
            alerts.append(self._alert("silent_rank", status, job, back, f"job {job.name}: rank {format_ranks(back)} logs again",
                                      "new lines arrived from the rank", now, "certain"))
        return alerts

    def _finished(self, job: _Job, now: float) -> list[Alert]:
        """The job ended: its launcher or every rank recorded its end, or every rank was quiet for the
        threshold. The outcome is the job model's status (the same rule as ``report`` and ``jobs``)."""
        if not job.last_seen or job.finish_sent:
            return []
        after = self.finished_after if self.finished_after is not None else self.silence_threshold(job)
        recorded = job.facts.launcher_exit is not None or (bool(job.facts.own_exits) and len(job.facts.own_exits) >= (job.size or len(job.last_seen)))
        if not recorded:
            if any(now - seen < after for seen in job.last_seen.values()):
                return []
            if not job.last_step and not job.failures:
                return []  # quiet before the first step is a slow start (imports, hvd.init), not an end
        if job.first_failure_at is not None and job.analysed_failures != job.failure_count:
            return []  # its failure alert first
        found = self._model_failure(job) if job.failures else None
        culprit = found[1] if found is not None else None
        recovered = (found[0]["recovered"] if found is not None else None) or False
        status = status_of(job.facts, culprit, recovered, self._episodes(job), now)
        if status["state"] in ("hung", "running") and not recorded:
            status = {"state": "finished", "confidence": "likely", "reasoning": ""}  # silent everywhere: the end as far as logs tell
        outcome = {"finished": "success", "failed": "failure", "recovered": "recovered"}.get(status["state"], status["state"])
        job.finished = job.finish_sent = True
        alerts = self._final_stragglers(job, now)
        steps = [step for step, _ in job.last_step.values()]
        step = culprit["step"] if outcome == "failure" and culprit is not None and culprit.get("step") is not None else (max(steps) if steps else None)
        reasoning = status["reasoning"] or self._quiet_reasoning(job, after)
        ranks = sorted(job.last_seen)
        at = f" at step {step}" if step is not None else ""
        summary = f"job {job.name} finished: {outcome}{at} ({len(ranks)} rank(s))"
        job.silent.clear()
        verdict = verdict_of(status, culprit, recovered, sorted(job.straggler_open))
        return [*alerts, self._alert("job_finished", outcome, job, ranks, summary, reasoning, now, status["confidence"],
                                     {"outcome": outcome, "status": status, "verdict": verdict}, step=step)]

    def _final_stragglers(self, job: _Job, now: float) -> list[Alert]:
        """At the end, the ranks ``hvdlog stragglers`` flags (its defaults, the timeline's evidence read afresh)
        that no alert named yet: one straggler alert each, so the job's verdict lists them."""
        if len(job.steps) < 2:
            return []
        rows = self._with_timeline(stragglers([doc for series in job.steps.values() for doc in series]), now, fresh=True)
        alerts = []
        for row in rows:
            view = straggler_view(row)
            if view is None or row.rank in job.straggler_open:
                continue
            job.straggler_open.add(row.rank)
            alerts.append(self._alert("straggler", "firing", job, [row.rank], f"job {job.name}: rank {row.rank} is a straggler: {view['reasons'][0]}",
                                      view["reasoning"], now, view["confidence"], {"reasons": view["reasons"]}, step=view["step"],
                                      episode=f"straggler:{job.name}:{row.rank}"))
        return alerts

    @staticmethod
    def _quiet_reasoning(job: _Job, after: float) -> str:
        """Why a job that recorded no end is taken as finished: the silence, and what came before it."""
        before = f"after {job.stalls_alerted} stall alert(s) that ended" if job.stalls_alerted else "with no stall"
        return f"every rank stopped logging for {after:g} s, {before}, no failure and no silent rank; no exit record says so for certain"

    def _alert(self, kind: str, status: str, job: _Job, ranks: list[int], summary: str, reasoning: str, now: float,
               confidence: str | None, details: dict[str, Any] | None = None, *, step: int | None = None, episode: str | None = None) -> Alert:
        if episode is None:
            episode = job.stall_open if kind == "stall" and job.stall_open else f"{kind}:{job.name}"
        return Alert(kind, status, job.name, list(ranks), summary, reasoning, _iso(now), job.host_list(ranks), step,
                     confidence, episode or f"{kind}:{job.name}", details or {})


def _class_words(verdict: HangVerdict) -> str:
    """``culprit outside (certain)``: the hang class as the alert's one line says it (``class unknown`` when none fits)."""
    return f"{verdict.kind.replace('_', ' ')} ({verdict.confidence})" if verdict.kind != "unknown" else "class unknown"


def _stall_details(episode: StallEpisode, verdict: HangVerdict) -> dict[str, Any]:
    """The episode's facts and its hang verdict (class, roll-call line, groups bounded, next steps)."""
    hang = {**verdict.to_json(), "roll_call": roll_call(verdict.groups), "groups": verdict.groups[:20]}
    return {"source": episode.source, "start": episode.start, "tensors": episode.tensors[:20], "waiting_ranks": episode.waiting_ranks,
            "operations": episode.operations, "shutdown": episode.shutdown, "hang": hang}


def _clean_exit(doc: Document) -> bool:
    """A rank's own exit record with status 0: the end of a job, not a failure."""
    return bool(get_field(doc, "event.action") == "process_exit" and get_field(doc, "process.exit_code") == 0)


def _nccl_chain(doc: Document) -> bool:
    """NCCL's WARN and its unwinding: a failure only when they end the rank's output (hvdlog.analyses.last_words),
    which a live job's newest lines cannot say yet (NCCL may go on a line later); a rank silent after them is the
    silence alert's."""
    return get_field(doc, KIND) in CHAIN_KINDS


def _is_stall_report(doc: Document) -> bool:
    """Stall reports are the stall alert's, even at error level (Horovod's "Will shutdown")."""
    return get_field(doc, "horovod.stall.source") is not None or get_field(doc, "horovod.stall.missing_ranks") is not None

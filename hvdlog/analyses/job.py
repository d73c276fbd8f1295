"""One job, one verdict: the job model, computed once, that every command and alert renders.

For each job: its incarnations (elastic resets), each rank's fate with its evidence and step,
its stall episodes and how each ended, its stragglers with every kind of evidence, the
culprit and the job's status (running, hung, finished, failed, recovered or unknown) with a
confidence and one line of reasoning. It is built from the analyses' results
(:func:`~hvdlog.analyses.failures.first_failure`, :func:`~hvdlog.analyses.stalls.stall_episodes`,
:func:`~hvdlog.analyses.stragglers.stragglers` with the timeline's evidence) and from the
recorded facts of :class:`~hvdlog.analyses.job_facts.JobFacts`.

Facts before inferences: an exit record (the launcher's status from ``hvdlog run``, or every
rank's own ``process_exit``) decides that the job ended, and how, for certain; silence and
event age come after. Times are the events' own, never a file's modification time. A job
whose newest events are its watchdog's stall reports is hung, not running.

A hang that someone ended (Ctrl-C, ``timeout``, exit 143) is the stalled rank's: the
termination signals are the operator's, so when the failure model names no rank of its own
evidence, or names one only for a termination signal or a launcher's word, the rank the
watchdog found stuck before the kill is the culprit (:func:`culprit_of`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.analyses.failure_evidence import TERMINATION
from hvdlog.analyses.hang import hang_verdict
from hvdlog.analyses.job_facts import JobFacts
from hvdlog.analyses.resets import epoch_of, resets
from hvdlog.analyses.stalls import StallEpisode
from hvdlog.documents import Document, get_field, timestamp_millis
from hvdlog.query.spec import format_ranks

__all__ = ["QUIET_SECONDS", "STATES", "JobModel", "build", "culprit_of", "episode_end", "status_of"]

#: A job whose newest event is younger than this, with no failure and no exit record, is running.
QUIET_SECONDS: Final = 300.0
#: The states a job can be in, in the order the docs describe them.
STATES: Final = ("running", "hung", "finished", "failed", "recovered", "unknown")
#: Exit statuses of a process ended by a termination signal (128 + SIGINT, SIGTERM, SIGHUP).
_TERMINATED: Final = frozenset({129, 130, 143})


@dataclass
class JobModel:
    """Everything a view needs to say about one job; :meth:`verdict` is what every view must agree on."""

    job: str | None
    status: dict[str, str]
    culprit: dict[str, Any] | None = None
    recovered: bool | dict[str, Any] = False
    incarnations: list[dict[str, Any]] = field(default_factory=list)
    fates: list[dict[str, Any]] = field(default_factory=list)
    stalls: list[dict[str, Any]] = field(default_factory=list)
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    straggler_verdict: str = ""
    #: first-failure's report as JSON (None: nothing failed).
    failure: dict[str, Any] | None = None

    def verdict(self) -> dict[str, Any]:
        """Status, culprit, step, recovered, stragglers: the five answers no two views may give differently."""
        return verdict_of(self.status, self.culprit, self.recovered, [item["rank"] for item in self.stragglers])

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return {**asdict(self), "verdict": self.verdict()}


def verdict_of(status: Mapping[str, str], culprit: Mapping[str, Any] | None, recovered: Any, stragglers: Sequence[int]) -> dict[str, Any]:
    """The compared answers, in one shape for every view."""
    return {
        "status": status.get("state"),
        "culprit": list((culprit or {}).get("ranks") or []),
        "step": (culprit or {}).get("step"),
        "recovered": bool(recovered),
        "stragglers": sorted(stragglers),
    }


def _verdict(state: str, confidence: str, reasoning: str) -> dict[str, str]:
    return {"state": state, "confidence": confidence, "reasoning": reasoning}


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


# --- the culprit --------------------------------------------------------------------------------


def _operator_ended(failure: Mapping[str, Any]) -> bool:
    """The failure model found no rank's own fault: every end it saw is a termination signal
    (SIGINT, SIGTERM, exit 130/143), a launcher's word, or nothing primary."""
    culprit = failure.get("culprit")
    if failure.get("stall") is not None:
        return False  # Horovod's own stall shutdown already names the stalled ranks
    if not failure.get("primary") or culprit is None:
        return True
    message = str(culprit.get("message") or "")
    return any(name in message for name in TERMINATION) or "KeyboardInterrupt" in message


def _open_stall_before(episodes: Iterable[StallEpisode], failed_at: int | None) -> StallEpisode | None:
    """The watchdog or inspector episode that was still unresolved when the job was ended, with the ranks it found missing."""
    found = [e for e in episodes if not e.resolved and e.missing_ranks and e.start is not None
             and (failed_at is None or (timestamp_millis(e.start) or 0) <= failed_at)]
    return found[0] if found else None


def culprit_of(failure: Mapping[str, Any] | None, episodes: Sequence[StallEpisode]) -> dict[str, Any] | None:
    """Who is to blame and at which step: the failure model's culprit, or, in a hang someone ended,
    the ranks the stall found missing (the kill is the operator's)."""
    if failure is None:
        return None
    chosen = failure.get("culprit") or {}
    failed_at = timestamp_millis(chosen.get("@timestamp")) or min(
        (m for item in failure.get("collateral") or [] if (m := timestamp_millis(item.get("@timestamp"))) is not None), default=None)
    stall = _open_stall_before(episodes, failed_at) if _operator_ended(failure) else None
    if stall is not None:
        ranks = format_ranks(stall.missing_ranks)
        at = f" at step {stall.step}" if stall.step is not None else ""
        waited = ""
        if stall.waiting_ranks:
            waited = f"; rank(s) {format_ranks(stall.waiting_ranks)} waited for it in {', '.join(stall.operations) or 'a collective'}"
        reasoning = (f"rank {ranks} stopped progressing{at} ({stall.source} reports since {stall.start}){waited}; the job was then "
                     "ended from outside (SIGINT/SIGTERM): that kill is the operator's, not a failure")
        return {"ranks": list(stall.missing_ranks), "step": stall.step, "at": stall.start, "by": "stall",
                "cause": f"hung{at}: rank {ranks} never reached the collective; then ended by a signal", "reasoning": reasoning,
                "confidence": "likely"}
    blamed = [rank for rank in failure.get("blamed_ranks") or [] if isinstance(rank, int)]
    step = chosen.get("step")
    if failure.get("stall") is not None and step is None:  # Horovod's stall shutdown: the step the episode stalled at
        step = next((e.step for e in episodes if e.shutdown and set(e.missing_ranks) & set(blamed)), None)
    return {"ranks": blamed, "step": step if isinstance(step, int) else None, "at": chosen.get("@timestamp") or (failure.get("stall") or {}).get("@timestamp"),
            "by": "failure", "cause": str(failure.get("cause") or ""), "reasoning": str(failure.get("reasoning") or ""),
            "confidence": str(failure.get("confidence") or "unknown")}


# --- stall episodes -----------------------------------------------------------------------------


def episode_end(episode: StallEpisode, reset_epochs: Iterable[int]) -> str:
    """How an episode ended: ``resolved``, ``ended by a reset`` (an elastic job reset past it),
    ``shut down`` (the job failed in it) or ``still open``."""
    if episode.resolved:
        return "resolved"
    if any(epoch > episode.epoch for epoch in reset_epochs):
        return "ended by a reset"
    return "shut down" if episode.shutdown else "still open"


# --- status -------------------------------------------------------------------------------------


def _recovered_text(recovered: Any) -> str:
    return str(recovered.get("text")) if isinstance(recovered, Mapping) else "the job went on after the failure"


def _who(culprit: Mapping[str, Any] | None) -> str:
    if not culprit or not culprit.get("ranks"):
        return "no rank named"
    step = f" at step {culprit['step']}" if culprit.get("step") is not None else ""
    return f"rank {format_ranks(culprit['ranks'])}{step}: {culprit.get('cause') or 'failed'}"


def _from_exit_records(facts: JobFacts, culprit: Mapping[str, Any] | None, recovered: Any) -> dict[str, str] | None:
    """The recorded ends decide for certain: the launcher's status, else every rank's own exit record."""
    if facts.launcher_exit is not None:
        code = facts.launcher_exit
        if code == 0:
            if recovered:
                return _verdict("recovered", "certain", f"{_recovered_text(recovered)}; the launcher exited with status 0")
            return _verdict("finished", "certain", "the launcher exited with status 0")
        if code in _TERMINATED and culprit is None:
            return _verdict("failed", "certain", f"ended from outside: the launcher exited with status {code} (a termination signal)")
        return _verdict("failed", "certain", f"{_who(culprit)}; the launcher exited with status {code}")
    own = facts.own_exits
    size = facts.size or len(facts.ranks)
    if own and len(own) >= size:
        if all(code == 0 for code in own.values()):
            if recovered:
                return _verdict("recovered", "certain", f"{_recovered_text(recovered)}; every rank recorded exit status 0")
            return _verdict("finished", "certain", f"every rank recorded a clean end (exit status 0, {len(own)} exit records)")
        failing = sorted(rank for rank, code in own.items() if code != 0)
        ranks = f"rank{'s' if len(failing) > 1 else ''} {format_ranks(failing)}"
        return _verdict("failed", "certain", f"{_who(culprit)}; {ranks} recorded a non-zero exit status")
    return None


def _hung(facts: JobFacts, episodes: Sequence[StallEpisode], now: float) -> dict[str, str] | None:
    """An open stall whose reports are the job's newest events: the job hangs (it is not running)."""
    still = [e for e in episodes if not e.resolved and not e.shutdown]
    if not still or facts.last_stall_ms is None or (facts.last_activity_ms or 0) > facts.last_stall_ms:
        return None
    episode = still[-1]
    ranks = format_ranks(episode.missing_ranks) or "unknown"
    at = f" at step {episode.step}" if episode.step is not None else ""
    age = now - facts.last_stall_ms / 1000
    confidence = "likely" if age < QUIET_SECONDS else "unknown"
    return _verdict("hung", confidence, f"rank {ranks} has not progressed{at} since {episode.start}; the newest events are "
                    f"{episode.source} stall reports, the last {_age(age)} old")


def _ends_in_stall(facts: JobFacts, episodes: Sequence[StallEpisode]) -> str | None:
    """Why the log ends in an unresolved stall, or None: its last open episode (neither resolved
    nor ended in a shutdown) after which no stalled rank logged anything (an untimed episode
    cannot be placed among timed events: it counts as open). Such a job is not "finished"."""
    still = [e for e in episodes if not e.resolved and not e.shutdown]
    if not still:
        return None
    episode = still[-1]
    ended = timestamp_millis(episode.end) if episode.end else None
    if ended is not None and any(facts.rank_activity_ms.get(rank, 0) > ended for rank in episode.missing_ranks):
        return None
    ranks = format_ranks(episode.missing_ranks) or "unknown"
    since = f" since {episode.start}" if episode.start else " (the reports carry no time)"
    return (f"the log ends in an unresolved stall: rank {ranks} stopped{since} and nothing after says it went on; "
            "no exit record says how the job ended")


def status_of(
    facts: JobFacts, culprit: Mapping[str, Any] | None, recovered: Any, episodes: Sequence[StallEpisode], now: float | None = None,
) -> dict[str, str]:
    """running / hung / finished / failed / recovered / unknown, with how sure and why (one line).

    In order: the recorded ends (:func:`_from_exit_records`); a failure (``recovered`` when an
    elastic reset carried the job on); an open stall whose reports are the newest events
    (hung); then silence: a job is running while its newest event is younger than 20 of its
    step intervals (at least 30 s, at most :data:`QUIET_SECONDS`).
    """
    now = time.time() if now is None else now
    recorded = _from_exit_records(facts, culprit, recovered)
    if recorded is not None:
        return recorded
    if culprit is not None:
        if recovered:
            return _verdict("recovered", "likely", _recovered_text(recovered))
        return _verdict("failed", str(culprit.get("confidence") or "likely"), _who(culprit))
    hung = _hung(facts, episodes, now)
    if hung is not None:
        return hung
    open_stall = _ends_in_stall(facts, episodes)
    if facts.last_ms is None:
        return _verdict("unknown", "unknown", open_stall or "no event carries a time")
    step_seconds = facts.step_seconds()
    age = now - facts.last_ms / 1000
    quiet = QUIET_SECONDS if not step_seconds else min(QUIET_SECONDS, max(30.0, 20 * step_seconds))
    if age < quiet:
        return _verdict("running", "likely", f"the newest event is {_age(age)} old and no failure is recorded")
    if open_stall is not None:  # hung or killed while hung: the logs cannot tell which
        return _verdict("unknown", "unknown", open_stall)
    return _verdict("finished", "likely", f"no failure in the logs and no event for {_age(age)}"
                    + (f" (over 20 step intervals of {step_seconds:.2g} s)" if step_seconds else "")
                    + "; no exit record says so for certain")


# --- fates, incarnations, stragglers ------------------------------------------------------------


def _fates(facts: JobFacts, failure: Mapping[str, Any] | None, culprit: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each known rank's end: failed (the culprit or its own failure), collateral, killed, finished, silent."""
    fates: dict[int, dict[str, Any]] = {}
    for rank in (culprit or {}).get("ranks") or []:
        fates[rank] = {"rank": rank, "fate": "failed", "step": (culprit or {}).get("step"), "evidence": (culprit or {}).get("cause")}
    for key, fate in (("other_errors", "failed"), ("collateral", "collateral")):
        for item in (failure or {}).get(key) or []:
            if isinstance(rank := item.get("rank"), int) and rank not in fates:
                fates[rank] = {"rank": rank, "fate": fate, "step": item.get("step"), "evidence": item.get("reason") or item.get("message")}
    for rank, code in sorted(facts.exit_codes.items()):
        if rank not in fates:
            fate = "finished" if code == 0 else "killed" if code > 128 else "failed"
            fates[rank] = {"rank": rank, "fate": fate, "step": None, "evidence": f"exit status {code}"}
    for rank in sorted(facts.ranks):
        fates.setdefault(rank, {"rank": rank, "fate": "unknown", "step": None, "evidence": "no exit record"})
    for rank in range(facts.size or 0):
        fates.setdefault(rank, {"rank": rank, "fate": "silent", "step": None, "evidence": "no event from this rank"})
    return [fates[rank] for rank in sorted(fates)]


def _incarnations(docs: Iterable[Document]) -> list[dict[str, Any]]:
    """Epoch 0, then one per elastic reset: when it began and how many workers it had."""
    found: list[dict[str, Any]] = [{"epoch": 0}]
    for epoch, events in sorted(resets(docs).items()):
        sizes = {size for doc in events if isinstance(size := doc.get("size"), int)}
        found.append({"epoch": epoch, "start": min((str(doc.get("@timestamp")) for doc in events), default=None),
                      "workers": max(sizes) if sizes else None, "reason": sorted({str(get_field(d, "horovod.elastic.reason") or "") for d in events} - {""})})
    return found


def straggler_items(rows: Iterable[Any]) -> tuple[list[dict[str, Any]], str]:
    """Flagged ranks with every kind of evidence (samples, steps, timeline), and the job's one-line answer."""
    rows = list(rows)
    flagged = [{"rank": row.rank, "evidence": list(row.evidence), "reasons": list(row.reasons), "confidence": row.confidence}
               for row in rows if row.outlier]
    verdict = rows[0].verdict if rows else "no step events: not enough data to call a straggler"
    return flagged, verdict


def build(
    facts: JobFacts, failure: Mapping[str, Any] | None, episodes: Sequence[StallEpisode], rows: Iterable[Any] = (),
    docs: Iterable[Document] = (), now: float | None = None,
) -> JobModel:
    """The model of one job from the analyses' results on its documents (``docs``: for the incarnations)."""
    docs = list(docs)
    culprit = culprit_of(failure, episodes)
    recovered = (failure or {}).get("recovered") or False
    reset_epochs = sorted({epoch_of(doc) for doc in docs if epoch_of(doc)} | {e.epoch for e in episodes if e.epoch})
    stalls = [{**episode.to_json(), "ended": episode_end(episode, reset_epochs), "hang": hang_verdict(episode).to_json()}
              for episode in episodes]
    flagged, verdict = straggler_items(rows)
    return JobModel(
        job=facts.job,
        status=status_of(facts, culprit, recovered, episodes, now),
        culprit=culprit,
        recovered=recovered,
        incarnations=_incarnations(docs),
        fates=_fates(facts, failure, culprit),
        stalls=stalls,
        stragglers=flagged,
        straggler_verdict=verdict,
        failure=dict(failure) if failure is not None else None,
    )

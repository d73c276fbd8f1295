"""Who is behind, said only when the data supports it: per-rank progress against a robust spread.

In synchronous data-parallel training every rank finishes a step together (the allreduce
waits for the slowest), so end-of-step times and step rates cannot tell the slow rank from
the fast ones. What can:

* the rank's own ``samples_per_sec``, when the training code measures it on the rank's
  compute time (before the allreduce wait);
* the last step a rank reached (a hung or dead rank stops while the others go on);
* Horovod's timeline: which rank the others waited for (:mod:`hvdlog.timeline.wait_evidence`).

A rank is flagged on step evidence only when every part of the data allows it:

* at least :data:`MIN_RANKS` ranks have enough data, i.e. at least ``min_steps`` steps over at
  least ``min_seconds`` seconds (a 3-step job that crashed says nothing about speed);
* its figure is below the median of the ranks by ``tolerance`` (a share of the median) **and**
  by :data:`MAD_CUTOFF` robust standard deviations (1.4826 × the median absolute deviation
  across ranks), so a job whose ranks are all over the place flags nobody.

With 2 ranks the median is the mean of the two: step figures cannot decide, and only
timeline evidence (who the others waited for) flags a rank. Otherwise the answer is "not
enough data to call a straggler". A flagged rank's reasons say by how much and on what
evidence; its confidence is ``certain`` when two kinds of evidence agree, else ``likely``.

Only the ranks of one incarnation of an elastic job are compared (``horovod.elastic.epoch``,
absent = 0; by default the last), so a rank removed by a scale-down is not a straggler.

Memory: :class:`Tally` aggregates per rank as events stream past (counts, first and last
step, a histogram of ``samples_per_sec`` cut to 3 significant digits); it never holds the events, and two
tallies merge exactly (parallel readers, :mod:`hvdlog.analyses.step_read`).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from hvdlog.documents import Document, as_int, get_field, job_of, timestamp_millis
from hvdlog.query.spec import MAX_JOB_SIZE, Condition

__all__ = [
    "EPOCH_FIELD",
    "MAD_CUTOFF",
    "MIN_RANKS",
    "PICTURE_FIGURES",
    "STEP_EVENTS",
    "RankProgress",
    "RankTrack",
    "Tally",
    "corroborate",
    "decade",
    "judge",
    "picture_figure",
    "sample_bin",
    "settle",
    "stragglers",
]

#: What the analysis needs from a source: events that carry a step.
STEP_EVENTS: Final = (Condition("step"),)
#: The membership epoch of an elastic job (see the contract); absent means 0.
EPOCH_FIELD: Final = "horovod.elastic.epoch"
#: Fewest ranks with enough data for a spread across ranks to mean anything.
MIN_RANKS: Final = 3
#: How many robust standard deviations below the median a rank's figure must be.
MAD_CUTOFF: Final = 3.5
#: Defaults of the minimum data per rank.
MIN_STEPS: Final = 10
MIN_SECONDS: Final = 2.0


def decade(value: float) -> int:
    """The ``d`` with ``10**d <= value < 10**(d + 1)`` (for a positive finite value)."""
    power = math.floor(math.log10(value))
    while 10.0**power > value:
        power -= 1
    while 10.0 ** (power + 1) <= value:
        power += 1
    return power


@functools.lru_cache(maxsize=65536)
def sample_bin(value: float) -> float:
    """The ``samples_per_sec`` histogram bin of a positive finite value: cut to 3 significant
    digits (bins 0.1-1 % wide). It is what Elasticsearch's ``histogram`` with interval
    ``10**(d - 2)`` over the decade ``d`` computes, so both sources count the same bins."""
    width = 10.0 ** (decade(value) - 2)
    return math.floor(value / width) * width
_NO_DATA: Final = "not enough data to call a straggler"


@dataclass
class RankProgress:
    """One rank's progress and why it is (or is not) an outlier."""

    job: str | None
    rank: int
    host: str | None = None
    events: int = 0
    first_step: int | None = None
    last_step: int | None = None
    last_seen: str | None = None
    steps_per_sec: float | None = None
    samples_per_sec: float | None = None
    lag_steps: float | None = None
    outlier: bool = False
    reasons: list[str] = field(default_factory=list)
    #: What the flag rests on: "samples", "steps" (this module), "timeline" (:mod:`hvdlog.timeline.wait_evidence`).
    evidence: list[str] = field(default_factory=list)
    #: This rank's figures from Horovod's timeline, when one was found.
    timeline: dict[str, Any] | None = None
    #: This rank's CPU/memory/GPU figures from its ``resources`` events (:mod:`hvdlog.analyses.resources`).
    resources: dict[str, Any] | None = None
    #: The incarnation compared (``horovod.elastic.epoch``; 0 for a job that never reset).
    epoch: int = 0
    #: certain | likely for a flagged rank, None otherwise.
    confidence: str | None = None
    #: The job's answer in one line (the same on every row of the job): who, or why nobody.
    verdict: str = ""
    #: Why step figures could not judge this job ("" when they could).
    undecided: str = ""
    #: Seconds between this rank's first and last step event.
    seconds: float | None = None
    #: Evidence that was found but not believed, and why ("" when none).
    discounted: str = ""
    #: The quartiles of the rank's samples/s (a quarter of its steps were slower / faster): how steady it was.
    samples_quartiles: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json`` (a shallow copy: ``asdict``'s deep copy was a fifth of
        ``stragglers --es`` at 1,024 ranks, and the row is serialised at once)."""
        return {name: getattr(self, name) for name in _PROGRESS_FIELDS}


#: What a per-rank picture plots, first known wins: samples/s measured before the allreduce wait
#: differs between ranks; steps/s and the last step are equal in synchronous training (the
#: collectives keep the ranks in step), so they are drawn only when nothing better is known.
PICTURE_FIGURES: Final = (("samples_per_sec", "samples/s"), ("steps_per_sec", "steps/s"), ("last_step", "last step"))


def picture_figure(rows: Iterable[RankProgress]) -> tuple[str, dict[int, float | None]]:
    """The first of :data:`PICTURE_FIGURES` some rank has, per rank (rounded for the eye); ``("", {})`` when none."""
    rows = list(rows)
    for name, title in PICTURE_FIGURES:
        values: dict[int, float | None] = {row.rank: getattr(row, name) for row in rows}
        if any(value is not None for value in values.values()):
            return title, {rank: None if value is None else round(float(value), 1) for rank, value in values.items()}
    return "", {}


_PROGRESS_FIELDS: Final = tuple(item.name for item in fields(RankProgress))


@dataclass
class RankTrack:
    """One rank's running figures: constant size whatever the number of its events."""

    first_ms: int | None = None
    last_ms: int | None = None
    first_step: int | None = None
    last_step: int | None = None
    last_seen: str | None = None
    host: str | None = None
    events: int = 0
    #: bin (:func:`sample_bin`) -> count, of positive ``samples_per_sec`` values.
    samples: dict[float, int] = field(default_factory=dict)

    def add(self, step: int, millis: int | None, stamp: object, host: object, sps: object) -> None:
        """One step event."""
        self.events += 1
        if isinstance(host, str):
            self.host = host
        if isinstance(sps, (int, float)) and not isinstance(sps, bool) and math.isfinite(sps) and sps > 0:
            key = sample_bin(sps)
            self.samples[key] = self.samples.get(key, 0) + 1
        self.last_step = step if self.last_step is None else max(step, self.last_step)
        if millis is None:
            return
        if self.first_ms is None or millis < self.first_ms or (millis == self.first_ms and step < (self.first_step or 0)):
            self.first_ms, self.first_step = millis, step
        if self.newer(millis, stamp if isinstance(stamp, str) else None):
            self.last_ms, self.last_seen = millis, stamp if isinstance(stamp, str) else self.last_seen

    def newer(self, millis: int, stamp: str | None) -> bool:
        """Whether an event at ``millis`` (text ``stamp``) is the rank's newest: later, or in the same
        millisecond with a later text (microseconds). Order-free, so a merge, a parallel read and
        Elasticsearch (which sorts by the millisecond) pick the same one."""
        if self.last_ms is None or millis > self.last_ms:
            return True
        return millis == self.last_ms and stamp is not None and (self.last_seen is None or stamp > self.last_seen)

    def merge(self, other: RankTrack) -> None:
        """Fold another reader's figures for the same rank into these (exact, order-free)."""
        self.events += other.events
        self.host = other.host or self.host
        for key, count in other.samples.items():
            self.samples[key] = self.samples.get(key, 0) + count
        if other.last_step is not None:
            self.last_step = other.last_step if self.last_step is None else max(self.last_step, other.last_step)
        if other.first_ms is not None and (self.first_ms is None or (other.first_ms, other.first_step or 0) < (self.first_ms, self.first_step or 0)):
            self.first_ms, self.first_step = other.first_ms, other.first_step
        if other.last_ms is not None and self.newer(other.last_ms, other.last_seen):
            self.last_ms, self.last_seen = other.last_ms, other.last_seen or self.last_seen

    def median_samples(self) -> float | None:
        """The median ``samples_per_sec`` (its bin's middle, to 3 significant digits: within 0.5 %)."""
        return self.samples_quantile(0.5)

    def samples_quantile(self, share: float) -> float | None:
        """The ``samples_per_sec`` below which ``share`` of the rank's steps lie (its bin's middle)."""
        total = sum(self.samples.values())
        if not total:
            return None
        seen = 0
        for key in sorted(self.samples):
            seen += self.samples[key]
            if seen >= share * total:
                return float(f"{key + 10.0 ** (decade(key) - 2) / 2:.3g}")
        return None  # pragma: no cover - the loop always reaches the share

    def rate(self) -> float | None:
        """Steps per second over the rank's own events."""
        if self.first_ms is None or self.last_ms is None or self.last_ms <= self.first_ms or self.last_step is None:
            return None
        return round((self.last_step - (self.first_step or 0)) / ((self.last_ms - self.first_ms) / 1000), 4)


class Tally:
    """Per (job, epoch, rank) running figures of step events, and the job sizes seen."""

    def __init__(self) -> None:
        self.tracks: dict[tuple[str | None, int, int], RankTrack] = {}
        self.sizes: dict[tuple[str | None, int], int] = {}

    def add(self, job: str | None, epoch: int, rank: object, step: object, stamp: object, host: object, sps: object, size: object) -> None:
        """One event's few fields (what the fast file reader decodes)."""
        if type(size) is int and 0 < size <= MAX_JOB_SIZE and size > self.sizes.get((job, epoch), 0):
            self.sizes[(job, epoch)] = size
        if type(rank) is not int or type(step) is not int:  # bool is not int here, as in _integer
            return
        track = self.tracks.get((job, epoch, rank))
        if track is None:
            track = self.tracks[(job, epoch, rank)] = RankTrack()
        track.add(step, timestamp_millis(stamp), stamp, host, sps)

    def add_document(self, doc: Mapping[str, Any]) -> None:
        """One parsed document (any source)."""
        epoch = as_int(get_field(doc, EPOCH_FIELD)) or 0
        self.add(job_of(doc), epoch, doc.get("rank"), doc.get("step"), doc.get("@timestamp"),
                 get_field(doc, "host.name"), doc.get("samples_per_sec"), doc.get("size"))

    def merge(self, other: Tally) -> None:
        """Fold another tally in (the result does not depend on the order of merges)."""
        for key, track in other.tracks.items():
            mine = self.tracks.get(key)
            if mine is None:
                self.tracks[key] = track
            else:
                mine.merge(track)
        for job_epoch, size in other.sizes.items():
            self.sizes[job_epoch] = max(size, self.sizes.get(job_epoch, 0))


def _row(job: str | None, epoch: int, rank: int, track: RankTrack) -> RankProgress:
    seconds = None if track.first_ms is None or track.last_ms is None else round((track.last_ms - track.first_ms) / 1000, 3)
    low, high = track.samples_quantile(0.25), track.samples_quantile(0.75)
    return RankProgress(job, rank, track.host, track.events, track.first_step, track.last_step, track.last_seen,
                        track.rate(), track.median_samples(), epoch=epoch, seconds=seconds,
                        samples_quartiles=(low, high) if low is not None and high is not None else None)


def _enough(row: RankProgress, min_steps: int, min_seconds: float) -> bool:
    if row.first_step is None or row.last_step is None or row.seconds is None:
        return False
    return row.last_step - row.first_step >= min_steps and row.seconds >= min_seconds


def _spread(values: list[float], scale: Callable[[float], float]) -> tuple[float, float]:
    """(median, 1.4826 × median absolute deviation in ``scale``) of ``values``."""
    median = statistics.median(values)
    centre = scale(median)
    return median, 1.4826 * statistics.median(abs(scale(value) - centre) for value in values)


def _log(value: float) -> float:
    return math.log(value) if value > 0 else -math.inf


def _outliers(values: dict[int, float], tolerance: float, absolute: float = 0.0, *, ratio: bool = False) -> dict[int, str]:
    """Ranks whose value is below the median of the *other* ranks by ``tolerance`` of it (and by
    ``absolute``) and by :data:`MAD_CUTOFF` robust deviations of the other ranks' values: rank ->
    how far, in words. Leaving the rank out keeps a slow rank from widening the spread it is
    judged against (with 3 ranks it would be half of it).

    With ``ratio`` (rates) the spread is measured on the logarithms: a rank at half the speed
    is as far from the median whether the median is 10 or 10,000 samples/s."""
    scale = _log if ratio else float
    ordered = sorted(values.values())
    # No median of the others exceeds this: a value not far enough below it is not far enough below theirs.
    upper = ordered[min(len(ordered) - 1, len(ordered) // 2 + 1)]
    found = {}
    for rank, value in values.items():
        if upper - value < max(tolerance * upper, absolute, 1e-12):
            continue
        median, spread = _spread([other for key, other in values.items() if key != rank], scale)
        gap, distance = median - value, scale(median) - scale(value)
        if gap <= 0 or gap < max(tolerance * median, absolute) or distance < MAD_CUTOFF * spread:
            continue
        robust = "the others agree exactly" if spread == 0 else f"{distance / spread:.3g} robust deviations (MAD) of theirs"
        share = f" ({gap / median:.0%})" if median else ""
        found[rank] = f"{gap:.3g} below the median {median:g} of the other {len(values) - 1} ranks{share}; {robust}"
    return found


def judge(rows: list[RankProgress], min_lag: int, tolerance: float, min_steps: int, min_seconds: float) -> None:
    """Flag the rows of one job's incarnation on step evidence, or say why step figures cannot decide."""
    enough = [row for row in rows if _enough(row, min_steps, min_seconds)]
    reference = [r.last_step for r in (enough or rows) if r.last_step is not None]
    for row in rows:
        if row.last_step is not None and reference:
            row.lag_steps = statistics.median(reference) - row.last_step
    if len(rows) < MIN_RANKS:
        note = f"{len(rows)} rank{'s' if len(rows) != 1 else ''}: without timeline evidence (who the others waited for) step figures cannot tell the slow rank"
    elif len(enough) < MIN_RANKS:
        note = f"{len(enough)} of {len(rows)} ranks have {min_steps}+ steps over {min_seconds:g}+ s (need {MIN_RANKS})"
    else:
        note = ""
        _flag_on_steps(rows, enough, min_lag, tolerance)
    for row in rows:
        row.undecided = note


def _flag_on_steps(rows: list[RankProgress], enough: list[RankProgress], min_lag: int, tolerance: float) -> None:
    samples = {row.rank: row.samples_per_sec for row in enough if row.samples_per_sec is not None}
    slow = _outliers(samples, tolerance, ratio=True) if len(samples) >= MIN_RANKS else {}
    steps = {row.rank: float(row.last_step) for row in enough if row.last_step is not None}
    behind = _outliers(steps, 0.0, float(min_lag))
    median_step = statistics.median(steps.values())
    judged = {row.rank for row in enough}
    for row in rows:
        if row.rank in slow:
            row.reasons.append(f"samples/s {row.samples_per_sec:g}: {slow[row.rank]}")
            row.evidence.append("samples")
        if row.last_step is None:
            row.reasons.append(f"no step events while the median rank reached step {median_step:g}")
            row.evidence.append("steps")
        elif row.lag_steps is not None and row.lag_steps >= min_lag and (row.rank in behind or row.rank not in judged):
            row.reasons.append(f"last step {row.last_step}, {row.lag_steps:g} steps behind the median")
            row.evidence.append("steps")
        row.outlier = bool(row.reasons)


def _steady(row: RankProgress) -> tuple[float, float] | None:
    """(its slow quartile, its fast quartile) of samples/s; the median twice when they are unknown."""
    if row.samples_per_sec is None:
        return None
    if row.samples_quartiles is None:
        return row.samples_per_sec, row.samples_per_sec
    return row.samples_quartiles


def corroborate(rows: Iterable[RankProgress], tolerance: float = 0.4) -> None:
    """Drop timeline evidence that the rank's own figures contradict.

    Being last ready is also what a rank is when its requests travel further: under CPU
    contention the coordinator's peer is "last" in most negotiations of a healthy 2-rank job
    (measured: 236 of 288, 41 ms median, in the contention test). A timeline flag stands only
    when the rank does not report ``samples_per_sec``, or it was steadily slower than the best
    other rank: its fast quartile of samples/s (three quarters of its steps were slower) is
    below that rank's slow quartile by ``tolerance``. A median gap alone is what a noisy,
    overlapping pair of ranks also shows.
    """
    by_job: dict[tuple[str | None, int], list[RankProgress]] = {}
    for row in rows:
        by_job.setdefault((row.job, row.epoch), []).append(row)
    for job_rows in by_job.values():
        for row in job_rows:
            mine = _steady(row)
            if "timeline" not in row.evidence or mine is None:
                continue  # checked first: the others' figures are gathered only for the few timeline flags
            others = [quartiles for other in job_rows if other is not row and (quartiles := _steady(other)) is not None]
            if not others:
                continue
            best_slow = max(quartiles[0] for quartiles in others)
            if mine[1] <= (1 - tolerance) * best_slow:
                continue
            said = [reason for reason in row.reasons if reason.startswith("timeline:")]
            row.reasons = [reason for reason in row.reasons if not reason.startswith("timeline:")]
            row.evidence = [kind for kind in row.evidence if kind != "timeline"]
            row.outlier = bool(row.reasons)
            row.discounted = (f"{'; '.join(said)}; but its own samples/s (median {row.samples_per_sec:g}, a quarter of its steps at "
                              f"{mine[1]:g} or faster) is not steadily {tolerance:.0%} below the others' (a quarter of their steps at "
                              f"{best_slow:g} or slower): waits from scheduling or transport, not a slow rank")


def settle(rows: Iterable[RankProgress]) -> None:
    """Confidence per flagged row and the job's one-line verdict; run after every kind of evidence is attached."""
    by_job: dict[tuple[str | None, int], list[RankProgress]] = {}
    for row in rows:
        by_job.setdefault((row.job, row.epoch), []).append(row)
        row.confidence = None if not row.outlier else "certain" if len(set(row.evidence)) >= 2 else "likely"
    for (_, epoch), job_rows in by_job.items():
        flagged = [row for row in job_rows if row.outlier]
        where = f" (incarnation epoch {epoch})" if epoch else ""
        if flagged:
            verdict = "straggler" + ("s" if len(flagged) > 1 else "") + ": " + ", ".join(
                f"rank {row.rank} ({row.confidence}, on {'+'.join(dict.fromkeys(row.evidence))})" for row in flagged
            )
        elif discounted := [row for row in job_rows if row.discounted]:
            verdict = "no straggler: " + "; ".join(f"rank {row.rank}: {row.discounted}" for row in discounted)
        elif job_rows[0].undecided and any(row.timeline for row in job_rows):
            verdict = f"no straggler: the timeline names no rank the others waited for; step figures cannot decide ({job_rows[0].undecided})"
        elif job_rows[0].undecided:
            verdict = f"{_NO_DATA}: {job_rows[0].undecided}"
        else:
            verdict = f"no straggler: no rank is below the median beyond tolerance and spread ({len(job_rows)} ranks)"
        for row in job_rows:
            row.verdict = verdict + where


def stragglers(
    docs: Iterable[Document] | Tally,
    min_lag: int = 2,
    tolerance: float = 0.4,
    *,
    min_steps: int = MIN_STEPS,
    min_seconds: float = MIN_SECONDS,
    epoch: int | None = None,
) -> list[RankProgress]:
    """One row per rank of each job's compared incarnation (``epoch``, default the last), flagged
    on step evidence where it can decide; sorted by job, rank. Call :func:`settle` again after
    attaching timeline evidence."""
    tally = docs if isinstance(docs, Tally) else Tally()
    if not isinstance(docs, Tally):
        for doc in docs:
            tally.add_document(doc)
    rows: list[RankProgress] = []
    jobs = {job for job, _, _ in tally.tracks} | {job for job, _ in tally.sizes}
    for job in sorted(jobs, key=str):
        epochs = {e for j, e, _ in tally.tracks if j == job} | {e for j, e in tally.sizes if j == job}
        chosen = max(epochs) if epoch is None else epoch
        ranks = {r for j, e, r in tally.tracks if j == job and e == chosen} | set(range(tally.sizes.get((job, chosen), 0)))
        job_rows = [_row(job, chosen, rank, tally.tracks.get((job, chosen, rank), RankTrack())) for rank in sorted(ranks)]
        if job_rows:
            judge(job_rows, min_lag, tolerance, min_steps, min_seconds)
            rows.extend(job_rows)
    settle(rows)
    return rows

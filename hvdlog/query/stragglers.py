"""Who is behind: per-rank progress compared with the median rank.

In synchronous data-parallel training every rank finishes a step together (the allreduce
waits for the slowest), so end-of-step times cannot tell the slow rank from the fast ones.
What can: the last step a rank reached (a hung or dead rank stops while the others wait
one step ahead), its step rate over its own events, and its own ``samples_per_sec`` when
the training code measures it on the rank's compute time. A rank is flagged when it lags
the median by ``min_lag`` steps or more, or its rate is below ``1 - tolerance`` of the median.
Ranks of the job (from ``size``, believed up to :data:`MAX_JOB_SIZE`) with no step event
at all are flagged as silent.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from hvdlog.documents import Document, get_field, job_of, timestamp_millis
from hvdlog.query.spec import MAX_JOB_SIZE, Condition

__all__ = ["STEP_EVENTS", "RankProgress", "stragglers"]

#: What the analysis needs from a source: events that carry a step.
STEP_EVENTS: Final = (Condition("step"),)



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
    #: What the flag rests on: "steps" (this module), "timeline" (:mod:`hvdlog.timeline.evidence`).
    evidence: list[str] = field(default_factory=list)
    #: This rank's figures from Horovod's timeline, when one was found.
    timeline: dict[str, Any] | None = None
    #: This rank's CPU/memory/GPU figures from its ``resources`` events (:mod:`hvdlog.query.resources`).
    resources: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


@dataclass
class _Track:
    first_ms: int | None = None
    last_ms: int | None = None
    first_step: int | None = None
    last_step: int | None = None
    last_seen: str | None = None
    host: str | None = None
    events: int = 0
    samples: list[float] = field(default_factory=list)


def _collect(docs: Iterable[Document]) -> tuple[dict[tuple[Any, int], _Track], dict[Any, int]]:
    tracks: dict[tuple[Any, int], _Track] = {}
    sizes: dict[Any, int] = {}
    for doc in docs:
        rank, step, job = doc.get("rank"), doc.get("step"), job_of(doc)
        if isinstance(size := doc.get("size"), int) and 0 < size <= MAX_JOB_SIZE:
            sizes[job] = max(sizes.get(job, 0), size)
        if not isinstance(rank, int) or not isinstance(step, int) or isinstance(step, bool) or isinstance(rank, bool):
            continue
        millis = timestamp_millis(doc.get("@timestamp"))
        track = tracks.setdefault((job, rank), _Track())
        track.events += 1
        track.host = get_field(doc, "host.name") or track.host
        if isinstance(sps := doc.get("samples_per_sec"), (int, float)):
            track.samples.append(float(sps))
        if millis is None:
            continue
        if track.first_ms is None or millis < track.first_ms:
            track.first_ms, track.first_step = millis, step
        if track.last_ms is None or millis >= track.last_ms:
            track.last_ms, track.last_step, track.last_seen = millis, max(step, track.last_step or step), doc.get("@timestamp")
    return tracks, sizes


def _rate(track: _Track) -> float | None:
    if track.first_ms is None or track.last_ms is None or track.last_ms <= track.first_ms:
        return None
    return round((track.last_step - track.first_step) / ((track.last_ms - track.first_ms) / 1000), 4)  # type: ignore[operator]


def _flag(row: RankProgress, median_step: float, median_rate: float | None, median_sps: float | None, min_lag: int, tolerance: float) -> None:
    if row.last_step is None:
        row.reasons.append("no step events")
    else:
        row.lag_steps = median_step - row.last_step
        if row.lag_steps >= min_lag:
            row.reasons.append(f"{row.lag_steps:g} steps behind the median")
    if median_rate and row.steps_per_sec is not None and row.steps_per_sec < (1 - tolerance) * median_rate:
        row.reasons.append(f"step rate {row.steps_per_sec:g}/s vs median {median_rate:g}/s")
    if median_sps and row.samples_per_sec is not None and row.samples_per_sec < (1 - tolerance) * median_sps:
        row.reasons.append(f"samples/s {row.samples_per_sec:g} vs median {median_sps:g}")
    row.outlier = bool(row.reasons)
    row.evidence = ["steps"] if row.reasons else []


def stragglers(docs: Iterable[Document], min_lag: int = 2, tolerance: float = 0.25) -> list[RankProgress]:
    """One row per (job, rank), outliers flagged with their reasons; sorted by job, rank."""
    tracks, sizes = _collect(docs)
    rows: list[RankProgress] = []
    for job in sorted({job for job, _ in tracks} | set(sizes), key=str):
        ranks = {rank for j, rank in tracks if j == job} | set(range(sizes.get(job, 0)))
        job_rows = []
        for rank in sorted(ranks):
            track = tracks.get((job, rank), _Track())
            sps = round(statistics.median(track.samples), 3) if track.samples else None
            job_rows.append(
                RankProgress(job, rank, track.host, track.events, track.first_step, track.last_step, track.last_seen, _rate(track), sps)
            )
        steps = [row.last_step for row in job_rows if row.last_step is not None]
        rates = [row.steps_per_sec for row in job_rows if row.steps_per_sec is not None]
        samples = [row.samples_per_sec for row in job_rows if row.samples_per_sec is not None]
        median_step = statistics.median(steps) if steps else 0
        for row in job_rows:
            _flag(
                row,
                median_step,
                statistics.median(rates) if rates else None,
                statistics.median(samples) if samples else None,
                min_lag,
                tolerance,
            )
        rows.extend(job_rows)
    return rows

"""The timeline as evidence for ``hvdlog stragglers``: which rank the collectives waited for.

Step rates say a rank is slow; the timeline says the others *waited for it*, tensor by
tensor. A rank is named by the timeline when it was the last ready in a clear majority of
the negotiations that record per-rank readiness (halfway between a fair share, ``1/size``,
and always) and the median wait it caused is above ``min_wait`` — so jitter in a balanced
job, or one slow start-up broadcast, names nobody.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from hvdlog.timeline.analysis import RankWait, TimelineAnalysis

__all__ = ["MIN_TIMES_LAST", "MIN_WAIT", "attach", "culprits", "reason"]

#: Median wait caused (seconds) below which being last is noise, not a straggler.
MIN_WAIT: Final = 0.005
#: Fewer "last" negotiations than this prove nothing.
MIN_TIMES_LAST: Final = 3


def culprits(analysis: TimelineAnalysis, min_wait: float = MIN_WAIT) -> list[RankWait]:
    """Ranks the timeline names as the ones the others waited for."""
    if not analysis.attributed or not analysis.ranks:
        return []
    fair = 1 / max(len(analysis.ranks), 2)
    threshold = fair + (1 - fair) / 2
    return [
        row
        for row in analysis.ranks
        if row.times_last >= MIN_TIMES_LAST
        and row.times_last / analysis.attributed >= threshold
        and (row.wait_caused_median or 0.0) >= min_wait
    ]


def reason(row: RankWait, analysis: TimelineAnalysis) -> str:
    """One sentence of evidence, for the text output."""
    median_ms = (row.wait_caused_median or 0.0) * 1000
    return (
        f"timeline: last ready in {row.times_last}/{analysis.attributed} negotiations, "
        f"others waited {row.wait_caused_seconds:.3g} s for it (median {median_ms:.3g} ms)"
    )


def summary(analysis: TimelineAnalysis) -> dict[str, Any]:
    """What a stragglers row carries about the whole timeline (coverage, damage)."""
    return {
        "sources": analysis.sources,
        "negotiations": analysis.negotiations,
        "attributed": analysis.attributed,
        "unattributed_seconds": round(analysis.unattributed_seconds, 6),
        "truncated": analysis.truncated,
    }


def attach(rows: Iterable[Any], analyses: dict[str | None, TimelineAnalysis], min_wait: float = MIN_WAIT) -> None:
    """Add timeline figures (and, for named ranks, a reason and the flag) to stragglers rows.

    ``analyses`` is keyed by job; the key None applies to every job without its own.
    """
    for row in rows:
        analysis = analyses.get(row.job) or analyses.get(None)
        if analysis is None:
            continue
        named = {wait.rank for wait in culprits(analysis, min_wait)}
        wait = analysis.rank(row.rank)
        row.timeline = {**(wait.to_json() if wait else {"rank": row.rank}), **summary(analysis), "named": row.rank in named}
        if row.rank in named and wait is not None:
            row.reasons.append(reason(wait, analysis))
            row.evidence.append("timeline")
            row.outlier = True

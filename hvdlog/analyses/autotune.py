"""What Horovod's autotuner settled on, for ``hvdlog stragglers``/``report`` to show in one line.

Call :func:`autotune_line` with the paths a command was given: it finds ``autotune.csv`` in
the job folders (where ``hvdlog run`` points ``--autotune-log-file``) and says the fusion
threshold and cycle time Horovod kept, or the best so far when tuning had not finished.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hvdlog.documents import get_field
from hvdlog.parse.autotune import AUTOTUNE_FILE, autotune_documents

__all__ = ["AutotuneResult", "autotune_line", "autotune_result", "autotune_results", "describe", "find_autotune_logs"]


@dataclass(frozen=True, slots=True)
class AutotuneResult:
    """The setting the autotuner kept (``finished``) or the best sample so far."""

    job: str
    fusion_threshold_mb: float
    cycle_time_ms: float
    score: float
    samples: int
    finished: bool


def find_autotune_logs(paths: Iterable[str | Path]) -> list[Path]:
    """``autotune.csv`` files named directly, in a named job folder or one level below it."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file() and path.name == AUTOTUNE_FILE:
            found.append(path)
        elif path.is_dir():
            found += sorted(p for p in (path / AUTOTUNE_FILE, *path.glob(f"*/{AUTOTUNE_FILE}")) if p.is_file())
    return sorted(set(found))


def autotune_result(path: Path) -> AutotuneResult | None:
    """The kept (or best so far) setting of one autotune log; None when it holds no sample."""
    docs = list(autotune_documents(path))
    if not docs:
        return None
    chosen = [doc for doc in docs if get_field(doc, "horovod.autotune.chosen")]
    best = chosen[-1] if chosen else max(docs, key=lambda doc: get_field(doc, "horovod.autotune.score"))
    return AutotuneResult(
        job=str(best["job"]),
        fusion_threshold_mb=get_field(best, "horovod.autotune.fusion_threshold_mb"),
        cycle_time_ms=get_field(best, "horovod.autotune.cycle_time_ms"),
        score=get_field(best, "horovod.autotune.score"),
        samples=len(docs) - (1 if chosen else 0),
        finished=bool(chosen),
    )


def autotune_results(paths: Iterable[str | Path]) -> dict[str, AutotuneResult]:
    """The kept (or best so far) setting per job, from the autotune logs found under ``paths``;
    unreadable or empty logs are left out (the line says nothing rather than guess)."""
    results: dict[str, AutotuneResult] = {}
    for path in find_autotune_logs(paths):
        try:
            result = autotune_result(path)
        except OSError:
            continue
        if result is not None:
            results[result.job] = result
    return results


def describe(result: AutotuneResult) -> str:
    """``kept fusion threshold 4 MB, cycle time 5 ms (score 0.072 after 16 samples)``."""
    verb = "kept" if result.finished else "best so far (tuning not finished)"
    return (f"{verb} fusion threshold {result.fusion_threshold_mb:g} MB, cycle time {result.cycle_time_ms:g} ms"
            f" (score {result.score:g} after {result.samples} samples)")


def autotune_line(paths: Iterable[str | Path]) -> list[str]:
    """One line per job with an autotune log under ``paths``, e.g. ``autotune (job j): kept fusion
    threshold 4 MB, cycle time 5 ms (score 0.072 after 16 samples)``."""
    return [f"autotune (job {job}): {describe(result)}" for job, result in sorted(autotune_results(paths).items())]

"""Text and JSON rendering of timeline analyses, shared by ``hvdlog timeline`` and ``hvdlog stragglers --top``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hvdlog.cli.options import Run
from hvdlog.cli.options import warn as _warn
from hvdlog.cli.output import Printer
from hvdlog.cli.pictures import bars
from hvdlog.query.source import SourceError
from hvdlog.timeline.analysis import TimelineAnalysis
from hvdlog.timeline.load import NEGOTIATIONS, from_documents, from_paths
from hvdlog.timeline.wait_evidence import culprits

__all__ = ["print_top", "timeline_analyses"]


def timeline_analyses(run: Run, explicit: Sequence[str] = ()) -> dict[str | None, TimelineAnalysis]:
    """Timelines of the run's file PATHs and explicit files, and timeline documents in Elasticsearch, by job."""
    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.files import FileSource

    search = [path for source in run.sources if isinstance(source, FileSource) for path in source.paths]
    analyses = from_paths(search, explicit, _warn)
    # Negotiation documents carry no rank, step, level or message pattern: only job, host and time filter them.
    spec = replace(run.spec, ranks=None, steps=None, min_level=None, pattern=None, any_of=NEGOTIATIONS)
    unreadable = {failure.split(": ", 1)[0] for failure in run.failures}
    for source in run.sources:
        if isinstance(source, ElasticsearchSource) and source.label not in unreadable:  # already said once
            try:
                found = from_documents(source.search(spec))
            except SourceError as exc:
                _warn(f"{source.label}: timeline documents not read ({exc})")
                continue
            for job, analysis in found.items():
                analysis.sources = [source.label]
                analyses.setdefault(job, analysis)
    return analyses


def print_top(printer: Printer, job: str | None, analysis: TimelineAnalysis, top: int, as_json: bool) -> None:
    """Ranks and tensors by wait caused, with coverage (how many negotiations name ranks)."""
    named = {row.rank for row in culprits(analysis)}
    if as_json:
        printer.json({"job": job, "timeline": analysis.to_json(top), "named_ranks": sorted(named)})
        return
    cut = " (ends mid-event: read up to the cut)" if analysis.truncated else ""
    printer.text(f"timeline of {job or 'the given files'}: {', '.join(analysis.sources)}{cut}")
    printer.text(
        f"  {analysis.negotiations} negotiations, {analysis.attributed} with per-rank readiness"
        + (f"; {analysis.negotiations - analysis.attributed} answered from Horovod's response cache name no rank "
           f"({analysis.unattributed_seconds:.3g} s; HOROVOD_CACHE_CAPACITY=0 records them all)" if analysis.negotiations > analysis.attributed else "")
    )
    if analysis.open_negotiations:
        missing = ", ".join(f"rank {rank} in {count}" for rank, count in sorted(analysis.open_missing.items(), key=lambda kv: -kv[1]))
        printer.text(f"  {analysis.open_negotiations} negotiations still open when the timeline ends; not ready: {missing or 'unknown'}")
    printer.text(f"  {'rank':>4} {'last':>6} {'wait caused s':>13} {'median ms':>9} {'waited s':>9}  named")
    for row in analysis.top_ranks(top):
        median = "-" if row.wait_caused_median is None else f"{row.wait_caused_median * 1000:.3g}"
        printer.text(
            f"  {row.rank:>4} {row.times_last:>6} {row.wait_caused_seconds:>13.4g} {median:>9} {row.waited_seconds:>9.4g}  "
            + ("YES: the others waited for it" if row.rank in named else ""),
            style="bold red" if row.rank in named else None,
        )
    printer.text("  wait caused, by rank:")
    for line in bars({row.rank: round(row.wait_caused_seconds, 3) for row in analysis.top_ranks(top)}, fancy=printer.stream.isatty(), unit=" s"):
        printer.text(f"    {line}")
    printer.text(f"  {'tensor':<40} {'negot.':>6} {'wait caused s':>13}  by rank")
    for tensor in analysis.top_tensors(top):
        by_rank = ", ".join(f"{rank}: {seconds:.3g}" for rank, seconds in sorted(tensor.wait_caused.items(), key=lambda kv: -kv[1]))
        printer.text(f"  {tensor.tensor[:40]:<40} {tensor.negotiations:>6} {tensor.total_wait_caused:>13.4g}  {by_rank}")
    phases = ", ".join(f"{name} {seconds:.3g} s" for name, seconds in sorted(analysis.phases.items(), key=lambda kv: -kv[1]))
    printer.text(f"  time per phase (coordinator's view, summed over tensors): {phases}")

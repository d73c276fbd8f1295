"""``hvdlog stalls``: every stall episode, Horovod's inspector and our watchdog, on files or Elasticsearch."""

from __future__ import annotations

import click

from hvdlog.analyses.hang import hang_verdict, roll_call
from hvdlog.analyses.job import episode_end
from hvdlog.analyses.resets import epoch_of
from hvdlog.analyses.stalls import find_stalls
from hvdlog.cli.analysis import nothing_found, read_with, size_option
from hvdlog.cli.options import Run, Seconds, jobs_option, source_options
from hvdlog.cli.output import Printer, format_time
from hvdlog.cli.text import clip
from hvdlog.documents import job_of
from hvdlog.query.spec import Condition, format_ranks
from hvdlog.runtime.pending import summarize

__all__ = ["stalls"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--merge-gap", default=150.0, show_default=True, type=Seconds(zero=True), help="Reports further apart (s) start a new episode.")
@size_option
@jobs_option
@source_options
def stalls(run: Run, merge_gap: float, size: int | None, workers: int, **_: object) -> None:
    """List stall episodes: start, duration, missing ranks, tensors, and whether the job shut down.

    Under a DistributedOptimizer, also the tensors the waiting ranks need that a rank never submitted.

    Each episode then gets its hang verdict: the ranks grouped by where they are stuck (the roll-call) and a
    class (culprit outside the collective, divergence, dead or silent rank, all wedged, stuck capture), with its
    reasoning and confidence.

    Missing ranks are computed per tensor against the job size (its own events, or --size);
    without one, "size unknown" says the ranks shown are a lower bound.

    Exit 0 when there was at least one stall, 1 when none (one sentence on stderr says what was read), 2 on an error.
    """
    read_with(run, workers)
    episodes = find_stalls(lambda spec: run.documents(spec=spec), run.spec, merge_gap, size=size)
    resets = _reset_epochs(run) if any(not episode.resolved for episode in episodes) else {}
    printer = Printer(as_json=run.as_json)
    for episode in episodes:
        # how it ended, in the job model's words (an elastic reset past it ends it too)
        end = episode_end(episode, resets.get(episode.job, ()))
        verdict = hang_verdict(episode)
        if run.as_json:
            printer.json({**episode.to_json(), "ended": end, "hang": verdict.to_json()})
            continue
        missing = format_ranks(episode.missing_ranks) or "?"
        duration = f"{episode.duration_s:>7.1f} s" if episode.start is not None else "  untimed"  # pre-0.16 reports
        line = (
            f"{format_time(episode.start)}  job {episode.job}  {duration}  "
            f"missing ranks {missing:<6} {end:<16} {episode.source}"
        )
        details = [f"step {episode.step}" if episode.step is not None else "", ", ".join(episode.operations), clip(summarize(episode.tensors, 6))]
        if episode.start is None:
            details.append(f"{episode.reports} report(s)")
        if episode.missing_by_tensor and episode.size is None:
            details.append("size unknown: at least these ranks (give --size)")
        if episode.epoch:
            details.append(f"epoch {episode.epoch}")
        if episode.waiting_ranks:
            details.append(f"waiting ranks {format_ranks(episode.waiting_ranks)}")
        if episode.unsubmitted_tensors:
            ranks = format_ranks(episode.unsubmitted_ranks)
            details.append(f"never submitted by rank {ranks}: {clip(summarize(episode.unsubmitted_tensors, 6))}")
        printer.text("  ".join([line, *(d for d in details if d)]), style="red" if episode.shutdown else "yellow")
        if verdict.groups:
            printer.text(f"  roll-call: {roll_call(verdict.groups)}")
        printer.text(f"  hang: {verdict.kind.replace('_', ' ')}: {verdict.reasoning} [{verdict.confidence}]")
        if verdict.next_steps:
            printer.text(f"  next: {'; '.join(verdict.next_steps)}")
    if not episodes and not run.failures:
        nothing_found("no stall", run)
    run.exit(bool(episodes))


def _reset_epochs(run: Run) -> dict[str | None, set[int]]:
    """Per job, the epochs its elastic resets started (few events: one per surviving process and reset)."""
    found: dict[str | None, set[int]] = {}
    for doc in run.documents(spec=run.with_any_of((Condition("event.action", ("elastic_reset",)),))):
        found.setdefault(job_of(doc), set()).add(epoch_of(doc))
    return found


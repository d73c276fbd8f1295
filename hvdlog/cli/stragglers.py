"""``hvdlog stragglers``: per rank, last step, samples/s and lag behind the median, timeline evidence and resources;
a rank is flagged only when the data supports it, with how much, on what evidence and how sure."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hvdlog.analyses.autotune import autotune_line
from hvdlog.analyses.resources import RESOURCE_EVENTS, is_resources, short
from hvdlog.analyses.resources import attach as attach_resources
from hvdlog.analyses.resources import figures as resource_figures
from hvdlog.analyses.stragglers import MIN_SECONDS, MIN_STEPS, STEP_EVENTS, RankProgress, Tally, corroborate, picture_figure, settle
from hvdlog.analyses.stragglers import stragglers as analyse
from hvdlog.cli.options import Run, jobs_option, source_options
from hvdlog.cli.output import Printer
from hvdlog.cli.timeline_output import print_top, timeline_analyses
from hvdlog.documents import Document
from hvdlog.query.source import Source
from hvdlog.query.spec import Filter
from hvdlog.timeline.wait_evidence import attach

if TYPE_CHECKING:
    from hvdlog.analyses.step_read import StepRead
    from hvdlog.query.files import FileSource

__all__ = ["stragglers"]


def _read(run: Run, workers: int) -> tuple[Tally, list[Document]]:
    """Every source's step events into one tally (files: the fast reader, in ``workers``
    processes); the few ``resources`` events kept aside."""
    from hvdlog.analyses.step_es import step_tally
    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.files import FileSource

    tally, resources = Tally(), []
    spec = run.with_any_of(STEP_EVENTS + RESOURCE_EVENTS)

    def one(source: Source) -> None:
        if isinstance(source, FileSource):
            found = _read_files(source, spec, workers)
            tally.merge(found.tally)
            resources.extend(found.resources)
            return
        counted = step_tally(source, spec) if isinstance(source, ElasticsearchSource) else None
        if counted is not None:  # Elasticsearch counted the step events: only resources events are read
            tally.merge(counted)
            resources.extend(source.search(run.with_any_of(RESOURCE_EVENTS)))
            return
        for doc in source.search(spec):
            if is_resources(doc):
                resources.append(doc)
            else:
                tally.add_document(doc)

    for source in run.sources:
        run.guarded(source, lambda source=source: one(source))  # type: ignore[misc]
    return tally, resources


def _read_files(source: FileSource, spec: Filter, workers: int) -> StepRead:
    """The fast step reader, with a progress line on a terminal (:mod:`hvdlog.query.progress`)."""
    from hvdlog.analyses.step_read import read_steps
    from hvdlog.query.progress_files import ProgressFileSource

    if not isinstance(source, ProgressFileSource):
        return read_steps(source, spec, workers)
    try:
        return read_steps(source, spec, workers, lambda files: source.watch(files).advance)
    finally:
        if source.progress is not None:
            source.progress.end()


def _num(value: float | None, fmt: str = "g") -> str:
    return "-" if value is None else format(value, fmt)


def _print(printer: Printer, rows: list[RankProgress]) -> None:
    printer.text(f"{'job':<24} {'rank':>4} {'last step':>9} {'steps/s':>8} {'samples/s':>10} {'lag':>5}  flag")
    verdicts: dict[tuple[str | None, int], str] = {}
    for row in rows:
        verdicts[(row.job, row.epoch)] = row.verdict
        flag = f"STRAGGLER ({row.confidence}): " + "; ".join(row.reasons) if row.outlier else ""
        if row.resources:
            flag = f"[{short(row.resources)}] {flag}".rstrip()
        printer.text(
            f"{str(row.job)[:24]:<24} {row.rank:>4} {_num(row.last_step):>9} {_num(row.steps_per_sec):>8} "
            f"{_num(row.samples_per_sec):>10} {_num(row.lag_steps):>5}  {flag}",
            style="bold red" if row.outlier else None,
        )
    for (job, epoch), verdict in verdicts.items():
        _picture(printer, [row for row in rows if (row.job, row.epoch) == (job, epoch)])
        printer.text(f"{job}: {verdict}")


#: Up to this many ranks, one bar each; beyond, one sparkline character per rank.
BAR_RANKS = 32


def _picture(printer: Printer, rows: list[RankProgress]) -> None:
    """Who is behind at a glance: each rank's samples/s (else steps/s, else last step: ``PICTURE_FIGURES``)
    as a bar, flagged ranks in red on a colour terminal; block characters on a terminal, ASCII
    into a pipe (:mod:`hvdlog.cli.pictures`)."""
    from hvdlog.cli.pictures import bars, figure_sparkline

    title, values = picture_figure(rows)
    if not values:
        return
    fancy = printer.stream.isatty()
    if len(values) > BAR_RANKS:
        printer.text(f"{rows[0].job}: {figure_sparkline(title, values, fancy)}")
        return
    printer.text(f"{rows[0].job}: {title} by rank:")
    flagged = {row.rank for row in rows if row.outlier}
    for rank, line in zip(sorted(values), bars(values, fancy), strict=True):
        printer.text(f"  {line}" + ("  <- flagged" if rank in flagged else ""), style="bold red" if rank in flagged else None)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--min-lag", default=2, show_default=True, type=click.IntRange(min=1), help="Steps behind the median that flag a rank.")
@click.option("--tolerance", default=0.4, show_default=True, type=click.FloatRange(0, 1),
              help="samples/s this share below the median (and beyond the ranks' spread) flags a rank.")
@click.option("--min-steps", default=MIN_STEPS, show_default=True, type=click.IntRange(min=1),
              help="Steps a rank must have progressed over for its figures to count.")
@click.option("--min-seconds", default=MIN_SECONDS, show_default=True, type=click.FloatRange(min=0),
              help="Seconds a rank's step events must span for its figures to count.")
@click.option("--epoch", type=click.IntRange(min=0), default=None,
              help="Compare the ranks of this incarnation of an elastic job (horovod.elastic.epoch)  [default: the last].")
@click.option("--timeline", "timelines", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A Horovod timeline file to use as evidence (repeatable); timelines under PATHs are found anyway.")
@click.option("--no-timeline", is_flag=True, help="Ignore Horovod timelines (step events only).")
@click.option("--top", default=0, show_default=True, type=click.IntRange(min=0),
              help="Also show the top N ranks and tensors by wait caused, from the timeline.")
@jobs_option
@source_options
def stragglers(
    run: Run, min_lag: int, tolerance: float, min_steps: int, min_seconds: float, epoch: int | None,
    timelines: tuple[str, ...], no_timeline: bool, top: int, workers: int, **_: object,
) -> None:
    """Show each rank's progress and flag the ones behind, when the data supports it.

    Evidence: a rank's own samples/s and last step against the median of the ranks (at
    least 3 ranks with --min-steps steps over --min-seconds seconds, below the median by
    --tolerance and by 3.5 robust deviations); and, when a Horovod timeline is found under
    the PATHs, given with --timeline, or shipped to Elasticsearch, which rank the collectives
    waited for (the only evidence that can name one of 2 ranks). Otherwise it says "not
    enough data to call a straggler". Exit 0 when a straggler was flagged, 1 when none, 2 on an error.
    """
    tally, resources = _read(run, workers)
    rows = analyse(tally, min_lag, tolerance, min_steps=min_steps, min_seconds=min_seconds, epoch=epoch)
    analyses = {} if no_timeline else timeline_analyses(run, timelines)
    attach(rows, analyses)
    corroborate(rows, tolerance)
    attach_resources(rows, resource_figures(resources))
    settle(rows)
    printer = Printer(as_json=run.as_json)
    if run.as_json:
        for row in rows:
            printer.json(row.to_json())
    elif rows:
        _print(printer, rows)
    elif not (run.failures and len(run.failures) >= len(run.sources)):  # nothing read: the error says so, no verdict
        printer.text("no step events: not enough data to call a straggler")
    for job, analysis in analyses.items() if top else ():
        print_top(printer, job, analysis, top, run.as_json)
    if not run.as_json:  # what Horovod's autotuner kept bears on every rank's speed
        for line in autotune_line(run.file_paths()):
            printer.text(line)
    run.exit(any(row.outlier for row in rows))

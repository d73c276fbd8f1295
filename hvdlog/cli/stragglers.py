"""``hvdlog stragglers``: per rank, last step, step rate and lag behind the median, timeline evidence and resources; outliers flagged."""

from __future__ import annotations

from collections.abc import Iterator

import click

from hvdlog.cli.options import Run, source_options
from hvdlog.cli.output import Printer
from hvdlog.cli.timeline_output import print_top, timeline_analyses
from hvdlog.documents import Document
from hvdlog.query.resources import RESOURCE_EVENTS, is_resources, short
from hvdlog.query.resources import attach as attach_resources
from hvdlog.query.resources import figures as resource_figures
from hvdlog.query.stragglers import STEP_EVENTS
from hvdlog.query.stragglers import stragglers as analyse
from hvdlog.timeline.evidence import attach

__all__ = ["stragglers"]


def _set_aside(docs: Iterator[Document], resources: list[Document]) -> Iterator[Document]:
    """Every document but ``resources`` events, which go to ``resources``."""
    for doc in docs:
        if is_resources(doc):
            resources.append(doc)
        else:
            yield doc


def _num(value: float | None, fmt: str = "g") -> str:
    return "-" if value is None else format(value, fmt)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--min-lag", default=2, show_default=True, type=click.IntRange(min=1), help="Steps behind the median that flag a rank.")
@click.option("--tolerance", default=0.25, show_default=True, type=click.FloatRange(0, 1), help="Rate this far below the median flags a rank.")
@click.option("--timeline", "timelines", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A Horovod timeline file to use as evidence (repeatable); timelines under PATHs are found anyway.")
@click.option("--no-timeline", is_flag=True, help="Ignore Horovod timelines (step events only).")
@click.option("--top", default=0, show_default=True, type=click.IntRange(min=0),
              help="Also show the top N ranks and tensors by wait caused, from the timeline.")
@source_options
def stragglers(run: Run, min_lag: int, tolerance: float, timelines: tuple[str, ...], no_timeline: bool, top: int, **_: object) -> None:
    """Show each rank's progress and flag the ones behind.

    Evidence: step events (last step, step rate, samples/s) and, when a Horovod timeline is
    found under the PATHs, given with --timeline, or shipped to Elasticsearch, which rank the
    collectives waited for. Exit 0 when a straggler was flagged, 1 when none, 2 on an error.
    """
    # One pass over the sources: step events for the analysis, resources events (few) set aside.
    resources: list[Document] = []
    docs = run.documents(any_of=STEP_EVENTS + RESOURCE_EVENTS)
    rows = analyse(_set_aside(docs, resources), min_lag, tolerance)
    analyses = {} if no_timeline else timeline_analyses(run, timelines)
    attach(rows, analyses)
    attach_resources(rows, resource_figures(resources))
    printer = Printer(as_json=run.as_json)
    if not run.as_json and rows:
        printer.text(f"{'job':<24} {'rank':>4} {'last step':>9} {'steps/s':>8} {'samples/s':>10} {'lag':>5}  flag")
    for row in rows:
        if run.as_json:
            printer.json(row.to_json())
            continue
        flag = "STRAGGLER: " + "; ".join(row.reasons) if row.outlier else ""
        if row.resources:
            flag = f"[{short(row.resources)}] {flag}".rstrip()
        printer.text(
            f"{str(row.job)[:24]:<24} {row.rank:>4} {_num(row.last_step):>9} {_num(row.steps_per_sec):>8} "
            f"{_num(row.samples_per_sec):>10} {_num(row.lag_steps):>5}  {flag}",
            style="bold red" if row.outlier else None,
        )
    for job, analysis in analyses.items() if top else ():
        print_top(printer, job, analysis, top, run.as_json)
    run.exit(any(row.outlier for row in rows))

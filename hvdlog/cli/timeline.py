"""``hvdlog timeline``: who made the collectives wait — ranks and tensors by wait caused."""

from __future__ import annotations

from pathlib import Path

import click

from hvdlog.cli.options import Run, fail, source_options
from hvdlog.cli.output import Printer
from hvdlog.cli.timeline_output import print_top, timeline_analyses
from hvdlog.timeline.wait_evidence import culprits

__all__ = ["timeline"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--timeline", "timelines", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="A timeline file (repeatable, in order for rotated segments); files under PATHs are found by content.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="How many ranks and tensors to show.")
@click.option("--export", "export_to", type=click.Path(dir_okay=False, writable=True),
              help="Write the documents Elasticsearch stores (one per negotiation and collective run) as NDJSON to this file"
                   " (`-` for stdout), e.g. <root>/<job>/<host>/horovod-timeline.ndjson for Filebeat to ship.")
@source_options
def timeline(run: Run, timelines: tuple[str, ...], top: int, export_to: str | None, **_: object) -> None:
    """Analyse Horovod timelines: per rank, how often it was last and the wait it caused; top tensors.

    Timelines are found under the PATHs whatever their name (HOROVOD_TIMELINE,
    horovodrun --timeline-filename, hvdlog.configure(timeline=True)). A file cut mid-event
    (a killed job) is read up to the cut. Exit 0 when a rank is named as the one the others
    waited for, 1 when none, 2 on an error.
    """
    if export_to:
        _export(run, timelines, export_to)
        return
    analyses = timeline_analyses(run, timelines)
    if not analyses:
        fail("no Horovod timeline found: give the job directory or --timeline FILE (set HOROVOD_TIMELINE or configure(timeline=True) to record one)")
    printer = Printer(as_json=run.as_json)
    for job, analysis in sorted(analyses.items(), key=lambda item: str(item[0])):
        print_top(printer, job, analysis, top, run.as_json)
    run.exit(any(culprits(analysis) for analysis in analyses.values()))


def _export(run: Run, timelines: tuple[str, ...], target: str) -> None:
    """Every timeline found (or given) as NDJSON documents; job and host from our layout, else --job."""
    from hvdlog.query.files import FileSource
    from hvdlog.timeline.discover import find_timelines
    from hvdlog.timeline_format.documents import documents, export_line, job_and_host
    from hvdlog.timeline_format.records import negotiations_and_runs

    groups = find_timelines([p for s in run.sources if isinstance(s, FileSource) for p in s.paths])
    if timelines:
        groups.setdefault(None, []).extend(Path(t) for t in timelines)
    if not groups:
        fail("no Horovod timeline found: give the job directory or --timeline FILE")
    written = 0
    with click.open_file(target, "wb") as out:
        for job, files in groups.items():
            layout_job, host = job_and_host(files[0])
            name = job or layout_job or (run.spec.jobs[0] if run.spec.jobs else None)
            for doc in documents(negotiations_and_runs(files), name, host):
                out.write(export_line(doc))
                written += 1
    click.echo(f"hvdlog: {written} document(s) written", err=True)
    run.exit(written > 0)

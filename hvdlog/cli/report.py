"""``hvdlog report``: the 3 a.m. command, one screen per job from one read of the logs.

In this order: the job (ranks, hosts, time span, last step, how it ended), the first
failure and why, the stall episodes, the stragglers, the timeline's verdict, resources.
Each section is a line or two and the command that shows more. ``--json``: the same, one
document per job. The analyses are :mod:`hvdlog.analyses.report`'s adapters over the existing ones.
"""

from __future__ import annotations

import shlex
from typing import Any

import click

from hvdlog.analyses.autotune import autotune_results
from hvdlog.analyses.fingerprint import describe_fingerprint
from hvdlog.analyses.report import collect, report
from hvdlog.cli.options import Run, fail, source_options
from hvdlog.cli.output import Printer, format_time
from hvdlog.cli.pictures import figure_sparkline
from hvdlog.cli.text import SHORT, clip
from hvdlog.cli.timeline_output import timeline_analyses
from hvdlog.query.spec import format_ranks
from hvdlog.timeline.wait_evidence import culprits

__all__ = ["more_command", "report_command"]

_STATE_STYLE = {"failed": "bold red", "recovered": "yellow", "running": "cyan", "finished": "green", "unknown": "yellow"}
_SECTIONS = (
    ("first failure", "first_failure", "first-failure"),
    ("stalls", "stalls", "stalls"),
    ("stragglers", "stragglers", "stragglers"),
    ("timeline", "timeline", "timeline"),
    ("resources", "resources", "stragglers"),
)


def more_command(run: Run, command: str, job: str | None, several: bool) -> str:
    """The command that shows a section in full, spelled with the same sources as this run."""
    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.files import FileSource

    words = ["hvdlog", command]
    for source in run.sources:
        if isinstance(source, FileSource):
            words += [str(path) for path in source.paths]
        elif isinstance(source, ElasticsearchSource):
            words += ["--es", source.label.removeprefix("elasticsearch ")]
            several = True
    if job is not None and several:
        words += ["--job", job]
    return " ".join(shlex.quote(word) for word in words)


def _only_job_over_elasticsearch(run: Run) -> None:
    """Over Elasticsearch without ``--job``: the job the matching documents name, when they name
    exactly one (one server aggregation); a report never reads a whole cluster's jobs."""
    from dataclasses import replace

    from hvdlog.query.es import ElasticsearchSource

    elastic = [source for source in run.sources if isinstance(source, ElasticsearchSource)]
    if not elastic:
        return
    jobs = {job for source in elastic for job in source.scope(run.spec).jobs}
    if len(jobs) != 1:
        several = "the documents name several jobs" if jobs else "the documents name no job"
        fail(f"over Elasticsearch, {several}: name one with --job J (`hvdlog jobs --es URL` lists them)")
    run.spec = replace(run.spec, jobs=tuple(jobs))


@click.command("report", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@source_options
def report_command(run: Run, **_: object) -> None:
    """One screen per job: how it ended, the first failure and why, stalls, stragglers, the timeline's verdict, resources.

    The logs are read once for every section; each section names the command that shows
    more. Exit 0 when a report was made, 1 when no event matched, 2 on an error.
    """
    if not run.spec.jobs:
        _only_job_over_elasticsearch(run)
    facts, kept = collect(run.documents())
    timelines = timeline_analyses(run)
    reports = report(facts, kept, timelines, culprits, run.spec, autotune=autotune_results(run.file_paths()),
                     reread=lambda spec: run.documents(spec=spec))
    printer = Printer(as_json=run.as_json)
    for item in reports:
        item["more"] = {key: more_command(run, command, item["job"], len(reports) > 1) for _, key, command in _SECTIONS}
        if run.as_json:
            printer.json(item)
        else:
            _print(printer, item)
    run.exit(bool(reports))


def _span(item: dict[str, Any]) -> str:
    first, last = format_time(item["first"]), format_time(item["last"])
    return f"{first} to {last}" if first != "-" else "no time recorded"


def _print(printer: Printer, item: dict[str, Any]) -> None:
    ranks = item["ranks"]
    size = f"{len(ranks)} of {item['size']} ranks" if item["size"] and item["size"] != len(ranks) else f"{len(ranks)} ranks"
    hosts = ", ".join(item["hosts"][:3]) + (f" +{len(item['hosts']) - 3}" if len(item["hosts"]) > 3 else "") or "host unknown"
    status = item["status"]
    step = f"last step {item['last_step']}" if item["last_step"] is not None else "no step"
    printer.text(f"job {item['job']}: {size} ({format_ranks(ranks) or '-'}) on {hosts}, {_span(item)}, {step}")
    printer.text(f"  {status['state'].upper()} ({status['confidence']}): {clip(status['reasoning'], 2 * SHORT)}", style=_STATE_STYLE.get(status["state"]))
    for title, key, _ in _SECTIONS:
        section = item.get(key) or {"summary": "none: no rank failed"}
        # one line each: a failure's free text cut at SHORT, any other summary at twice that (the command named after "more" shows it whole)
        summary = clip(section["summary"], SHORT if key == "first_failure" else 2 * SHORT)
        printer.text(f"  {title:<14} {summary}   (more: {item['more'][key]})",
                     style="red" if key == "first_failure" and item.get(key) else None)
        if key == "first_failure" and section.get("reasoning") and section["reasoning"] not in section["summary"]:
            printer.text(f"  {'':<14} why ({section['confidence']}): {clip(section['reasoning'])}")
        if key == "first_failure" and (mark := section.get("fingerprint")):
            printer.text(f"  {'':<14} fingerprint {mark['id']}: {clip(describe_fingerprint(mark))}")
        if key == "stragglers" and section.get("picture"):
            title, values = section["picture"]["figure"], {int(rank): value for rank, value in section["picture"]["ranks"].items()}
            printer.text(f"  {'':<14} {figure_sparkline(title, values, printer.stream.isatty())}")
    if item.get("autotune"):
        printer.text(f"  {'autotune':<14} {item['autotune']['summary']}")


"""``hvdlog first-failure``: the rank that failed first, why (one line), how sure, and who only went down with it."""

from __future__ import annotations

import textwrap
from typing import Any

import click

from hvdlog.analyses.failures import FailureReport, find_first_failure
from hvdlog.analyses.job import culprit_of, verdict_of
from hvdlog.analyses.stalls import find_stalls
from hvdlog.cli.analysis import nothing_found, read_with, size_option
from hvdlog.cli.options import Run, jobs_option, source_options
from hvdlog.cli.output import Printer, format_time
from hvdlog.cli.text import SHORT, clip, hanging
from hvdlog.query.spec import format_ranks

__all__ = ["first_failure"]


def _where(item: dict[str, Any]) -> str:
    """``rank 1 (node3) at 2026-…``; a missing host or time is left out, never printed as None.

    Files of a ``horovodrun --output-filename`` tree name no host, and their native lines
    carry no time of their own (their position in the file is their order). A line without
    a rank is "rank unknown", never "the launcher".
    """
    text = f"rank {item['rank']}" if item.get("rank") is not None else "rank unknown"
    if item.get("host"):
        text += f" ({item['host']})"
    when = format_time(item.get("@timestamp"))
    text += f" at {when}" if when != "-" else ""
    return text + (f", step {item['step']}" if item.get("step") is not None else "")


def _headline(report: FailureReport, culprit: dict[str, Any] | None) -> tuple[str, str]:
    if culprit is not None and culprit["by"] == "stall":  # a hang someone ended: the stalled rank, not the kill
        step = f" at step {culprit['step']}" if culprit.get("step") is not None else ""
        return (f"job {report.job}: rank {format_ranks(culprit['ranks'])} hung{step} (stalled since {format_time(culprit['at'])}); "
                "the job was then ended from outside"), "bold red"
    blamed = format_ranks([rank for rank in report.blamed_ranks if rank is not None]) or "unknown"
    if report.stall is not None:
        stall = report.stall
        what = "Horovod shut down on a stall" if stall.get("shutdown", True) else "the job ended in a stall"
        return (f"job {report.job}: {what} at {format_time(stall['@timestamp'])}: rank(s) {blamed} never "
                f"joined {', '.join(stall['tensors']) or 'the collective'} (reported by rank {stall['reported_by']})"), "bold red"
    if report.culprit is not None and report.primary:
        return f"job {report.job}: first failure on {_where(report.culprit)}", "bold red"
    if report.blamed_ranks:
        return f"job {report.job}: no error of its own in the logs; the evidence points to rank {blamed}", "bold red"
    return f"job {report.job}: {report.cause}", "yellow"


#: The answer's own lines (why, the cause) are wrapped here, never cut: this command is where they are read whole.
WIDTH = 120


def _wrapped(line: str) -> str:
    """A long line of the answer on several, each at most :data:`WIDTH` columns, the rest indented under it."""
    return "\n".join(textwrap.wrap(line, WIDTH, subsequent_indent="    ", break_on_hyphens=False)) or line


def _print(printer: Printer, report: FailureReport, culprit: dict[str, Any] | None) -> None:
    headline, style = _headline(report, culprit)
    printer.text(headline, style=style)
    if culprit is not None and culprit["by"] == "stall":
        printer.text(_wrapped(f"  why: {culprit['reasoning']} [{culprit['confidence']}]"))
        printer.text(_wrapped(f"  the failure evidence alone: {report.reasoning} [{report.confidence}]"), style="dim")
    else:
        printer.text(_wrapped(f"  why: {report.reasoning} [{report.confidence}]"))
    if report.culprit is not None or report.stall is not None or report.blamed_ranks:
        printer.text(_wrapped(f"  {report.cause}"))
    if report.stack_trace:
        for line in str(report.stack_trace).rstrip().splitlines():
            printer.text(f"    {line}", style="dim")
    if report.recovered:
        printer.text(f"  {report.recovered['text'] if isinstance(report.recovered, dict) else 'the job recovered'}", style="green")
    # the other ranks, one line each, their messages cut (--json has them whole); a launcher's lines each cut
    for item in report.other_errors:
        printer.text(f"  also failed: {_where(item)}: {clip(str(item.get('message')))}", style="red")
    for item in report.collateral:
        printer.text(f"  collateral: {_where(item)} ({item.get('reason')}): {clip(str(item.get('message')))}")
    for item in report.evidence:
        message = "\n".join(clip(line, 2 * SHORT) for line in str(item.get("message")).splitlines())
        printer.text(hanging("  launcher: ", message), style="dim")


@click.command("first-failure", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@size_option
@jobs_option
@source_options
def first_failure(run: Run, size: int | None, workers: int, **_: object) -> None:
    """Name the rank that failed first and why, with a confidence; ranks that went down after it are
    collateral, launcher lines are evidence about ranks (never the culprit).

    Exit 0 when a failure was found, 1 when none (one sentence on stderr says what was read), 2 on an error.
    """
    read_with(run, workers)
    reports = find_first_failure(lambda spec: run.documents(spec=spec), run.spec, size=size)
    # the job model's culprit: in a hang someone ended, the stalled rank (the stall episodes say which)
    episodes = find_stalls(lambda spec: run.documents(spec=spec), run.spec, size=size) if reports else []
    printer = Printer(as_json=run.as_json)
    for report in reports:
        found = report.to_json()
        culprit = culprit_of(found, [episode for episode in episodes if episode.job == report.job])
        if run.as_json:
            verdict = verdict_of({}, culprit, report.recovered, [])
            printer.json({**found, "job_culprit": culprit, "verdict": {key: verdict[key] for key in ("culprit", "step", "recovered")}})
        else:
            _print(printer, report, culprit)
    if not reports and not run.failures:
        nothing_found("no failure", run)
    run.exit(bool(reports))

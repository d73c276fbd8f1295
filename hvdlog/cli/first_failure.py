"""``hvdlog first-failure``: the earliest genuine error across ranks, and who died only as collateral."""

from __future__ import annotations

import click

from hvdlog.cli.options import Run, source_options
from hvdlog.cli.output import Printer, format_time
from hvdlog.query.failures import FAILURE_EVENTS, first_failure as analyse
from hvdlog.query.spec import format_ranks

__all__ = ["first_failure"]


@click.command("first-failure", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@source_options
def first_failure(run: Run, **_: object) -> None:
    """Name the rank that failed first and why; ranks that went down after it are collateral, launcher summaries are evidence.

    Exit 0 when a failure was found, 1 when none, 2 on an error.
    """
    reports = analyse(run.documents(any_of=FAILURE_EVENTS))
    printer = Printer(as_json=run.as_json)
    for report in reports:
        if run.as_json:
            printer.json(report.to_json())
            continue
        culprit = report.culprit
        blamed = format_ranks([rank for rank in report.blamed_ranks if rank is not None]) or "?"
        if report.stall is not None:
            stall = report.stall
            printer.text(
                f"job {report.job}: Horovod shut down on a stall at {format_time(stall['@timestamp'])}: "
                f"rank(s) {blamed} never joined {', '.join(stall['tensors']) or 'the collective'} "
                f"(reported by rank {stall['reported_by']})",
                style="bold red",
            )
        elif culprit is not None:
            who = f"rank {culprit['rank']}" if culprit["rank"] is not None else "the launcher (no rank)"
            who += f" ({culprit['host']})" if culprit["host"] else ""
            printer.text(f"job {report.job}: first failure on {who}{_at(culprit)}", style="bold red")
            printer.text(f"  {report.cause}")
            if report.stack_trace:
                for line in str(report.stack_trace).rstrip().splitlines():
                    printer.text(f"    {line}", style="dim")
        elif report.blamed_ranks:
            printer.text(f"job {report.job}: no error of its own in the logs; the evidence points to rank {blamed}", style="bold red")
            printer.text(f"  {report.cause}")
        else:
            printer.text(f"job {report.job}: {report.cause}", style="yellow")
        for item in report.other_errors:
            printer.text(f"  also failed: rank {item['rank']}{_at(item)}: {item['message']}", style="red")
        for item in report.collateral:
            printer.text(f"  collateral: rank {item['rank']}{_at(item)} ({item['reason']}): {item['message']}")
        for item in report.evidence:
            printer.text(f"  launcher: {item['message']}", style="dim")
    run.exit(bool(reports))


def _at(item: dict[str, object]) -> str:
    """`` at <time>``, or nothing for a line without a time (its position is its order)."""
    return f" at {format_time(item['@timestamp'])}" if item.get("@timestamp") else ""

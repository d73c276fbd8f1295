"""``hvdlog first-failure``: the earliest genuine error across ranks, and who died only as collateral."""

from __future__ import annotations

from typing import Any

import click

from hvdlog.cli.options import Run, source_options
from hvdlog.cli.output import Printer, format_time
from hvdlog.query.failures import FAILURE_EVENTS
from hvdlog.query.failures import first_failure as analyse
from hvdlog.query.spec import format_ranks

__all__ = ["first_failure"]


def _where(item: dict[str, Any]) -> str:
    """``rank 1 (node3) at 2026-…``; a missing host or time is left out, never printed as None.

    Files of a ``horovodrun --output-filename`` tree name no host, and their native lines
    carry no time of their own (their position in the file is their order).
    """
    text = f"rank {item['rank']}" if item.get("rank") is not None else "the launcher (no rank)"
    if item.get("host"):
        text += f" ({item['host']})"
    when = format_time(item.get("@timestamp"))
    return text + (f" at {when}" if when != "-" else "")


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
            who = _where(culprit) if culprit.get("rank") is not None else "the launcher (no rank)"
            printer.text(f"job {report.job}: first failure on {who}", style="bold red")
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
            printer.text(f"  also failed: {_where(item)}: {item.get('message')}", style="red")
        for item in report.collateral:
            printer.text(f"  collateral: {_where(item)} ({item.get('reason')}): {item.get('message')}")
        for item in report.evidence:
            printer.text(f"  launcher: {item.get('message')}", style="dim")
    run.exit(bool(reports))

"""``hvdlog stragglers``: per rank, last step, step rate and lag behind the median; outliers flagged."""

from __future__ import annotations

import click

from hvdlog.cli.options import Run, source_options
from hvdlog.cli.output import Printer
from hvdlog.query.stragglers import STEP_EVENTS
from hvdlog.query.stragglers import stragglers as analyse

__all__ = ["stragglers"]


def _num(value: float | None, fmt: str = "g") -> str:
    return "-" if value is None else format(value, fmt)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--min-lag", default=2, show_default=True, type=click.IntRange(min=1), help="Steps behind the median that flag a rank.")
@click.option("--tolerance", default=0.25, show_default=True, type=click.FloatRange(0, 1), help="Rate this far below the median flags a rank.")
@source_options
def stragglers(run: Run, min_lag: int, tolerance: float, **_: object) -> None:
    """Show each rank's progress and flag the ones behind.

    Exit 0 when a straggler was flagged, 1 when none, 2 on an error.
    """
    rows = analyse(run.documents(any_of=STEP_EVENTS), min_lag, tolerance)
    printer = Printer(as_json=run.as_json)
    if not run.as_json and rows:
        printer.text(f"{'job':<24} {'rank':>4} {'last step':>9} {'steps/s':>8} {'samples/s':>10} {'lag':>5}  flag")
    for row in rows:
        if run.as_json:
            printer.json(row.to_json())
            continue
        flag = "STRAGGLER: " + "; ".join(row.reasons) if row.outlier else ""
        printer.text(
            f"{str(row.job)[:24]:<24} {row.rank:>4} {_num(row.last_step):>9} {_num(row.steps_per_sec):>8} "
            f"{_num(row.samples_per_sec):>10} {_num(row.lag_steps):>5}  {flag}",
            style="bold red" if row.outlier else None,
        )
    run.exit(any(row.outlier for row in rows))

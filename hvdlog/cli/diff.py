"""``hvdlog diff``: what a bad run printed that a good run of the same script did not."""

from __future__ import annotations

from pathlib import Path

import click

from hvdlog.analyses.diff import Changed, diff, script_stem
from hvdlog.cli.options import EXIT_FOUND, EXIT_NOTHING, fail, warn
from hvdlog.cli.output import Printer, format_time
from hvdlog.documents import Document
from hvdlog.query.spec import Filter, format_ranks

__all__ = ["diff_command"]


def _read(where: str, es_url: str | None, index: str, timeout: float, es_ca: str | None) -> list[Document]:
    """Every event of a job: a directory or file, or (with --es) a job name."""
    from hvdlog.query.echoes import drop_echoes
    from hvdlog.query.source import SourceError

    if es_url:
        from hvdlog.query.es import ElasticsearchSource

        source = ElasticsearchSource(es_url, index=index, timeout=timeout, warn=warn, ca_certs=es_ca)
        try:
            return list(drop_echoes(source.search(Filter(jobs=(where,)))))
        except SourceError as exc:
            fail(f"{source.label}: {exc}")
    from hvdlog.query.files import FileSource

    try:
        return list(drop_echoes(FileSource([where], warn=warn).search(Filter())))
    except SourceError as exc:
        fail(f"{where}: {exc}")


def _choose_good(bad: str, es_url: str | None, index: str, timeout: float, es_ca: str | None) -> tuple[str, str]:
    """The newest finished job whose name shares BAD's script stem, under BAD's root (or in the cluster), and why."""
    from hvdlog.analyses.jobs import from_files

    name = bad if es_url else Path(bad).resolve().name
    stem = script_stem(name)
    if es_url:
        from hvdlog.cli.jobs import _from_es

        rows, where = _from_es(es_url, index, timeout, es_ca), "in the cluster"
    else:
        root = Path(bad).resolve().parent
        rows, where = from_files([str(root)], warn), f"under {root}"
    for row in rows:  # newest first
        if row.job != name and row.job and script_stem(row.job) == stem and row.status.get("state") == "finished":
            return (row.job if es_url else row.where), f"the newest finished job {where} whose name starts with {stem!r}"
    fail(f"no finished job {where} shares the script stem {stem!r} of {name}: name GOOD")


def _line(rank: int, item: Changed) -> str:
    what = ("NEW " if item.new else f"x{item.count / max(item.good_count, 1):.0f} ") + ("(first failure) " if item.first_failure else "")
    step = f"step {item.first_step}" if item.first_step is not None else "no step"
    ranks = f"ranks {format_ranks(item.ranks)}" if item.ranks else "rank unknown"
    return (f"{rank:>3}. {what} {item.count:>5} (good: {item.good_count})  {item.level.upper():<8} first {format_time(item.first)}, "
            f"{step}, {ranks}\n       {item.template}")


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("bad", metavar="BAD")
@click.argument("good", metavar="[GOOD]", required=False)
@click.option("--es", "es_url", metavar="URL", help="BAD and GOOD are job names in Elasticsearch at URL (credentials: HVDLOG_ES_* env).")
@click.option("--es-ca", type=click.Path(exists=True, dir_okay=False), envvar="HVDLOG_ES_CA", show_envvar=True, help="CA bundle (PEM) for HTTPS.")
@click.option("--index", default="logs-horovod.*-*", show_default=True, help="Index pattern on Elasticsearch.")
@click.option("--timeout", default=10.0, show_default=True, type=float, help="Seconds to wait for Elasticsearch.")
@click.option("-n", "--top", default=20, show_default=True, type=click.IntRange(min=1), help="Show the first N templates.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document: the jobs compared and every template, ranked.")
def diff_command(bad: str, good: str | None, es_url: str | None, es_ca: str | None, index: str, timeout: float, top: int,
                 as_json: bool) -> None:
    """Templates (lines up to numbers, paths, hosts) that are new in the BAD job, or much more frequent, than in GOOD.

    BAD and GOOD are job directories (or files), or job names with --es. GOOD defaults to the
    newest finished job under BAD's root (or in the cluster) whose name shares BAD's script stem
    (hvdlog's job ids are <script>-<date>-<id>); the output says which. Ranked by level, new
    before more frequent, then by first time. Exit 0 when something changed, 1 when nothing did, 2 on an error.
    """
    chosen = "given"
    for path in (bad, good) if not es_url else ():
        if path is not None and not Path(path).exists():
            fail(f"{path}: no such file or directory")
    if good is None:
        good, chosen = _choose_good(bad, es_url, index, timeout, es_ca)
    changed = diff(_read(bad, es_url, index, timeout, es_ca), _read(good, es_url, index, timeout, es_ca))
    printer = Printer(as_json=as_json)
    if as_json:
        printer.json({"bad": bad, "good": good, "good_chosen": chosen, "templates": [item.to_json() for item in changed]})
    else:
        printer.text(f"bad {bad} against good {good}" + ("" if chosen == "given" else f" ({chosen})"), style="bold")
        if not changed:
            printer.text("nothing new: every template of the bad run is in the good run at a similar rate")
        for rank, item in enumerate(changed[:top], 1):
            printer.text(_line(rank, item), style="red" if item.level in ("error", "critical") else None)
        if len(changed) > top:
            printer.text(f"... and {len(changed) - top} more (-n to show them)", style="dim")
    printer.flush()
    raise SystemExit(EXIT_FOUND if changed else EXIT_NOTHING)

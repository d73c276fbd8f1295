"""``hvdlog jobs``: every job under a root, or in the cluster, newest activity first."""

from __future__ import annotations

import click

from hvdlog.analyses.jobs import JobRow, from_aggregation, from_files, jobs_query
from hvdlog.cli.options import EXIT_ERROR, EXIT_FOUND, EXIT_NOTHING, Seconds, fail, roots_or_default, warn
from hvdlog.cli.output import Printer, format_time
from hvdlog.cli.text import clip
from hvdlog.query.spec import format_ranks

__all__ = ["jobs"]

#: A status's reason is cut here in the table (a hang's or a recovery's reason fits; an exception's message may not).
REASON = 140


def _size(value: int | None) -> str:
    if value is None:
        return "unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value} B"


def _from_es(url: str, index: str, timeout: float, es_ca: str | None) -> list[JobRow]:
    from dataclasses import replace

    from hvdlog.analyses.jobs import NEEDED, status_documents
    from hvdlog.analyses.last_words import find_last_words
    from hvdlog.query.es import ElasticsearchSource
    from hvdlog.query.source import SourceError
    from hvdlog.query.spec import Filter

    source = ElasticsearchSource(url, index=index, timeout=timeout, warn=warn, ca_certs=es_ca)
    try:
        es = source._client()
        with source._errors("aggregating jobs in"):
            response = es.search(index=index, size=0, aggs=jobs_query(), ignore_unavailable=True)
        return from_aggregation(
            dict(response), lambda job: status_documents(source.search, replace(NEEDED, jobs=(job,))),
            source.label, words_of=lambda docs: find_last_words(source.search, docs, Filter()),
        )
    except SourceError as exc:
        fail(f"{source.label}: {exc}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("roots", nargs=-1, metavar="[ROOT]...")
@click.option("--es", "es_url", metavar="URL", help="List the jobs in Elasticsearch at URL instead (credentials: HVDLOG_ES_* env).")
@click.option("--es-ca", type=click.Path(exists=True, dir_okay=False), envvar="HVDLOG_ES_CA", show_envvar=True, help="CA bundle (PEM) for HTTPS.")
@click.option("--index", default="logs-horovod.*-*", show_default=True, help="Index pattern on Elasticsearch.")
@click.option("--timeout", default=10.0, show_default=True, type=Seconds(), help="Seconds to wait for Elasticsearch.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document per job.")
def jobs(roots: tuple[str, ...], es_url: str | None, es_ca: str | None, index: str, timeout: float, as_json: bool) -> None:
    """Every job under ROOT (default ./hvdlog-logs) or in the cluster: ranks, hosts, first and last time, size, status.

    Newest activity first. The status is the job model's (running / hung / finished / failed /
    recovered / unknown) with how sure and why, the same as `hvdlog report`'s, which tells
    the whole story of one job. Exit 0 when a job was found, 1 when none, 2 on an error.
    """
    if es_url:
        rows = _from_es(es_url, index, timeout, es_ca)
    else:
        roots = roots_or_default(roots)
        warned: list[str] = []

        def say(message: str) -> None:  # an unreadable path, a FIFO: named, and the exit status says so
            warned.append(message)
            warn(message)

        rows = from_files(roots, say)
        if warned:
            _print(rows, as_json)
            raise SystemExit(EXIT_ERROR)
    _print(rows, as_json)
    raise SystemExit(EXIT_FOUND if rows else EXIT_NOTHING)


def _print(rows: list[JobRow], as_json: bool) -> None:
    printer = Printer(as_json=as_json)
    if rows and not as_json:
        printer.text(f"{'job':<28} {'ranks':>5} {'hosts':<16} {'first':<24} {'last':<24} {'size':>9}  status")
    for row in rows:
        if as_json:
            printer.json(row.to_json())
            continue
        hosts = ",".join(row.hosts[:2]) + (f"+{len(row.hosts) - 2}" if len(row.hosts) > 2 else "") or "-"
        state = f"{row.status['state']} ({row.status['confidence']})"
        printer.text(
            f"{str(row.job)[:28]:<28} {len(row.ranks):>5} {hosts[:16]:<16} {format_time(row.first):<24} {format_time(row.last):<24} "
            f"{_size(row.size_bytes):>9}  {state}: {clip(row.status['reasoning'], REASON)}",  # report and --json: the whole reason
            style={"failed": "bold red", "running": "cyan"}.get(row.status["state"]),
        )
        if len(row.ranks) and not as_json and format_ranks(row.ranks) != f"0-{len(row.ranks) - 1}":
            printer.text(f"{'':<28} ranks {format_ranks(row.ranks)}")

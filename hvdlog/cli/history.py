"""``hvdlog history``: across every job, recurring failures, suspect hosts, and advice for the newest failure."""

from __future__ import annotations

import click

from hvdlog.analyses.fingerprint import describe_fingerprint
from hvdlog.analyses.history import History, JobRecord, analyse
from hvdlog.cli.options import EXIT_FOUND, EXIT_NOTHING, fail, roots_or_default, warn
from hvdlog.cli.output import Printer, format_time
from hvdlog.query.spec import FilterError, parse_time

__all__ = ["history", "read_records"]


def read_records(roots: tuple[str, ...], es_url: str | None, es_ca: str | None, index: str, timeout: float,
                 since: str | None) -> list[JobRecord]:
    """The jobs' records from the roots (default ./hvdlog-logs) or Elasticsearch; one sentence and exit 2 on an error."""
    from hvdlog.analyses.history_read import from_elasticsearch, from_roots
    from hvdlog.query.source import SourceError

    try:
        cut = parse_time(since) if since else None
    except FilterError as exc:
        raise click.UsageError(str(exc)) from None
    if es_url:
        from hvdlog.query.es import ElasticsearchSource

        source = ElasticsearchSource(es_url, index=index, timeout=timeout, warn=warn, ca_certs=es_ca)
        try:
            return from_elasticsearch(source, cut)
        except SourceError as exc:
            fail(f"{source.label}: {exc}")
    roots = roots_or_default(roots)
    return from_roots(roots, warn, cut)


def _percent(confidence: float) -> str:
    return ">99.99%" if confidence > 0.9999 else f"{confidence:.2%}"


def _print(printer: Printer, found: History) -> None:
    printer.text(f"{found.jobs} jobs, {found.failed} failed")
    printer.text(f"recurring failures: {len(found.recurring)}", style="bold")
    for entry in found.recurring:
        mark = entry["fingerprint"]
        printer.text(f"  {entry['count']} jobs  {mark['id']}  {describe_fingerprint(mark)}", style="red")
        printer.text(f"    hosts {', '.join(entry['hosts']) or 'unknown'}; first {format_time(entry['first_seen'])}, "
                     f"last {format_time(entry['last_seen'])}; jobs {', '.join(entry['jobs'])}")
    printer.text(f"one-off failures: {len(found.one_off)}", style="bold")
    for entry in found.one_off:
        host = f" on {entry['hosts'][0]}" if entry["hosts"] else ""
        printer.text(f"  {entry['jobs'][0]}{host}  {entry['fingerprint']['id']}  {describe_fingerprint(entry['fingerprint'])}")
    printer.text(f"suspect hosts: {len(found.suspect_hosts)}", style="bold")
    for entry in found.suspect_hosts:
        printer.text(f"  {entry['host']}: the culprit's host in {entry['culprit_in']} of {entry['tested_jobs']} failed jobs tested "
                     f"({entry['failed_jobs_on_host']} failed jobs ran on it; {entry['expected']} expected from its share of ranks); "
                     f"p = {entry['corrected_p']:.2g} corrected, confidence {_percent(entry['confidence'])}", style="red")
    printer.text(f"  rule: {found.rule}", style="dim")
    if found.advice is not None:
        printer.text(f"advice for the newest failed job, {found.advice['job']}: {found.advice['action']}", style="bold")
        for line in found.advice["evidence"]:
            printer.text(f"  - {line}")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("roots", nargs=-1, metavar="[ROOT]...")
@click.option("--es", "es_url", metavar="URL", help="Read every job in Elasticsearch at URL instead (credentials: HVDLOG_ES_* env).")
@click.option("--es-ca", type=click.Path(exists=True, dir_okay=False), envvar="HVDLOG_ES_CA", show_envvar=True, help="CA bundle (PEM) for HTTPS.")
@click.option("--index", default="logs-horovod.*-*", show_default=True, help="Index pattern on Elasticsearch.")
@click.option("--timeout", default=10.0, show_default=True, type=float, help="Seconds to wait for Elasticsearch.")
@click.option("--since", metavar="T", help="Only jobs active at or after T (ISO 8601, or an age like 7d).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document with every answer.")
def history(roots: tuple[str, ...], es_url: str | None, es_ca: str | None, index: str, timeout: float, since: str | None,
            as_json: bool) -> None:
    """Across every job under ROOT (default ./hvdlog-logs) or in Elasticsearch: recurring failures (by fingerprint),
    suspect hosts (a stated test, with a confidence), and retry / stop / drain advice for the newest failed job.

    Exit 0 when a job was found, 1 when none, 2 on an error.
    """
    records = read_records(roots, es_url, es_ca, index, timeout, since)
    found = analyse(records)
    printer = Printer(as_json=as_json)
    if as_json:
        printer.json(found.to_json())
    elif records:
        _print(printer, found)
    printer.flush()
    raise SystemExit(EXIT_FOUND if records else EXIT_NOTHING)

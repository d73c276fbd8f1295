"""``hvdlog import PATH... --es URL``: a job's files, or a whole root, into Elasticsearch.

The documents are those ``hvdlog parse`` writes (the ones Logstash makes for the same
lines), in the data streams Logstash writes to, so every ``--es`` command then gives the
answers it gives over the files. For logs copied off a cluster, and to try ``--es`` without
the Docker stack. Safe to re-run: a second import of the same files adds nothing.

Exit codes: 0 every document is in Elasticsearch (indexed now or already there), 1 the
paths held no document, 2 an error (no templates, unreachable, documents rejected).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from hvdlog.cli.common import time_zone, warn
from hvdlog.elastic import templates

if TYPE_CHECKING:
    from hvdlog.elastic.importer import ImportTotals

__all__ = ["import_command"]


@click.command("import", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--es", "es_url", required=True, envvar="HVDLOG_ES_URL", show_envvar=True, metavar="URL",
              help="Elasticsearch URL, e.g. https://es:9200 (credentials: HVDLOG_ES_* env).")
@click.option("--es-ca", type=click.Path(exists=True, dir_okay=False), envvar="HVDLOG_ES_CA", show_envvar=True,
              help="CA bundle (PEM) for HTTPS to Elasticsearch (the stack's ca.crt).")
@click.option("--namespace", default=templates.DEFAULT_NAMESPACE, envvar="HVDLOG_NAMESPACE", show_envvar=True, show_default=True,
              help="Data stream namespace: logs-horovod.<source>-<namespace>.")
@click.option("--tz", "timezone", default=None, metavar="ZONE", callback=time_zone,
              help="IANA zone of the nodes' clocks, for Horovod's zone-less times [default: this machine's zone].")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), help="Seconds to wait for each bulk request.")
def import_command(paths: tuple[str, ...], es_url: str, es_ca: str | None, namespace: str, timezone: str | None, timeout: float) -> None:
    """Put the events of PATH (files, a job's directory, a whole root) into Elasticsearch."""
    import sys

    from hvdlog.cli.options import fail
    from hvdlog.cli.parse import _inputs, _Reading
    from hvdlog.elastic.connection import Credentials, ElasticsearchError, connect, errors, mask_credentials
    from hvdlog.elastic.importer import import_documents, templates_missing
    from hvdlog.elastic.install import ElasticsearchInstaller, SetupError

    try:
        templates.validate_namespace(namespace)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--namespace") from None
    problems: list[str] = []

    def problem(message: str) -> None:
        problems.append(message)
        warn(message)

    files = _inputs(paths, problem)
    shown = mask_credentials(es_url)
    try:
        client = connect(es_url, Credentials.from_env(), ca_certs=es_ca, timeout=timeout, retries=2, warn=warn)
        with client:
            ElasticsearchInstaller(client, es_url).version()
            with errors(es_url, "looking for hvdlog's index template"):
                missing = templates_missing(client)
            if missing:
                fail(f"Elasticsearch at {shown} has no hvdlog templates: run `hvdlog install --es {shown}` first")
            reading = _Reading(files)
            tick = (lambda _totals: reading.show()) if reading.progress.active else None
            with errors(es_url, "writing documents"):
                totals = import_documents(client, reading.documents(timezone=timezone, chatter="keep", size=None), namespace, tick)
                client.indices.refresh(index=f"logs-horovod.*-{namespace}", ignore_unavailable=True)
            reading.progress.end()
    except (ElasticsearchError, SetupError) as exc:
        fail(str(exc))
    click.echo(_summary(totals, len(files), shown, namespace), err=True)
    if totals.rejected:
        fail(f"{totals.rejected} documents were rejected; the first: {totals.first_rejection}")
    sys.exit(2 if problems else 0 if totals.read else 1)


def _summary(totals: ImportTotals, files: int, url: str, namespace: str) -> str:
    """``hvdlog import: 117 documents from 12 files into ...: 117 indexed, 0 already there, 0 rejected``."""
    return (
        f"hvdlog import: {totals.read} documents from {files} files into logs-horovod.*-{namespace} at {url}: "
        f"{totals.indexed} indexed, {totals.already_there} already there, {totals.rejected} rejected"
    )

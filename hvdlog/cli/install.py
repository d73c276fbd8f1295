"""``hvdlog install``: install templates, ILM, data streams and Kibana objects; safe to re-run.

Progress goes to stderr, one line per object (created / updated / unchanged / skipped).
Exit codes: 0 done (a skipped step, such as ILM on a cluster without it, is a warning),
2 an error the message explains (unreachable, 401/403, not version 8, bad option).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from hvdlog.cli.text import sentence
from hvdlog.elastic import templates

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["install"]



def _env(name: str) -> dict[str, Any]:
    """Every option of this command also reads ``HVDLOG_<NAME>`` (shown in --help)."""
    return {"envvar": f"HVDLOG_{name}", "show_envvar": True}

_MARKS = {"created": ("+", "green"), "updated": ("~", "yellow"), "unchanged": ("=", "dim"), "skipped": ("!", "yellow")}


def _warner(console: Console) -> Callable[[str], None]:
    """Warnings of the connection modules, printed like the progress lines."""
    from rich.markup import escape

    return lambda text: console.print(f"[yellow]hvdlog: warning:[/yellow] {escape(sentence(text))}", soft_wrap=True)


def _check_password(username: str | None, password: str | None, service: str) -> None:
    """A basic-auth user's password follows the setup service's rules (no empty, well-known or short one)."""
    from hvdlog.elastic.install import password_problem

    if username and (problem := password_problem(f"the password of {service} user {username!r}", password)):
        raise click.UsageError(f"{problem} (the rule of the compose setup service too; an API key avoids it).")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--es", "es_url", required=True, **_env("ES_URL"), help="Elasticsearch URL, e.g. https://es:9200.")
@click.option("--kibana", "kibana_url", **_env("KIBANA_URL"), help="Kibana URL; without it the Kibana objects are not imported.")
@click.option(
    "--namespace", default=templates.DEFAULT_NAMESPACE, **_env("NAMESPACE"), show_default=True,
    help="Data stream namespace: logs-horovod.<source>-<namespace>.",
)
@click.option(
    "--replicas", type=click.IntRange(min=0), default=templates.DEFAULT_REPLICAS, **_env("REPLICAS"), show_default=True,
    help="Replicas per shard (0 on a single node).",
)
@click.option(
    "--retention-days", type=click.IntRange(min=1), default=templates.DEFAULT_RETENTION_DAYS, **_env("RETENTION_DAYS"), show_default=True,
    help="ILM deletes data this many days after rollover.",
)
@click.option("--es-username", **_env("ES_USERNAME"), help="Basic-auth user for Elasticsearch.")
@click.option("--es-password", **_env("ES_PASSWORD"), help="Its password (prefer the variable: flags show in `ps`).")
@click.option("--es-api-key", **_env("ES_API_KEY"), help="Encoded API key for Elasticsearch, instead of a user.")
@click.option("--kibana-username", **_env("KIBANA_USERNAME"), help="Kibana user (default: the Elasticsearch one).")
@click.option("--kibana-password", **_env("KIBANA_PASSWORD"), help="Its password.")
@click.option("--kibana-api-key", **_env("KIBANA_API_KEY"), help="Encoded API key for Kibana.")
@click.option("--es-ca", type=click.Path(exists=True, dir_okay=False), **_env("ES_CA"), help="CA bundle (PEM) for HTTPS to Elasticsearch.")
@click.option("--kibana-ca", type=click.Path(exists=True, dir_okay=False), **_env("KIBANA_CA"), help="CA bundle for Kibana (default: --es-ca).")
@click.option(
    "--kibana-timeout", type=click.FloatRange(min=0), default=300.0, show_default=True, **_env("KIBANA_TIMEOUT"),
    help="Seconds to wait for Kibana to be available (30 s of 'connection refused' ends the wait sooner).",
)
def install(
    es_url: str,
    kibana_url: str | None,
    namespace: str,
    replicas: int,
    retention_days: int,
    es_username: str | None,
    es_password: str | None,
    es_api_key: str | None,
    kibana_username: str | None,
    kibana_password: str | None,
    kibana_api_key: str | None,
    es_ca: str | None,
    kibana_ca: str | None,
    kibana_timeout: float,
) -> None:
    """Install hvdlog's Elasticsearch templates, ILM policy and data streams, and its Kibana objects."""
    from rich.console import Console
    from rich.markup import escape

    from hvdlog.elastic.install import SetupError

    try:
        templates.validate_namespace(namespace)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--namespace") from exc
    _check_password(es_username, es_password, "Elasticsearch")
    if not (kibana_username or kibana_api_key):
        kibana_username, kibana_password, kibana_api_key = es_username, es_password, es_api_key
    _check_password(kibana_username, kibana_password, "Kibana")

    console = Console(stderr=True, highlight=False)
    try:
        counts = _install_elasticsearch(console, es_url, namespace, replicas, retention_days, es_username, es_password, es_api_key, es_ca)
        if kibana_url:
            _import_kibana(console, kibana_url, kibana_username, kibana_password, kibana_api_key, kibana_ca or es_ca, kibana_timeout)
    except SetupError as exc:
        console.print(f"[red]hvdlog: error:[/red] {escape(sentence(str(exc)))}", soft_wrap=True)
        raise SystemExit(2) from None
    summary = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
    console.print(f"[bold]done[/bold]: {summary}" + ("" if kibana_url else " (no --kibana: Kibana objects not imported)"), soft_wrap=True)


def _install_elasticsearch(
    console: Console, url: str, namespace: str, replicas: int, retention_days: int,
    username: str | None, password: str | None, api_key: str | None, ca_certs: str | None,
) -> dict[str, int]:
    """Run the installer, printing one line per step; return the count per outcome."""
    from rich.markup import escape

    from hvdlog.elastic.connection import Credentials, ElasticsearchError, connect
    from hvdlog.elastic.install import ElasticsearchInstaller, SetupError

    credentials = Credentials(username, password, api_key)
    try:
        client = connect(url, credentials, ca_certs=ca_certs, timeout=30, retries=1, warn=_warner(console))
    except ElasticsearchError as exc:
        raise SetupError(str(exc)) from None
    counts = dict.fromkeys(_MARKS, 0)
    try:
        installer = ElasticsearchInstaller(client, url)
        console.print(f"Elasticsearch {installer.version()} at {escape(installer.url)}", soft_wrap=True)
        for step in installer.install(namespace, replicas, retention_days):
            mark, colour = _MARKS[step.outcome]
            note = f" - {escape(step.note)}" if step.note else ""
            console.print(f"  [{colour}]{mark} {step.what}: {step.outcome}[/{colour}]{note}", soft_wrap=True)
            counts[step.outcome] += 1
    finally:
        client.close()
    return counts


def _import_kibana(
    console: Console, url: str, username: str | None, password: str | None, api_key: str | None,
    ca_certs: str | None, timeout: float,
) -> None:
    """Wait for Kibana, then import the committed saved objects."""
    from rich.markup import escape

    from hvdlog.elastic import kibana
    from hvdlog.elastic.connection import mask_credentials
    from hvdlog.elastic.kibana_api import KibanaClient

    shown = mask_credentials(url)
    client = KibanaClient(
        url, username=username, password=password, api_key=api_key, ca_certs=ca_certs,
        warn=_warner(console),
    )
    console.print(f"waiting for Kibana at {escape(shown)} to be available (up to {timeout:g} s)", soft_wrap=True)
    started = last_line = time.monotonic()
    with console.status(f"waiting for Kibana at {escape(shown)}") as status:

        def progress(last: str) -> None:
            nonlocal last_line
            status.update(f"waiting for Kibana at {escape(shown)} ({escape(last)})")
            # Off a terminal (compose logs, CI) the spinner is invisible: a line every 10 s instead.
            if not console.is_terminal and time.monotonic() - last_line >= 10:
                last_line = time.monotonic()
                console.print(f"  still waiting for Kibana ({time.monotonic() - started:.0f} s): {escape(last)}", soft_wrap=True)

        version = client.wait_available(timeout, progress)
    target = client.target  # the shape this Kibana imports, picked by its version
    shape = f"saved objects {target.file} (the shape for {target.imports_into})"
    console.print(f"Kibana {escape(version)} at {escape(shown)}: {escape(shape)}", soft_wrap=True)
    count = client.import_objects(kibana.to_ndjson(target), filename=target.file.rsplit("/", 1)[-1])
    console.print(f"  [green]+ {count} saved objects imported[/green] (overwritten in place by id: data view, searches, charts, dashboard)", soft_wrap=True)
    from hvdlog.elastic.rules import install_rules

    for name, outcome in install_rules(client):
        mark, colour = _MARKS[outcome]
        console.print(f"  [{colour}]{mark} alerting rule {escape(name)}: {outcome}[/{colour}] (no connector: add yours in Kibana)", soft_wrap=True)

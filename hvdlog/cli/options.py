"""Source and filter options shared by grep, stalls, stragglers and first-failure.

Every command takes the same way in: PATH arguments (files, directories,
``--output-filename`` trees) and/or ``--es URL``, plus the same filters, so a question asked
of a laptop's files and of the cluster's Elasticsearch is spelled the same way.
Exit codes follow grep: 0 found, 1 nothing found, 2 error (bad input, or a source failed —
results of the sources that worked are still printed).
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

from hvdlog.cli.common import time_zone, warn
from hvdlog.cli.text import sentence
from hvdlog.documents import Document
from hvdlog.query.es import DEFAULT_INDEX, ElasticsearchSource
from hvdlog.query.source import Source, SourceError, merged
from hvdlog.query.spec import Condition, Filter, FilterError, parse_ranks, parse_steps, parse_time

__all__ = ["EXIT_ERROR", "EXIT_FOUND", "EXIT_NOTHING", "Run", "Seconds", "fail", "source_options", "split_pattern", "time_zone", "warn"]

EXIT_FOUND, EXIT_NOTHING, EXIT_ERROR = 0, 1, 2


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic in the stubs only
    """A finite number of seconds, positive (or zero when ``zero`` is allowed): ``--window nan``
    or ``--interval -1`` exits 2 with one sentence instead of a Python exception later."""

    name = "seconds"

    def __init__(self, zero: bool = False) -> None:
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not self.zero):
            self.fail(f"{value!r} is not a {'' if self.zero else 'positive '}finite number of seconds", param, ctx)
        return seconds


def fail(message: str) -> NoReturn:
    """Print one sentence on stderr and exit 2."""
    click.echo(f"hvdlog: error: {sentence(message)}", err=True)
    sys.exit(EXIT_ERROR)


@dataclass
class Run:
    """What the shared options resolved to: the sources and the base filter."""

    sources: list[Source]
    spec: Filter
    as_json: bool
    failures: list[str] = field(default_factory=list)

    def documents(self, *, spec: Filter | None = None, any_of: tuple[Condition, ...] = ()) -> Iterator[Document]:
        """Merged, sorted matches of every source; failing sources are warned about and recorded."""
        wanted = spec or self.spec
        if any_of:
            wanted = _with(wanted, any_of=any_of)
        return merged(self.sources, wanted, self.failures, warn)

    def exit(self, found: bool) -> NoReturn:
        """grep's exit code: 2 if any source failed, else 0 when something was found, else 1."""
        if self.failures and len(self.failures) >= len(self.sources):
            click.echo("hvdlog: error: no source could be read", err=True)
        partial = any(getattr(source, "errors", None) for source in self.sources)
        sys.exit(EXIT_ERROR if self.failures or partial else EXIT_FOUND if found else EXIT_NOTHING)


def _with(spec: Filter, **changes: Any) -> Filter:
    from dataclasses import replace

    return replace(spec, **changes)


def build_sources(
    paths: Sequence[str], es_urls: Sequence[str], index: str, timeout: float, tz: str | None, es_ca: str | None = None
) -> list[Source]:
    """One file source for all PATHs, one Elasticsearch source per ``--es``."""
    sources: list[Source] = []
    if paths:
        from hvdlog.query.files import FileSource

        sources.append(FileSource(paths, timezone=tz, warn=warn))
    for url in es_urls:
        sources.append(ElasticsearchSource(url, index=index, timeout=timeout, warn=warn, ca_certs=es_ca))
    if not sources:
        fail("nothing to read: give log files or directories, or --es URL")
    return sources


def build_filter(options: dict[str, Any], **extra: Any) -> Filter:
    """The Filter from the shared options (bad values exit 2 with the reason)."""
    try:
        return Filter(
            ranks=parse_ranks(options["rank"]) if options.get("rank") else None,
            jobs=tuple(options.get("job") or ()),
            hosts=tuple(options.get("host") or ()),
            datasets=tuple(options.get("dataset") or ()),
            since=parse_time(options["since"]) if options.get("since") else None,
            until=parse_time(options["until"]) if options.get("until") else None,
            min_level=options.get("level"),
            steps=parse_steps(options["step"]) if options.get("step") else None,
            **extra,
        )
    except FilterError as exc:
        fail(str(exc))


def split_pattern(args: Sequence[str], explicit: str | None, has_other_source: bool) -> tuple[str | None, tuple[str, ...]]:
    """grep's positional rule: what a plain word means never depends on the current directory.

    With ``-e PATTERN`` every argument is a PATH. A single argument with nothing else to read
    (no ``--es``) is the PATH (``hvdlog grep RUNS/``). Otherwise the first argument is the
    PATTERN, unless it is written as a path, with a ``/`` (``runs/job1``, ``./NCCL``), and
    exists. So a file named ``NCCL`` in the current directory never turns
    ``hvdlog grep NCCL runs/`` into a search of that file.
    """
    if explicit is not None or not args:
        return explicit or None, tuple(args)
    if len(args) == 1 and not has_other_source:
        return None, tuple(args)
    first = args[0]
    if (os.sep in first or first in (".", "..")) and os.path.exists(first):
        return None, tuple(args)
    return first or None, tuple(args[1:])


def source_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options; the command receives ``run: Run`` plus its own options."""

    @click.option("--rank", metavar="RANKS", help="Only these ranks, e.g. 0,3,8-15.")
    @click.option("--job", multiple=True, metavar="J", help="Only this job id (repeatable).")
    @click.option("--host", multiple=True, metavar="H", help="Only this host (repeatable).")
    @click.option("--since", metavar="T", help="Only events at or after T (ISO 8601, or an age like 2h).")
    @click.option("--until", metavar="T", help="Only events at or before T (ISO 8601, or an age like 10m).")
    @click.option("--es", "es_urls", multiple=True, metavar="URL", help="Read from Elasticsearch at URL (credentials: HVDLOG_ES_* env).")
    @click.option(
        "--es-ca", type=click.Path(exists=True, dir_okay=False), envvar="HVDLOG_ES_CA", show_envvar=True,
        help="CA bundle (PEM) for HTTPS to Elasticsearch (the stack's ca.crt).",
    )
    @click.option("--index", default=DEFAULT_INDEX, show_default=True, help="Index pattern on Elasticsearch.")
    @click.option("--timeout", default=10.0, show_default=True, type=Seconds(), help="Seconds to wait for Elasticsearch.")
    @click.option(
        "--tz", default=None, metavar="ZONE", callback=time_zone,
        help="IANA zone of the nodes' clocks, for Horovod's zone-less times [default: this machine's zone].",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print JSON documents, one per line.")
    @functools.wraps(command)
    def wrapper(**options: Any) -> Any:
        if "args" in options:  # grep: [PATTERN] [PATH...]
            options["pattern"], options["paths"] = split_pattern(options.pop("args"), options.get("pattern"), bool(options["es_urls"]))
        paths = options.pop("paths", ())
        run = Run(
            build_sources(
                paths, options.pop("es_urls"), options.pop("index"), options.pop("timeout"), options.pop("tz"), options.pop("es_ca")
            ),
            build_filter(options),
            options.pop("as_json"),
        )
        for name in ("rank", "job", "host", "since", "until"):
            options.pop(name, None)
        try:
            return command(run=run, **options)
        except SourceError as exc:
            fail(str(exc))

    return wrapper

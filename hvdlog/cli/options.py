"""Source and filter options shared by grep, stalls, stragglers and first-failure.

Every command takes the same way in: PATH arguments (files, directories,
``--output-filename`` trees) and/or ``--es URL``, plus the same filters, so a question asked
of a laptop's files and of the cluster's Elasticsearch is spelled the same way.
Exit codes follow grep: 0 found, 1 nothing found, 2 error (bad input, or a source failed —
results of the sources that worked are still printed).
"""

from __future__ import annotations

import functools
import heapq
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import click

from hvdlog.cli.common import time_zone, warn
from hvdlog.cli.output import show_local_time
from hvdlog.cli.text import sentence
from hvdlog.documents import Document, get_field, sort_key
from hvdlog.layout import DEFAULT_ROOT
from hvdlog.query.es import DEFAULT_INDEX, ElasticsearchSource
from hvdlog.query.source import Source, SourceError, failure_text, merged
from hvdlog.query.spec import Condition, Filter, FilterError, parse_ranks, parse_steps, parse_time

__all__ = [
    "EXIT_ERROR", "EXIT_FOUND", "EXIT_NOTHING", "Run", "Seconds", "fail", "jobs_option", "source_options", "split_pattern", "time_zone", "warn",
]

EXIT_FOUND, EXIT_NOTHING, EXIT_ERROR = 0, 1, 2


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic in the stubs only
    """A finite number of seconds, positive (or zero when ``zero`` is allowed): ``--window nan``
    or ``--interval -1`` exits 2 with one sentence instead of a Python exception later."""

    name = "seconds"

    def __init__(self, zero: bool = False, minimum: float = 0.0) -> None:
        self.zero = zero
        #: The least a value may be (a poll interval of 0.05 s, not 1e-300: a loop that spins).
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not self.zero):
            self.fail(f"{value!r} is not a {'' if self.zero else 'positive '}finite number of seconds", param, ctx)
        if seconds < self.minimum:
            self.fail(f"{value!r} is less than {self.minimum:g} s", param, ctx)
        return seconds


def fail(message: str) -> NoReturn:
    """Print one sentence on stderr and exit 2."""
    click.echo(f"hvdlog: error: {sentence(message)}", err=True)
    sys.exit(EXIT_ERROR)


def roots_or_default(roots: tuple[str, ...]) -> tuple[str, ...]:
    """The roots a whole-root command reads: those given, else ``./hvdlog-logs``; a missing one
    (or no default where it is run) is one sentence and exit 2."""
    if not roots:
        if not Path(DEFAULT_ROOT).is_dir():
            fail(f"give a root, or run where {DEFAULT_ROOT}/ is")
        roots = (DEFAULT_ROOT,)
    missing = [root for root in roots if not Path(root).exists()]
    if missing:
        fail(f"{missing[0]}: no such file or directory")
    return roots


def _identity(doc: Document) -> tuple[Any, ...]:
    """What makes two documents the same event, whichever source holds it (paths differ between nodes)."""
    return tuple(repr(get_field(doc, name)) for name in ("@timestamp", "job", "rank", "host.name", "event.dataset", "message"))


def _tagged(index: int, docs: Iterator[Document]) -> Iterator[tuple[tuple[int, int], int, Document]]:
    """(sort key, source index, document): the index bound now, not when the generator runs."""
    return ((sort_key(doc), index, doc) for doc in docs)


def _distinct(sources: Sequence[Source], spec: Filter, failures: list[str]) -> Iterator[Document]:
    """The sources merged in time order, an event that two sources hold printed once (files and ``--es``
    over the same job); copies within one source are kept, they are the source's own."""
    streams = [_tagged(index, merged([source], spec, failures, warn)) for index, source in enumerate(sources)]
    current: Any = None
    seen: dict[tuple[Any, ...], int] = {}
    for key, index, doc in heapq.merge(*streams, key=lambda item: item[0]):
        if key != current:
            current, seen = key, {}
        identity = _identity(doc)
        if seen.setdefault(identity, index) != index:
            continue
        yield doc


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
        if len(self.sources) == 1:
            return merged(self.sources, wanted, self.failures, warn)
        return _distinct(self.sources, wanted, self.failures)


    def file_paths(self) -> list[str]:
        """The paths the file sources read (what sits beside the events, e.g. an autotune log, is found there)."""
        from hvdlog.query.files import FileSource

        return [str(path) for source in self.sources if isinstance(source, FileSource) for path in source.paths]

    def with_any_of(self, any_of: tuple[Condition, ...]) -> Filter:
        """The run's filter, asking only for documents meeting one of ``any_of``."""
        return _with(self.spec, any_of=any_of)

    def guarded(self, source: Source, read: Callable[[], None]) -> None:
        """Run one source's read; a source that fails is warned about and recorded, as in :meth:`documents`."""
        try:
            read()
        except SourceError as exc:
            self.failures.append(f"{source.label}: {exc}")
            warn(failure_text(source.label, exc))

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
        from hvdlog.query.progress_files import ProgressFileSource

        sources.append(ProgressFileSource(paths, timezone=tz, warn=warn))
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


def _workers(ctx: click.Context, param: click.Parameter, value: int | None) -> int:
    return value if value is not None else max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def jobs_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``-j/--jobs N``: processes reading the ranks' files in parallel; the command receives ``workers``."""
    return click.option(
        "-j", "--jobs", "workers", type=click.IntRange(min=1), default=None, callback=_workers, metavar="N",
        help="Read the ranks' files in N processes (same output as -j 1)  [default: all cores].",
    )(command)


def _default_root(options: dict[str, Any]) -> tuple[str, ...]:
    """No PATH and no ``--es``: ``./hvdlog-logs`` when it exists, else one sentence (exit 2)."""
    if options["es_urls"]:
        return ()
    if Path(DEFAULT_ROOT).is_dir():
        return (DEFAULT_ROOT,)
    if options.get("pattern"):
        fail(f"give a path, or run where {DEFAULT_ROOT}/ is (the pattern {options['pattern']!r} is searched in them)")
    fail(f"give a path, or run where {DEFAULT_ROOT}/ is")


def check_paths(paths: Sequence[str], pattern: str | None) -> None:
    """A PATH that does not exist and looks like a pattern (spaces, no '/') was most likely meant as one."""
    existing = [shlex.quote(path) for path in paths if os.path.exists(path)]
    for path in paths:
        if not os.path.exists(path) and os.sep not in path:
            where = " ".join(existing) or (DEFAULT_ROOT if Path(DEFAULT_ROOT).is_dir() else "PATH")
            suggestion = f"hvdlog grep -e {shlex.quote(path)} {where}" if pattern is None else f"hvdlog grep -e {shlex.quote(pattern + ' ' + path)} {where}"
            fail(f"{path}: no such file or directory; did you mean `{suggestion}`?")


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
    @click.option("--utc/--local", "utc", default=True, help="Print times in UTC, marked Z (default), or in this machine's zone with its offset.")
    @functools.wraps(command)
    def wrapper(**options: Any) -> Any:
        show_local_time(not options.pop("utc"))
        if "args" in options:  # grep: [PATTERN] [PATH...]
            options["pattern"], options["paths"] = split_pattern(options.pop("args"), options.get("pattern"), bool(options["es_urls"]))
            check_paths(options["paths"], options["pattern"])
        paths = options.pop("paths", ()) or _default_root(options)
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

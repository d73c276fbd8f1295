"""``hvdlog grep``: the events that match, by rank, level, step and time, from files or Elasticsearch."""

from __future__ import annotations

import heapq
import queue
import threading
from dataclasses import replace

import click

from hvdlog.cli.options import Run, source_options
from hvdlog.cli.output import Group, Printer, dedupe
from hvdlog.fields import LEVELS
from hvdlog.query.echoes import drop_echoes
from hvdlog.query.source import Source, SourceError
from hvdlog.documents import Document
from hvdlog.query.spec import Filter, FilterError, sort_key

__all__ = ["grep"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, metavar="[PATTERN] [PATH]...")
@click.option("-e", "--regexp", "pattern", metavar="PATTERN", help="The pattern (use when it could be taken for a path).")
@click.option("-E", "--extended-regexp", "regex", is_flag=True, help="PATTERN is a regular expression, not a fixed string.")
@click.option("-i", "--ignore-case", is_flag=True, help="Match PATTERN case-insensitively.")
@click.option("--level", type=click.Choice(LEVELS), help="Only events at this level or more severe.")
@click.option("--step", metavar="A:B", help="Only events with a step in A..B (A: and :B leave an end open).")
@click.option("-n", "--lines", "last", type=click.IntRange(min=1), help="Only the last N matching events.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new matching events (polls every --interval).")
@click.option("--interval", default=1.0, show_default=True, type=float, help="Seconds between polls with --follow.")
@click.option("--no-dedupe", is_flag=True, help="Print every event, even identical ones from several ranks.")
@click.option("--window", default=2.0, show_default=True, type=float, help="Seconds within which identical messages collapse.")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: on a terminal, unless NO_COLOR).")
@source_options
def grep(
    run: Run,
    pattern: str | None,
    regex: bool,
    ignore_case: bool,
    last: int | None,
    follow: bool,
    interval: float,
    no_dedupe: bool,
    window: float,
    color: bool | None,
    **_: object,
) -> None:
    """Print events matching PATTERN (a fixed string in the message or the error) and the filters.

    PATTERN is case-sensitive unless -i; with -E it is a Python regular expression. Events
    are sorted by time, then rank. Identical messages from several ranks within --window
    seconds print once, naming the ranks. An uncaught exception hvdlog recorded prints once
    (its event; the captured native traceback that repeats it is left out). Exit 0 when something matched, 1 when nothing
    did, 2 on an error (results of the sources that worked are still printed).
    """
    try:
        spec = replace(run.spec, pattern=pattern, regex=regex, ignore_case=ignore_case) if pattern else run.spec
    except FilterError as exc:
        raise click.UsageError(str(exc)) from None
    printer = Printer(as_json=run.as_json, color=color)
    if last is not None:
        docs = _last(run, spec, last)
    else:
        docs = drop_echoes(run.documents(spec=spec))
    found = False
    if run.as_json:
        for doc in docs:
            found = True
            printer.json(doc)
    else:
        for group in (_single(doc) for doc in docs) if no_dedupe else dedupe(docs, window):
            found = True
            printer.event(group)
    printer.flush()
    if follow:
        _follow(run, spec, interval, printer)
    printer.flush()
    run.exit(found)


def _single(doc: Document) -> Group:
    """One event as its own line."""
    return Group(doc, {doc["rank"]} if isinstance(doc.get("rank"), int) else set())


def _last(run: Run, spec: Filter, last: int) -> list[Document]:
    """The last N matches across sources: each source's last N, merged, cut to N."""
    streams = []
    for source in run.sources:
        try:
            streams.append(list(source.search(spec, last=last)))
        except SourceError as exc:
            run.failures.append(f"{source.label}: {exc}")
            click.echo(f"hvdlog: warning: {source.label}: {exc}", err=True)
    return list(drop_echoes(heapq.merge(*streams, key=sort_key)))[-last:]


def _follow(run: Run, spec: Filter, interval: float, printer: Printer) -> None:
    """Poll every source in its own thread and print what they find; Ctrl-C ends it with the usual exit code.

    Events print as they arrive (sources are not merged by time while following).
    """
    found: queue.Queue[Document | str] = queue.Queue()

    def pump(source: Source) -> None:
        try:
            for doc in source.follow(spec, interval):
                found.put(doc)
        except SourceError as exc:
            found.put(f"{source.label}: {exc}")

    for source in run.sources:
        threading.Thread(target=pump, args=(source,), daemon=True, name=f"follow {source.label}").start()
    try:
        while True:
            item = found.get()
            if isinstance(item, str):
                run.failures.append(item)
                click.echo(f"hvdlog: warning: {item}", err=True)
                continue
            printer.event(_single(item))
            printer.flush()
    except KeyboardInterrupt:
        pass

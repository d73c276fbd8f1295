"""``hvdlog grep``: the events that match, by rank, level, step and time, from files or Elasticsearch."""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import deque
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import click
import orjson

from hvdlog.cli.options import Run, Seconds, source_options, warn
from hvdlog.cli.output import Group, Printer, dedupe
from hvdlog.cli.text import sentence
from hvdlog.documents import Document, sort_key
from hvdlog.fields import LEVELS, PARSE_FAILURE_TAG
from hvdlog.query.echoes import drop_echoes
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.source import Source, SourceError
from hvdlog.query.spec import Filter, FilterError

__all__ = ["grep"]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("args", nargs=-1, metavar="[PATTERN] [PATH]...")
@click.option("-e", "--regexp", "pattern", metavar="PATTERN", help="The pattern (use when it could be taken for a path).")
@click.option("-E", "--extended-regexp", "regex", is_flag=True, help="PATTERN is a regular expression, not a fixed string.")
@click.option("-i", "--ignore-case", is_flag=True, help="Match PATTERN case-insensitively.")
@click.option("--level", type=click.Choice(LEVELS), help="Only events at this level or more severe.")
@click.option(
    "--dataset", multiple=True, metavar="D",
    help="Only events of this event.dataset (repeatable): horovod.app, horovod.core, horovod.launcher, "
    "horovod.timeline, horovod.rejected (events Elasticsearch refused).",
)
@click.option("--step", metavar="A:B", help="Only events with a step in A..B (A: and :B leave an end open).")
@click.option("-n", "--lines", "last", type=click.IntRange(min=1), help="Only the last N matching events.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new matching events (polls every --interval).")
@click.option("--interval", default=1.0, show_default=True, type=Seconds(), help="Seconds between polls with --follow.")
@click.option(
    "--no-group", "--no-dedupe", "no_dedupe", is_flag=True,
    help="Print every event, even lines of one template from several ranks (--no-dedupe: its old name).",
)
@click.option("--window", default=2.0, show_default=True, type=Seconds(zero=True), help="Seconds within which lines of one template collapse.")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: on a terminal, unless NO_COLOR).")
@click.option("--unparsed", is_flag=True, help="Only the lines that could not be parsed (torn or garbled; prints are parsed).")
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
    unparsed: bool,
    **_: object,
) -> None:
    """Print events matching PATTERN (a fixed string in the message or the error) and the filters.

    The first argument is PATTERN unless it is the only one (then it is the PATH) or it is
    written as an existing path with a '/' (runs/job1, ./NCCL); -e PATTERN is never ambiguous.
    PATTERN is case-sensitive unless -i; with -E it is a regular expression (RE2, linear time,
    with google-re2; else Python's, nested repetitions refused). Events
    are sorted by time, then rank. Lines of one template (the same text but for numbers,
    addresses, paths and hosts) from several ranks within --window seconds print once, naming
    the ranks, numbers that differ as their range (<30000..31000>); --no-group prints every
    event. An uncaught exception hvdlog recorded prints once
    (its event; the captured native traceback that repeats it is left out). Exit 0 when
    something matched, 1 when nothing did, 2 on an error (results of the sources that
    worked are still printed).
    """
    try:
        spec = replace(run.spec, pattern=pattern, regex=regex, ignore_case=ignore_case) if pattern else run.spec
        spec = replace(spec, tags=(PARSE_FAILURE_TAG,)) if unparsed else spec
    except FilterError as exc:
        raise click.UsageError(sentence(str(exc))) from None
    printer = Printer(as_json=run.as_json, color=color)
    printer.show_job = several_jobs(run)
    docs = _last(run, spec, last) if last is not None else drop_echoes(run.documents(spec=spec))
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


def several_jobs(run: Run) -> bool:
    """Whether the events can come from several jobs, so each line names its job: a root holding
    several jobs of our layout, or Elasticsearch without one --job."""
    from hvdlog.layout import parse_path, walk
    from hvdlog.query.es import ElasticsearchSource

    if len(run.spec.jobs or ()) == 1:
        return False
    if any(isinstance(source, ElasticsearchSource) for source in run.sources):
        return True
    jobs = {found.job for path in walk(run.file_paths(), lambda _m: None) if (found := parse_path(path)) is not None}
    return len(jobs) > 1


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
            warn(f"{source.label}: {exc}")
    return list(drop_echoes(heapq.merge(*streams, key=sort_key)))[-last:]


class _Ended:
    """A follower thread stopped: with a sentence (a source failed) or an exception (a bug)."""

    __slots__ = ("error", "label", "message")

    def __init__(self, label: str, message: str | None = None, error: BaseException | None = None) -> None:
        self.label, self.message, self.error = label, message, error


class _Shown:
    """The documents a follower printed lately, so the catch-up search after a retry prints
    each one once."""

    def __init__(self, size: int = 4096) -> None:
        self.order: deque[bytes] = deque()
        self.keys: set[bytes] = set()
        self.size = size

    def put(self, doc: Document, out: queue.Queue[Any]) -> None:
        key = orjson.dumps(doc, default=str, option=orjson.OPT_SORT_KEYS)
        if key in self.keys:
            return
        self.keys.add(key)
        self.order.append(key)
        if len(self.order) > self.size:
            self.keys.discard(self.order.popleft())
        out.put(doc)


class _Backoff:
    """Delays between retries of a failing poll: doubling from ``interval`` (at least 1 s) up to
    :data:`_MAX_BACKOFF`, back to the start after a follow that ran a minute before failing."""

    def __init__(self, interval: float) -> None:
        self.first = max(1.0, interval)
        self.delay = 0.0

    def next(self, lasted: float) -> float:
        self.delay = self.first if lasted > 60 or not self.delay else min(self.delay * 2, _MAX_BACKOFF)
        return self.delay


_MAX_BACKOFF = 30.0


def _follow(run: Run, spec: Filter, interval: float, printer: Printer) -> None:
    """Poll every source in its own thread and print what they find; Ctrl-C ends it with the usual exit code.

    Events print as they arrive (sources are not merged by time while following). An
    Elasticsearch poll that fails is retried with backoff (1, 2, 4 ... 30 s), each retry said on
    stderr; once it answers again, what was indexed since the failure is searched and printed
    first (each event once), then following goes on. A thread that fails otherwise hands its error to this loop: a source's failure is warned about and recorded
    (exit 2 at the end), an unexpected exception is raised here; when no follower is left,
    following stops instead of waiting forever.
    """
    found: queue.Queue[Document | _Ended] = queue.Queue()

    def pump(source: Source) -> None:
        retries = _Backoff(interval) if isinstance(source, ElasticsearchSource) else None
        shown = _Shown()
        resume: datetime | None = None  # after a failed poll: what was indexed since is searched first
        while True:
            started = time.monotonic()
            try:
                if resume is not None:
                    since = max(resume, spec.since) if spec.since is not None else resume
                    for doc in source.search(replace(spec, since=since)):
                        shown.put(doc, found)
                    resume = None
                for doc in source.follow(spec, interval):
                    shown.put(doc, found)
                found.put(_Ended(source.label))
            except SourceError as exc:
                if retries is not None:  # Elasticsearch restarting, a network blip: wait, say so, poll again
                    if resume is None:
                        resume = datetime.now(timezone.utc) - timedelta(seconds=interval + 1)
                    delay = retries.next(time.monotonic() - started)
                    warn(f"{source.label}: {sentence(str(exc)).rstrip('.')}; retrying in {delay:g} s")
                    time.sleep(delay)
                    continue
                found.put(_Ended(source.label, message=str(exc)))
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
                found.put(_Ended(source.label, error=exc))
            return

    for source in run.sources:
        threading.Thread(target=pump, args=(source,), daemon=True, name=f"follow {source.label}").start()
    alive = len(run.sources)
    try:
        while alive:
            item = found.get()
            if isinstance(item, _Ended):
                alive -= 1
                if item.error is not None:
                    raise item.error
                if item.message is not None:
                    run.failures.append(f"{item.label}: {item.message}")
                    warn(f"{item.label}: {item.message}")
                continue
            printer.event(_single(item))
            printer.flush()
    except KeyboardInterrupt:
        pass

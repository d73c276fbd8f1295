"""``hvdlog watch``: follow a running job and tell someone: failures, stalls, stragglers, silent ranks, the end.

The sources and filters are ``grep -f``'s (PATHs and/or ``--es``); the detectors are
:mod:`hvdlog.watch.detectors`, delivery (webhooks, commands, retries, the spool) is
:mod:`hvdlog.watch.delivery`. Every alert is also printed on stdout. An Elasticsearch poll that
fails is retried with backoff, as ``grep -f --es`` does. Exit status: 0, or
:data:`EXIT_ALERTS_LOST` when an alert could be neither delivered nor spooled, else 2 when a
source failed.
"""

from __future__ import annotations

import queue
import signal
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Final

import click

from hvdlog.cli.grep import _Backoff, _Shown  # grep -f --es's retry policy, shared
from hvdlog.cli.options import Run, Seconds, fail, source_options, warn
from hvdlog.cli.output import Printer
from hvdlog.cli.text import sentence
from hvdlog.cli.timeline_output import timeline_analyses
from hvdlog.documents import Document, job_of
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.source import Source, SourceError
from hvdlog.watch.delivery import Command, Dispatcher, Target, Webhook, discover_link, safe_url
from hvdlog.watch.detectors import Alert, Watcher
from hvdlog.watch.spool import Spool, SpoolError, default_spool_dir

__all__ = ["EXIT_ALERTS_LOST", "watch"]

#: The exit status when at least one alert could be neither delivered nor spooled (each said on stderr).
EXIT_ALERTS_LOST: Final = 3
#: How far back (s) each poll of Elasticsearch looks again for documents indexed late.
ES_LOOK_BACK_S = 15.0
#: Seconds without a new document that end a batch from the sources: the detectors check then.
BATCH_QUIET_S = 0.05
_MARKS = {"firing": ("ALERT", "bold red"), "update": ("UPDATE", "red"), "resolved": ("RESOLVED", "green")}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--webhook", "webhooks", multiple=True, metavar="URL", envvar="HVDLOG_WATCH_WEBHOOK", show_envvar=True,
              help="POST each alert as JSON to URL (repeatable).")
@click.option("--webhook-format", type=click.Choice(["json", "slack"]), default="json", show_default=True,
              help="Body of the POST: hvdlog's alert JSON, or a Slack-compatible incoming-webhook message.")
@click.option("--exec", "commands", multiple=True, metavar="CMD", help="Run CMD (a shell command) with the alert's JSON on stdin (repeatable).")
@click.option("--kibana-url", metavar="URL", envvar="HVDLOG_KIBANA_URL", help="Add a Kibana Discover link on the job and ranks to each alert.")
@click.option("--all-jobs", is_flag=True, help="Watch every job under the PATHs (default: the first job seen, or --job).")
@click.option("--silent-after", type=Seconds(minimum=0.1), metavar="S",
              help="Seconds without a line that make a rank silent [default: 3x the job's median step time, at least 60].")
@click.option("--interval", default=2.0, show_default=True, type=Seconds(minimum=0.05), help="Seconds between polls and checks.")
@click.option("--from-start", is_flag=True, help="Read what the files (or the index) already hold first (default: from now on).")
@click.option("--exit-when-finished", is_flag=True, help="Stop once every watched job has finished (its job_finished alert sent).")
@click.option("--spool-dir", type=click.Path(file_okay=False), help="Where undeliverable alerts wait, signed; the watcher's own directory "
              "[default: $XDG_STATE_HOME/hvdlog/watch-spool, or ~/.local/state/hvdlog/watch-spool].")
@click.option("--retries", default=4, show_default=True, type=click.IntRange(min=1), help="Tries per alert and target before spooling.")
@source_options
def watch(run: Run, **options: Any) -> None:
    """Follow a running job and raise alerts: failure, stall, straggler, silent rank, job finished.

    Each alert is printed and sent once per episode (later news of the same episode as an
    update or "resolved") to every --webhook and --exec. Delivery is retried with backoff
    (at most 10 s between tries; redirects are not followed); an alert that still fails is
    spooled in the watcher's own --spool-dir, reported on stderr and delivered later, once.
    Runs until Ctrl-C (or --exit-when-finished). Exit status 3 when an alert could be neither
    delivered nor spooled, 2 when a source failed, else 0.
    """
    targets: list[Target] = [Webhook(url, options["webhook_format"]) for url in options["webhooks"]]
    targets += [Command(cmd) for cmd in options["commands"]]
    spool = Spool(Path(options["spool_dir"]) if options.get("spool_dir") else default_spool_dir(), warn)
    try:
        spool.open()
    except SpoolError as exc:
        fail(str(exc))
    dispatcher = Dispatcher(targets, spool, warn, tries=options["retries"], note=lambda message: click.echo(f"hvdlog: watch: {message}", err=True))
    dispatcher.start()
    for target in targets:
        click.echo(f"hvdlog: watch: alerts go to {target.label}", err=True)
    session = _Session(run, options, dispatcher)
    signal.signal(signal.SIGTERM, _interrupt)  # systemctl stop: deliver (or spool) what is queued first
    try:
        session.loop()
    except KeyboardInterrupt:
        pass
    finally:
        dispatcher.close()
    if dispatcher.lost:
        click.echo(f"hvdlog: error: {dispatcher.lost} alert(s) could be neither delivered nor spooled (see above)", err=True)
        sys.exit(EXIT_ALERTS_LOST)
    run.exit(True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Session:
    """The polling loop: sources' followers feed the detectors; due alerts are printed and dispatched."""

    def __init__(self, run: Run, options: dict[str, Any], dispatcher: Dispatcher) -> None:
        self.run, self.dispatcher = run, dispatcher
        self.interval: float = options["interval"]
        self.all_jobs: bool = options["all_jobs"] or bool(run.spec.jobs)
        self.until_finished: bool = options["exit_when_finished"]
        self.kibana_url: str | None = options.get("kibana_url")
        self.from_start: bool = options["from_start"]
        self.watcher = Watcher(options.get("silent_after"), timelines=lambda: timeline_analyses(run))
        self.printer = Printer(as_json=run.as_json)
        self.found: queue.Queue[Document | BaseException | str] = queue.Queue()
        self.chosen: Any = None
        self.ignored: set[Any] = set()

    def _pump(self, source: Source) -> None:
        """Follow one source; an Elasticsearch poll that fails is retried with backoff (1, 2, 4 ... 30 s, said
        on stderr), and once it answers, what was indexed since the failure is read first."""
        elastic = isinstance(source, ElasticsearchSource)
        retries, from_start, resume = _Backoff(self.interval), self.from_start, None
        shown = _Shown()  # the catch-up after a retry reads some documents again: each reaches the detectors once
        while True:
            started = time.monotonic()
            try:
                if resume is not None:
                    since = max(resume, self.run.spec.since) if self.run.spec.since is not None else resume
                    for doc in source.search(replace(self.run.spec, since=since)):
                        shown.put(doc, self.found)
                    resume = None
                # shippers deliver the ranks' lines out of order: look back
                lag = {"lag": ES_LOOK_BACK_S} if elastic else {}
                for doc in source.follow(self.run.spec, self.interval, from_start=from_start, wait=True, **lag):
                    if elastic:
                        shown.put(doc, self.found)
                    else:
                        self.found.put(doc)
            except SourceError as exc:
                if elastic:  # Elasticsearch restarting, a network blip: wait, say so, poll again
                    if resume is None:
                        resume = datetime.now(timezone.utc) - timedelta(seconds=self.interval + ES_LOOK_BACK_S + 1)
                    from_start = False
                    delay = retries.next(time.monotonic() - started)
                    warn(f"{source.label}: {sentence(str(exc)).rstrip('.')}; retrying in {delay:g} s")
                    time.sleep(delay)
                    continue
                self.found.put(f"{source.label}: {exc}")
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
                self.found.put(exc)
            return

    def loop(self) -> None:
        for source in self.run.sources:
            threading.Thread(target=self._pump, args=(source,), daemon=True, name=f"watch {source.label}").start()
        alive = len(self.run.sources)
        while alive:
            # a check every interval, after each batch the sources deliver (an alert one poll after its
            # evidence, not two), and when a held decision is due (the detectors' ``due``)
            # (the batch is over when nothing came for BATCH_QUIET_S; at most one check per interval / 4)
            started = time.monotonic()
            deadline = started + self.interval
            if self.watcher.due is not None:
                deadline = min(deadline, started + max(0.0, self.watcher.due - time.time()))
            received = False
            while (left := deadline - time.monotonic()) > 0:
                try:
                    item = self.found.get(timeout=min(left, BATCH_QUIET_S) if received else left)
                except queue.Empty:
                    if received and time.monotonic() - started < self.interval / 4:
                        received = False  # a trickle: wait for the interval (or the next batch) instead
                        continue
                    break
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, str):
                    alive -= 1
                    self.run.failures.append(item)
                    warn(item)
                    continue
                self._add(item)
                received = True
            for alert in self.watcher.check(time.time()):
                self._emit(alert)
            if self.until_finished and self.watcher.jobs and all(job.finished for job in self.watcher.jobs.values()):
                return

    def _add(self, doc: Document) -> None:
        """One document for the detectors; without --all-jobs/--job only the first job seen counts."""
        job = job_of(doc)
        if not self.all_jobs:
            if self.chosen is None:
                self.chosen = job
                click.echo(f"hvdlog: watch: watching job {job} (--all-jobs for every job)", err=True)
            elif job != self.chosen:
                if job not in self.ignored:
                    self.ignored.add(job)
                    warn(f"job {job} is not watched (watching {self.chosen}); use --all-jobs or --job")
                return
        self.watcher.add(doc, time.time())

    def _emit(self, alert: Alert) -> None:
        payload = alert.to_json()
        if self.kibana_url:
            payload["kibana_url"] = discover_link(self.kibana_url, payload)
        if self.run.as_json:
            self.printer.json(payload)
        else:
            mark, style = _MARKS.get(alert.status, ("FINISHED", "bold"))
            self.printer.text(f"{alert.time}  {mark:<8} {alert.kind:<12} {alert.summary}", style=style)
            if alert.reasoning:
                self.printer.text(f"    why: {alert.reasoning}" + (f" ({alert.confidence})" if alert.confidence else ""))
            if self.kibana_url:
                self.printer.text(f"    kibana: {safe_url(self.kibana_url)} Discover on job {alert.job}")
        self.printer.flush()
        self.dispatcher.submit(payload)


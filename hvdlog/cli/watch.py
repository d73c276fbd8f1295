"""``hvdlog watch``: follow a running job and tell someone: failures, stalls, stragglers, silent ranks, the end.

The sources and filters are ``grep -f``'s (PATHs and/or ``--es``); the detectors are
:mod:`hvdlog.watch.detectors`, delivery (webhooks, commands, retries, the spool) is
:mod:`hvdlog.watch.delivery`. Every alert is also printed on stdout.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from hvdlog.cli.options import Run, source_options, warn
from hvdlog.cli.output import Printer
from hvdlog.documents import Document, get_field, job_of
from hvdlog.layout import safe_job_id
from hvdlog.query.es import ElasticsearchSource
from hvdlog.query.source import Source, SourceError
from hvdlog.watch.delivery import Command, Dispatcher, Target, Webhook, discover_link, safe_url
from hvdlog.watch.detectors import Alert, Watcher

__all__ = ["SPOOL_NAME", "watch"]

#: The spool's file name in the job's folder (not ``.jsonl``/``.log``: no walker takes it for a rank's log).
SPOOL_NAME = "hvdlog-watch.spool"
#: How far back (s) each poll of Elasticsearch looks again for documents indexed late.
ES_LOOK_BACK_S = 15.0
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
@click.option("--silent-after", type=click.FloatRange(min=0.1), metavar="S",
              help="Seconds without a line that make a rank silent [default: 3x the job's median step time, at least 60].")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.05), help="Seconds between polls and checks.")
@click.option("--from-start", is_flag=True, help="Read what the files (or the index) already hold first (default: from now on).")
@click.option("--exit-when-finished", is_flag=True, help="Stop once every watched job has finished (its job_finished alert sent).")
@click.option("--spool-dir", type=click.Path(file_okay=False), help="Where undeliverable alerts wait [default: the job's folder; with --es, .].")
@click.option("--retries", default=4, show_default=True, type=click.IntRange(min=1), help="Tries per alert and target before spooling.")
@source_options
def watch(run: Run, **options: Any) -> None:
    """Follow a running job and raise alerts: failure, stall, straggler, silent rank, job finished.

    Each alert is printed and sent once per episode (later news of the same episode as an
    update or "resolved") to every --webhook and --exec. Delivery is retried with backoff
    (at most 10 s between tries); an alert that still fails is spooled to a file in the job's
    folder, reported on stderr and delivered later. Runs until Ctrl-C (or --exit-when-finished).
    """
    targets: list[Target] = [Webhook(url, options["webhook_format"]) for url in options["webhooks"]]
    targets += [Command(cmd) for cmd in options["commands"]]
    spool = _Spool(run, options.get("spool_dir"))
    dispatcher = Dispatcher(targets, spool.path_of, warn, tries=options["retries"])
    for path in spool.existing():
        dispatcher.add_spool(path)
    dispatcher.start()
    for target in targets:
        click.echo(f"hvdlog: watch: alerts go to {target.label}", err=True)
    session = _Session(run, options, dispatcher, spool)
    signal.signal(signal.SIGTERM, _interrupt)  # systemctl stop: deliver (or spool) what is queued first
    try:
        session.loop()
    except KeyboardInterrupt:
        pass
    finally:
        dispatcher.close()
    run.exit(True)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Session:
    """The polling loop: sources' followers feed the detectors; due alerts are printed and dispatched."""

    def __init__(self, run: Run, options: dict[str, Any], dispatcher: Dispatcher, spool: _Spool) -> None:
        self.run, self.dispatcher, self.spool = run, dispatcher, spool
        self.interval: float = options["interval"]
        self.all_jobs: bool = options["all_jobs"] or bool(run.spec.jobs)
        self.until_finished: bool = options["exit_when_finished"]
        self.kibana_url: str | None = options.get("kibana_url")
        self.from_start: bool = options["from_start"]
        self.watcher = Watcher(options.get("silent_after"))
        self.printer = Printer(as_json=run.as_json)
        self.found: queue.Queue[Document | BaseException | str] = queue.Queue()
        self.chosen: Any = None
        self.ignored: set[Any] = set()

    def _pump(self, source: Source) -> None:
        try:
            follow = source.follow(self.run.spec, self.interval, from_start=self.from_start, wait=True)
            if isinstance(source, ElasticsearchSource):  # shippers deliver the ranks' lines out of order: look back
                follow = source.follow(self.run.spec, self.interval, from_start=self.from_start, wait=True, lag=ES_LOOK_BACK_S)
            for doc in follow:
                self.found.put(doc)
        except SourceError as exc:
            self.found.put(f"{source.label}: {exc}")
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            self.found.put(exc)

    def loop(self) -> None:
        for source in self.run.sources:
            threading.Thread(target=self._pump, args=(source,), daemon=True, name=f"watch {source.label}").start()
        alive = len(self.run.sources)
        while alive:
            deadline = time.monotonic() + self.interval
            while (left := deadline - time.monotonic()) > 0:
                try:
                    item = self.found.get(timeout=left)
                except queue.Empty:
                    break
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, str):
                    alive -= 1
                    self.run.failures.append(item)
                    warn(item)
                    continue
                self._add(item)
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
        self.spool.learn(doc)
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


class _Spool:
    """Where a job's undeliverable alerts go: ``<job folder>/hvdlog-watch.spool`` (or ``--spool-dir``)."""

    def __init__(self, run: Run, spool_dir: str | None) -> None:
        self.dir = Path(spool_dir) if spool_dir else None
        self.paths = [Path(p) for p in getattr(run.sources[0], "paths", [])] if run.sources else []
        self.folders: dict[Any, Path] = {}

    def learn(self, doc: Document) -> None:
        """The job's folder, from the path of a file of our layout: ``<root>/<job>/<host>/rank-N.jsonl``."""
        job = job_of(doc)
        if job in self.folders or self.dir is not None:
            return
        path = get_field(doc, "log.file.path")
        if isinstance(path, str) and Path(path).parent.parent.name == str(job) and Path(path).exists():
            self.folders[job] = Path(path).parent.parent

    def path_of(self, alert: dict[str, Any]) -> Path:
        job = alert.get("job")
        if self.dir is not None:
            return self.dir / f"{safe_job_id(str(job))}.{SPOOL_NAME}"
        folder = self.folders.get(job)
        return folder / SPOOL_NAME if folder is not None else Path.cwd() / f"{safe_job_id(str(job))}.{SPOOL_NAME}"

    def existing(self) -> list[Path]:
        """Spools left by an earlier run under the watched paths (or in --spool-dir)."""
        if self.dir is not None:
            return sorted(self.dir.glob(f"*.{SPOOL_NAME}")) if self.dir.is_dir() else []
        found: list[Path] = []
        for path in self.paths:
            if path.is_dir():
                found += [p for p in (path / SPOOL_NAME, *path.glob(f"*/{SPOOL_NAME}")) if p.is_file()]
        return found

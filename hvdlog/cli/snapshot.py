"""``hvdlog snapshot JOB``: where every rank of a running job is, now (the roll-call on demand).

It writes a request into the job's folder (``JOB/.hvdlog-snapshot``, :mod:`hvdlog.runtime.snapshot`);
each rank's stall watchdog answers at its next tick by logging every thread's stack as ``snapshot``
events; the command reads the ranks' events files until every rank answered or ``--timeout``
passed, then prints the ranks grouped by where their training thread is. No server on the ranks.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click
import orjson

from hvdlog.analyses.hang import roll_call
from hvdlog.analyses.stuck_location import rank_list, stuck_location
from hvdlog.cli.output import Printer
from hvdlog.layout import parse_path
from hvdlog.runtime.snapshot import TRIGGER

__all__ = ["snapshot"]


def _rank_files(job: Path) -> dict[Path, int]:
    """The job's events files of our layout, with their rank (elastic ``pid-N`` files: the rank inside)."""
    files: dict[Path, int] = {}
    for path in job.glob("*/*.jsonl"):
        found = parse_path(path)
        if found is not None and found.kind == "events":
            files[path] = found.rank if isinstance(found.rank, int) else -1
    return files


class _Reader:
    """Reads the answers to one request from the events files, from their end at the time of the request."""

    def __init__(self, files: dict[Path, int], request: str) -> None:
        self.offsets = {path: path.stat().st_size for path in files}
        self.needle = orjson.dumps(request)
        self.answers: dict[int, list[dict[str, Any]]] = {}
        self.done: set[int] = set()

    def read(self) -> None:
        for path, offset in self.offsets.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except OSError:
                continue
            complete = data[: data.rfind(b"\n") + 1]
            self.offsets[path] = offset + len(complete)
            for line in complete.splitlines():
                if self.needle in line and b'"snapshot"' in line:
                    self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            return
        rank = event.get("rank")
        if isinstance(rank, int) and event.get("event.action") == "snapshot":
            self.answers.setdefault(rank, []).append(event)
            if event.get("event.reason") == "training_thread":
                self.done.add(rank)


def _groups(answers: dict[int, list[dict[str, Any]]], training: bool) -> list[dict[str, Any]]:
    """Ranks grouped by where a thread is: the training thread, or (``training=False``) each other thread by name."""
    groups: dict[str, list[int]] = {}
    for rank, events in sorted(answers.items()):
        for event in events:
            if (event.get("event.reason") == "training_thread") != training:
                continue
            where = stuck_location(event)
            if not training:  # hvdlog's own threads sit in hvdlog's code, which a location leaves out
                name = str(event.get("process.thread.name"))
                where = name if where == "unknown place" else f"{name}: {where}"
            groups.setdefault(where, []).append(rank)
    return [{"location": where, "ranks": ranks} for where, ranks in sorted(groups.items(), key=lambda item: -len(item[1]))]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("job", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--timeout", default=15.0, show_default=True, type=float, help="Seconds to wait for every rank's answer.")
@click.option("--size", type=int, help="Ranks to wait for (default: the ranks with an events file in JOB).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def snapshot(job: Path, timeout: float, size: int | None, as_json: bool) -> None:
    """Ask every rank of the running job in JOB (<root>/<job>) where it is, and print the ranks grouped by place.

    Each rank's stall watchdog (configure(stall_after=...)) answers within a tick (1 s), even while its
    training thread is blocked in a collective. Exit 0 when every rank answered, 1 when some did not
    (named), 2 on an error.
    """
    files = _rank_files(job)
    if not files:
        raise click.ClickException(f"no events file of hvdlog's layout under {job}: give the job's folder, <root>/<job>")
    expected = set(range(size)) if size else {rank for rank in files.values() if rank >= 0}
    request = f"{time.time_ns()}-{os.getpid()}"
    reader = _Reader(files, request)
    started = time.monotonic()
    trigger = job / TRIGGER
    temporary = job / f"{TRIGGER}.{os.getpid()}.tmp"
    temporary.write_text(request + "\n")
    os.replace(temporary, trigger)  # one new modification time: the watchdogs answer once
    while True:
        reader.read()
        if expected <= reader.done or time.monotonic() - started >= timeout:
            break
        time.sleep(0.2)
    _print(Printer(as_json=as_json), request, reader, expected, time.monotonic() - started)
    sys.exit(0 if expected <= reader.done else 1)


def _print(printer: Printer, request: str, reader: _Reader, expected: set[int], seconds: float) -> None:
    silent = sorted(expected - reader.done)
    training, others = _groups(reader.answers, training=True), _groups(reader.answers, training=False)
    if printer.as_json:
        printer.json({"request": request, "seconds": round(seconds, 3), "answered": sorted(reader.done), "no_answer": silent,
                      "groups": training, "other_threads": others})
        return
    printer.text(f"snapshot {request}: {len(reader.done):,} of {len(expected):,} ranks answered in {seconds:.1f} s")
    if training:
        printer.text(f"  training threads: {roll_call(training)}")
    if others:
        printer.text(f"  other threads: {roll_call(others, limit=4)}")
    if silent:
        click.echo(f"hvdlog: no answer from rank {rank_list(silent)} (no stall watchdog, stopped, or dead)", err=True)

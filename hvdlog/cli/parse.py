"""``hvdlog parse PATH...``: raw files -> one JSON document per event (NDJSON) on stdout.

The same documents Logstash's pipelines produce for the same lines (same pattern file),
with no stack running. ``-`` or no PATH reads standard input. Directories are walked like
``hvdlog grep`` walks them (:func:`hvdlog.layout.walk`). Exit codes: 0 documents were
written, 1 none, 2 error (a missing or unreadable path — the others are still parsed — or a
bad option).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING

import click

from hvdlog.cli.common import time_zone, warn

if TYPE_CHECKING:
    from hvdlog.documents import Document
    from hvdlog.parse.native import Chatter

__all__ = ["parse"]

#: Documents per write to stdout (~30 kB of NDJSON).
_BATCH = 64


@click.command("parse", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@click.option(
    "--tz", "timezone", metavar="ZONE", callback=time_zone,
    help="IANA zone of the nodes' clocks, for Horovod's zone-less times [default: this machine's zone].",
)
@click.option("--timezone", "old_timezone", hidden=True, callback=time_zone)  # the name before 0.1.0: --tz everywhere now
@click.option(
    "--chatter", default="keep", show_default=True, metavar="keep|drop|sample=N",
    help="Known per-cycle TRACE/DEBUG lines: keep, drop, or keep one in N.",
)
@click.option("--size", type=click.IntRange(min=1, max=2**31 - 1), help="Job size, for the oldest stall format ([ready ranks: ...]).")
@click.option("-q", "--quiet", is_flag=True, help="Do not report the count of unparsed lines on stderr.")
def parse(paths: tuple[str, ...], timezone: str | None, old_timezone: str | None, chatter: str, size: int | None, quiet: bool) -> None:
    """Parse our JSON files, native captures, console captures and --output-filename trees."""
    from hvdlog.parse.native import parse_chatter

    problems: list[str] = []

    def problem(message: str) -> None:
        problems.append(message)
        warn(message)

    try:
        chatter_setting = parse_chatter(chatter)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--chatter") from None
    files = _inputs(paths, problem)
    written = unparsed = 0
    reading = _Reading(files)
    try:
        documents = reading.documents(timezone=timezone or old_timezone, chatter=chatter_setting, size=size)
        written, unparsed = _write(documents, reading.show if reading.progress.active else None)
    except BrokenPipeError:
        raise
    except OSError as error:
        reading.progress.end()
        problem(f"{error.filename or 'input'}: cannot read ({error.strerror}); stopped there")
    reading.progress.end()
    if unparsed and not quiet:
        from hvdlog.fields import PARSE_FAILURE_TAG

        click.echo(f"hvdlog parse: {unparsed} of {written} lines matched no pattern (kept raw, tagged {PARSE_FAILURE_TAG})", err=True)
    sys.exit(2 if problems else 0 if written else 1)


def _inputs(paths: tuple[str, ...], problem: Callable[[str], None]) -> list[str]:
    """``-`` and the files of :func:`hvdlog.layout.walk` (the one walker, shared with grep) that can be opened,
    without the ``--output-filename`` copies of what hvdlog's layout holds (as grep reads them)."""
    from hvdlog.layout import walk, without_launcher_copies
    from hvdlog.parse import STDIN

    files: list[str] = []
    for path in paths or (STDIN,):
        if path == STDIN:
            files.append(path)
            continue
        for found in walk([path], problem):
            try:
                open(found, "rb").close()
            except OSError as error:
                problem(f"{found}: cannot read ({error.strerror}); skipped")
                continue
            files.append(str(found))
    return without_launcher_copies(files)


class _Reading:
    """The inputs parsed by :func:`hvdlog.parse.parse_paths`, keeping the open file at hand
    (its ``opened`` hook) so a progress line can say how far it is read."""

    def __init__(self, files: list[str]) -> None:
        from hvdlog.query.progress import ReadProgress

        self.files = files
        self.sizes = {name: _file_size(name) for name in files}
        self.progress = ReadProgress(sum(self.sizes[name] for name in files), len(files))
        self.handle: IO[bytes] | None = None

    def documents(self, *, timezone: str | None, chatter: Chatter, size: int | None) -> Iterator[Document]:
        """Every input's documents (:func:`hvdlog.parse.parse_paths`); the progress line counts each file once it is read."""
        from hvdlog.parse import parse_paths

        return parse_paths(self.files, timezone=timezone, chatter=chatter, size=size, opened=self._opened)

    def _opened(self, name: str, handle: IO[bytes] | None) -> None:
        self.handle = handle
        if handle is None:
            self.progress.advance(self.sizes.get(name, 0), 1)

    def show(self) -> None:
        """Redraw the progress line (when due) with what is read of the current file."""
        handle = self.handle
        self.progress.show(handle.tell() if handle is not None and not handle.closed else 0)


def _file_size(name: str) -> int:
    try:
        return os.stat(name).st_size if name != "-" else 0
    except OSError:
        return 0


def _write(documents: Iterable[Document], tick: Callable[[], None] | None = None) -> tuple[int, int]:
    """NDJSON on stdout, :data:`_BATCH` documents per write; (documents written, unparsed lines).

    orjson.dumps is inlined (json_line's fallbacks only when it refuses a document): one write
    per document costs more. What was parsed before a read error is still written. ``tick``
    (the progress line, on a terminal only) is called after each write."""
    import orjson

    from hvdlog.fields import PARSE_FAILURE_TAG

    out = sys.stdout.buffer
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    refused = (orjson.JSONEncodeError, TypeError)
    batch: list[bytes] = []
    append = batch.append
    written = unparsed = 0
    try:
        for doc in documents:
            try:
                append(dumps(doc, str, newline))  # positional: cheaper to call
            except refused:
                from hvdlog.cli.output import json_line

                append(json_line(doc))
            written += 1
            tags = doc.get("tags")
            if tags is not None and isinstance(tags, list) and PARSE_FAILURE_TAG in tags:
                unparsed += 1
            if len(batch) >= _BATCH:
                out.write(b"".join(batch))
                batch.clear()
                if tick is not None:
                    tick()
    finally:
        if batch:
            out.write(b"".join(batch))
    out.flush()
    return written, unparsed

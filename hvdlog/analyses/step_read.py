"""The step events of per-rank files, read for ``stragglers`` without building documents.

``stragglers`` needs a handful of fields of the events that carry a step. In a ``.jsonl``
events file only lines holding the bytes ``"step"`` (or a JSON escape, which may spell it)
can carry one (found by the byte scanner of :mod:`hvdlog.query.scan`); those are decoded
with orjson and their few fields go straight into a :class:`~hvdlog.analyses.stragglers.Tally`,
which keeps per-rank figures, never the events. With msgspec installed and no filter but the
step condition, a whole block is decoded and folded at once (:mod:`hvdlog.analyses.step_bulk`,
same tally, about half the CPU). A line the shortcut cannot take exactly (an object nested in the line, a
filter on level, host, dataset, time or text) goes through the parser and
:meth:`~hvdlog.query.spec.Filter.matches` like any other read. A rank's native captures
(``.stdout.log``/``.stderr.log``, ``rank.<r>/stdout``) are not read: they never hold our
JSON events, and the native parser never sets ``step``. Any other file (a console capture,
``.ndjson``) is parsed whole, as a search would.

With ``jobs`` > 1 the files are read by that many processes, each returning a tally;
tallies merge exactly and in any order, so the answer is the same as with one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Final

import orjson

from hvdlog.analyses import step_bulk
from hvdlog.analyses.resources import is_resources
from hvdlog.analyses.stragglers import EPOCH_FIELD, Tally
from hvdlog.documents import Document, job_of
from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.parse import parse_lines
from hvdlog.parse.bounded import lines as bounded_lines
from hvdlog.parse.launcher import path_fields
from hvdlog.query.files import FileSource, ReadTotals, file_size, is_events_file, shares, worth_processes
from hvdlog.query.scan import ESCAPE, blocks, candidate_lines, finders
from hvdlog.query.spec import Filter

__all__ = ["Advance", "StepRead", "read_steps"]

#: Called with (bytes, files) each time files are read: a progress line (the CLI's) counts them.
Advance = Callable[[int, int], None]

#: A line holding a JSON escape may spell either key (``"st\\u0065p"``), so it is read too.
_NEEDLES: Final = (b'"step"', b'"resources"', ESCAPE)


@dataclass
class StepRead(ReadTotals):
    """What reading gave: the totals of any read, the tally and the (few) resources events."""

    tally: Tally = field(default_factory=Tally)
    resources: list[Document] = field(default_factory=list)

    def merge(self, other: ReadTotals) -> None:
        """Fold another reader's result in (files keep their order)."""
        super().merge(other)
        if isinstance(other, StepRead):
            self.tally.merge(other.tally)
            self.resources.extend(other.resources)


def _simple(spec: Filter) -> bool:
    """Whether the spec tests only fields the shortcut decodes (rank, job, step)."""
    plain = replace(spec, ranks=None, jobs=(), steps=None, any_of=())
    return plain == Filter()


def _take(flat: dict[str, Any], job: str | None, spec: Filter, read: StepRead) -> bool:
    """Tally one decoded line straight from its fields; False when it needs the full parse."""
    if flat.get("step") is None or dict in map(type, flat.values()):
        return False
    job = flat.get("job") or job
    rank, step = flat.get("rank"), flat.get("step")
    if spec.ranks is not None and rank not in spec.ranks:
        return True
    if spec.jobs and flat.get("job") not in spec.jobs:
        return True
    if spec.steps is not None and not (isinstance(step, int) and not isinstance(step, bool)
                                       and (spec.steps[0] is None or step >= spec.steps[0])
                                       and (spec.steps[1] is None or step <= spec.steps[1])):
        return True
    epoch = flat.get(EPOCH_FIELD)
    read.tally.add(str(job) if job else None, epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
                   rank, step, flat.get("@timestamp"), flat.get("host.name"), flat.get("samples_per_sec"), flat.get("size"))
    return True


def _count(docs: Iterable[Document], spec: Filter, read: StepRead) -> None:
    """Parsed documents into the result: parse failures counted, matches tallied (resources kept)."""
    for doc in docs:
        tags = doc.get("tags")
        if isinstance(tags, list) and PARSE_FAILURE_TAG in tags:
            read.failures += 1
        if spec.matches(doc):
            (read.resources.append if is_resources(doc) else read.tally.add_document)(doc)


def _parsed(line: bytes, path: str, spec: Filter, read: StepRead) -> None:
    _count(parse_lines([line], path=path), spec, read)


def _whole(path: Path, spec: Filter, timezone: str | None, read: StepRead) -> None:
    """A file that is neither an events file nor a rank's capture: every line through the parser."""
    with open(path, "rb") as handle:
        _count(parse_lines(bounded_lines(handle), path=str(path), timezone=timezone), spec, read)


def read_file(path: Path, spec: Filter, timezone: str | None = None) -> StepRead:
    """One file's step events (and resources events), tallied."""
    read = StepRead()
    name = str(path)
    if not is_events_file(path):
        if "horovod.launcher.stream" not in path_fields(name):
            try:
                _whole(path, spec, timezone, read)
            except (OSError, UnicodeError) as exc:
                read.cannot_read(path, exc)
                return read
        read.readable = 1
        return read
    job = job_of({"log": {"file": {"path": name}}})
    try:
        _read_events(path, job, spec, read)
        read.readable = 1
    except OSError as exc:
        read.cannot_read(path, exc)
    return read


def _read_events(path: Path, job: str | None, spec: Filter, read: StepRead) -> None:
    """An events file's step lines: a block at a time (:mod:`hvdlog.analyses.step_bulk`) when no
    filter applies, else (or where a block does not decode) line by line."""
    name = str(path)
    fast = _simple(spec)
    bulk = fast and spec.ranks is None and not spec.jobs and spec.steps is None and step_bulk.available()
    scan = finders(list(_NEEDLES))
    loads, error = orjson.loads, orjson.JSONDecodeError

    def one(line: bytes) -> None:
        try:
            flat = loads(line)
        except error:
            flat = None
        if not (fast and type(flat) is dict and _take(flat, job, spec, read)):
            _parsed(line, name, spec, read)

    with open(path, "rb") as handle:
        for data, end in blocks(handle):
            if not (bulk and step_bulk.tally_block(data, end, job, read.tally, one)):
                for line in candidate_lines(data, end, scan, None):
                    one(line)


def _read_many(paths: Sequence[Path], spec: Filter, timezone: str | None, advance: Advance | None = None) -> StepRead:
    total = StepRead()
    for path in paths:
        total.merge(read_file(path, spec, timezone))
        if advance is not None:
            advance(file_size(path), 1)
    return total


def read_steps(
    source: FileSource, spec: Filter, workers: int = 1, watch: Callable[[list[Path]], Advance] | None = None,
) -> StepRead:
    """Every events file of the source, by ``workers`` processes; the source's warnings are raised as usual.

    ``watch(files)``, if given, returns what to tell as files are read: each file in one
    process, each worker's share as it comes back with several."""
    files = source.files(spec)
    advance = watch(files) if watch is not None else None
    if not worth_processes(workers, files):
        result = _read_many(files, spec, source.timezone, advance)
    else:
        result = StepRead()
        parts = shares(files, workers)
        with ProcessPoolExecutor(max_workers=len(parts), mp_context=get_context("fork")) as pool:
            for share, part in zip(parts, pool.map(_read_many, parts, [spec] * len(parts), [source.timezone] * len(parts)), strict=True):
                result.merge(part)
                if advance is not None:
                    advance(sum(map(file_size, share)), len(share))
    source.report(result, len(files))
    return result


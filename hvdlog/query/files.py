"""Events from per-rank files on disk, through the same parser ``hvdlog parse`` and Logstash use.

Inputs are files or directories: our layout (``<job>/<host>/rank-<r>.jsonl`` and the
``.stdout.log``/``.stderr.log`` next to it) and ``horovodrun --output-filename`` trees
(``rank.<r>/stdout|stderr``). Every line goes through :mod:`hvdlog.parse`, so a document here
is the document Elasticsearch would hold.

Two shortcuts keep ``grep --rank R --level error`` fast on big trees, both exact:

* a file whose *path* names a rank outside ``--rank`` is not opened (the writer names each
  file after the rank whose events it holds);
* in a ``.jsonl`` file, only lines containing a needle that every match must contain
  (``"error"``/``"critical"`` for ``--level error``, the literal PATTERN; for the analyses'
  conditions, the bytes :mod:`hvdlog.query.prefilter` derives) are parsed; the byte scanner
  that finds them is :mod:`hvdlog.query.scan`. Native captures are always parsed whole (their
  documents span lines: a traceback, a stall block).

With :attr:`FileSource.workers` above 1 (``-j`` of first-failure and stalls) the files are
read by that many processes, each a consecutive share; the matches come back in file order.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from hvdlog.documents import Document, in_place, sort_key
from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.layout import is_launcher_log, path_rank, walk, without_launcher_copies
from hvdlog.parse import LineStream, parse_lines
from hvdlog.parse.bounded import MAX_LINE_BYTES, TRUNCATED_TAG, CutCounter
from hvdlog.parse.bounded import lines as bounded_lines
from hvdlog.query.copies import FollowedCopies, drop_launcher_copies
from hvdlog.query.follow import Follower
from hvdlog.query.prefilter import line_test
from hvdlog.query.scan import ESCAPE, blocks, candidate_lines, finders, needles
from hvdlog.query.scope import ReadScope
from hvdlog.query.source import SourceError, Warn, stderr_warn
from hvdlog.query.spec import Filter

__all__ = ["PREFILTER", "FileSource", "ReadTotals", "discover", "file_size", "is_events_file", "path_rank", "shares", "worth_processes"]

#: Whether file sources skip the lines of events files that cannot match (the default); the
#: exactness tests set it False to get the full read, every line parsed, through the same commands.
PREFILTER = True


def discover(paths: Iterable[str | Path], warn: Warn) -> list[Path]:
    """Files named directly, plus every log file under named directories (:func:`hvdlog.layout.walk`),
    without horovodrun's ``--output-filename`` copies of what hvdlog's layout already holds."""
    return without_launcher_copies(sorted(set(walk(paths, warn))))


def is_events_file(path: Path) -> bool:
    """Whether a file holds our JSON events (``rank-<r>.jsonl``, rotated ``.jsonl.N``), not a native capture."""
    return path.name.endswith(".jsonl") or ".jsonl." in path.name


def _tags(doc: Document) -> tuple[object, ...]:
    """``tags`` as a tuple whatever the data put there (``"tags": 5`` is data, not our bug)."""
    tags = doc.get("tags")
    if isinstance(tags, (list, tuple)):
        return tuple(tags)
    return (tags,) if tags is not None else ()


class FileSource:
    """Per-rank files and directories as a :class:`~hvdlog.query.source.Source`."""

    def __init__(self, paths: Sequence[str | Path], *, timezone: str | None = None, warn: Warn = stderr_warn, prefilter: bool | None = None) -> None:
        self.paths = list(paths)
        self.timezone = timezone
        self.warn = warn
        self.label = "files" if len(self.paths) != 1 else str(self.paths[0])
        self.parse_failures = 0
        #: Inputs that could not be read (the search went on without them).
        self.errors: list[str] = []
        #: Whether an events file is read only at the lines that can match (False: every line,
        #: the full read the prefilter's exactness tests compare with); None: :data:`PREFILTER`.
        self.prefilter = PREFILTER if prefilter is None else prefilter
        #: Processes reading the files (``-j``); with more than one, each reads a consecutive share.
        self.workers = 1
        #: What the searches went through (files, ranks, jobs), counted while reading: the
        #: "nothing found" sentence of an analysis comes from it, never from a second read.
        self.scope = ReadScope()
        #: Lines cut to the line bound by the read under way (hvdlog/parse/bounded.py).
        self._cuts = CutCounter()

    def _error(self, message: str) -> None:
        self.errors.append(message)
        self.warn(message)

    def files(self, spec: Filter) -> list[Path]:
        """The files a search with ``spec`` reads (by path, ranks outside ``--rank`` are left out)."""
        return self._files(spec)

    def report(self, read: ReadTotals, total: int) -> None:
        """Warn as a search does about what a reader of :meth:`files` could not read or parse."""
        for message in read.errors:
            self._error(message)
        self.scope.merge(read.scope)
        self._close_read(read.failures, read.readable, total, read.cuts)

    def _close_read(self, failures: int, readable: int, total: int, cuts: CutCounter | None = None) -> None:
        """After a read of ``total`` files: count and warn of the unparsed and the cut lines; fail when none could be read."""
        if cuts is not None and cuts.lines:
            self.warn(f"{cuts.lines} line(s) longer than {MAX_LINE_BYTES} bytes were cut as they were read ({cuts.bytes} bytes skipped; "
                      f"their first and last bytes are kept, tagged {TRUNCATED_TAG})")
        self.parse_failures += failures
        if failures:
            self.warn(f"{failures} line(s) could not be parsed (torn or garbled; prints are not counted); "
                      f"they are kept with tag {PARSE_FAILURE_TAG}: list them with `hvdlog grep --unparsed PATH`")
        if not readable and total:
            raise SourceError("none of the log files could be read")

    def _files(self, spec: Filter) -> list[Path]:
        files = discover(self.paths, self._error)
        if not files:
            raise SourceError("no log files found: check the paths (files, directories or --output-filename trees)")
        if spec.ranks is None:
            return files
        ranks = spec.ranks
        return [path for path in files if (rank := path_rank(path)) is None or rank in ranks]

    def _read(self, path: Path, spec: Filter) -> Iterator[Document]:
        with open(path, "rb") as handle:
            yield from parse_lines(self._lines(handle, path, spec), path=str(path), timezone=self.timezone)

    def _lines(self, handle: io.BufferedIOBase, path: Path, spec: Filter) -> Iterable[bytes]:
        """The lines of ``path`` that can match ``spec``: in an events file, those holding its needles
        (an analysis's conditions: :mod:`hvdlog.query.prefilter`; grep's level and PATTERN:
        :func:`~hvdlog.query.scan.needles`); every line of any other file."""
        cuts = self._cuts
        if not self.prefilter or not is_events_file(path):
            return bounded_lines(handle, counter=cuts)
        if spec.any_of or spec.steps is not None:
            test = line_test(spec, str(path))
            if test is None:
                return bounded_lines(handle, counter=cuts)
            found = finders(test.scan)  # one pass per needle: each is memchr-fast, an automaton of them all is not
            return (line for data, end in blocks(handle, counter=cuts) for line in candidate_lines(data, end, found, None, cuts) if test.keeps(line))
        levels, literal = needles(spec)
        if not (levels or literal):
            return bounded_lines(handle, counter=cuts)
        found = finders([*(levels or [literal]), ESCAPE])  # type: ignore[list-item]
        return (line for data, end in blocks(handle, counter=cuts) for line in candidate_lines(data, end, found, literal, cuts))

    def _file_matches(self, path: Path, spec: Filter, read: _Read) -> Iterator[Document]:
        """One file's matches; what went wrong and the parse failures are counted in ``read``."""
        self._cuts = read.cuts
        read.scope.add_file(str(path), file_size(path))
        saw = read.scope.saw
        try:
            for doc in self._read(path, spec):
                saw(doc)
                if PARSE_FAILURE_TAG in _tags(doc):
                    read.failures += 1
                if spec.matches(doc):
                    yield doc
            read.readable += 1
        except (OSError, UnicodeError) as exc:
            read.cannot_read(path, exc)

    def _matches(self, files: Sequence[Path], spec: Filter) -> Iterator[Document]:
        read = _Read()
        if self._parallel(files):
            for part, share in _in_processes(self, files, spec):
                self._done(share)
                read.merge(part)
                yield from part.docs
            for message in read.errors:
                self._error(message)
        else:
            for path in files:
                told = len(read.errors)
                yield from self._file_matches(path, spec, read)
                for message in read.errors[told:]:
                    self._error(message)
        self.scope.merge(read.scope)
        self._close_read(read.failures, read.readable, len(files), read.cuts)

    def _parallel(self, files: Sequence[Path]) -> bool:
        return worth_processes(self.workers, files)

    def _done(self, files: Sequence[Path]) -> None:
        """A worker process finished reading ``files`` (a hook for progress)."""

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """Every match (or the ``last`` N), sorted by time then rank."""
        files = self._files(spec)
        with _no_cycle_collection():
            docs = in_place(self._matches(files, spec))
        if any(is_launcher_log(str(path)) for path in files):  # hvdlog run's console among them: read its copies once
            docs = drop_launcher_copies(docs)
        yield from docs[max(len(docs) - last, 0) :] if last is not None else docs

    def follow(self, spec: Filter, interval: float = 1.0, *, from_start: bool = False, wait: bool = False) -> Iterator[Document]:
        """Lines appended from now on (new files included), parsed and filtered, batch by batch.

        Files are followed by identity, across rotation, copy-truncate and delete: every
        whole line once (:mod:`hvdlog.query.follow`). ``from_start`` reads what the files
        already hold first; ``wait`` lets the files appear later (``hvdlog watch`` started
        before the job) instead of failing when there are none yet.
        """

        def files() -> Iterator[Path]:
            for path in discover(self.paths, lambda _message: None):
                if spec.ranks is None or (rank := path_rank(path)) is None or rank in spec.ranks:
                    yield path

        if not wait:
            self._files(spec)  # no file at all is an error now, not a silent wait
        named = [Path(f"{path}.1") for path in self.paths if not Path(path).is_dir()]
        follower = Follower(files, self.warn, lambda: named)
        copies = FollowedCopies()  # hvdlog run's console repeats the ranks' lines: each once
        copies.active = any(is_launcher_log(str(path)) for path in files())
        if not from_start:
            follower.start()
        # A native file's parser lives across polls: a block straddling two polls is one document.
        # A block still open when its file went quiet for FOLLOW_QUIET_S (and at least a poll) is complete.
        streams: dict[Path, tuple[LineStream, float]] = {}
        try:
            while True:
                time.sleep(interval)
                batch: list[Document] = []
                grew: set[Path] = set()
                for path, lines in follower.poll():
                    copies.active = copies.active or is_launcher_log(str(path))
                    if is_events_file(path):  # one document per line: nothing waits for the next poll
                        batch.extend(d for d in parse_lines(lines, path=str(path), timezone=self.timezone) if spec.matches(d))
                        continue
                    grew.add(path)
                    stream = streams[path][0] if path in streams else LineStream(path=str(path), timezone=self.timezone)
                    streams[path] = (stream, time.monotonic())
                    batch.extend(d for d in stream.feed(lines) if spec.matches(d))
                quiet = [path for path, (_, grown) in streams.items() if path not in grew and time.monotonic() - grown >= FOLLOW_QUIET_S]
                for path in quiet:  # what it holds is complete
                    batch.extend(d for d in streams.pop(path)[0].close() if spec.matches(d))
                yield from copies.batch(sorted(batch, key=sort_key))
        finally:
            follower.close()


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The garbage collector paused while the matches pile up: documents are trees (no cycles
    to find), and each collection would walk all of them again (~10 % of a big grep)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: Seconds a followed native file stays quiet before the block it ends with is taken as complete
#: (a traceback's last line has nothing after it to end it); checked at each poll, so at least one.
FOLLOW_QUIET_S: Final = 2.0

#: Below this many bytes in all, one process reads everything (starting workers costs more).
PARALLEL_MIN_BYTES: Final = 16 * 2**20


def worth_processes(workers: int, files: Sequence[Path]) -> bool:
    """Whether ``files`` are read by ``workers`` processes (``-j``): only when there are several
    files and enough bytes to pay for starting them."""
    return workers > 1 and len(files) > 1 and sum(file_size(path) for path in files) >= PARALLEL_MIN_BYTES


def shares(paths: Sequence[Path], count: int) -> list[list[Path]]:
    """``count`` consecutive shares of the files (rank files are of similar size): read by one
    process each and taken back in order, they give what one reader going through them gives."""
    step = -(-len(paths) // count)
    return [list(paths[start : start + step]) for start in range(0, len(paths), step)]


def file_size(path: Path) -> int:
    """The file's size in bytes, 0 when it cannot be seen (it is reported when it is read)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


@dataclass
class ReadTotals:
    """What any reader of a source's files went through: the inputs it could not read, the
    unparsed lines, the files read. Workers return one each; merged, the source reports them once."""

    errors: list[str] = field(default_factory=list)
    failures: int = 0
    readable: int = 0
    scope: ReadScope = field(default_factory=ReadScope)
    cuts: CutCounter = field(default_factory=CutCounter)

    def cannot_read(self, path: Path, exc: OSError | UnicodeError) -> None:
        self.errors.append(f"{path}: cannot read ({exc.strerror if isinstance(exc, OSError) else exc}); skipped")

    def merge(self, other: ReadTotals) -> None:
        self.errors.extend(other.errors)
        self.failures += other.failures
        self.readable += other.readable
        self.scope.merge(other.scope)
        self.cuts.lines += other.cuts.lines
        self.cuts.bytes += other.cuts.bytes


@dataclass
class _Read(ReadTotals):
    """A search's read: the totals and the matches (a worker sends its matches back in them)."""

    docs: list[Document] = field(default_factory=list)


def _read_share(files: Sequence[Path], spec: Filter, timezone: str | None, prefilter: bool) -> _Read:
    """A worker's share: its files' matches in file order (the documents travel back pickled: an
    analysis's few, not the files' lines)."""
    source = FileSource([], timezone=timezone, prefilter=prefilter)
    read = _Read()
    for path in files:
        read.docs.extend(source._file_matches(path, spec, read))
    return read


def _in_processes(source: FileSource, files: Sequence[Path], spec: Filter) -> Iterator[tuple[_Read, list[Path]]]:
    """Each consecutive share of the files read by its own process, in order: concatenated, the
    matches come in the order one process reading the files would give (the sort then ties the same)."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    parts = shares(files, source.workers)
    count = len(parts)
    with ProcessPoolExecutor(max_workers=count, mp_context=get_context("fork")) as pool:
        yield from zip(pool.map(_read_share, parts, [spec] * count, [source.timezone] * count, [source.prefilter] * count), parts, strict=True)

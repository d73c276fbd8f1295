"""Per-rank paths, written and recognised in one place, and the one directory walker.

hvdlog writes ``<root>/<job>/<host>/rank-<rank>.<kind>``: ``<kind>`` is ``jsonl`` for our
events, ``stdout.log`` / ``stderr.log`` for the rank's native output. In elastic jobs
(ranks change at resets) the file is the process's, ``pid-<pid>.<kind>``, and names no rank. ``horovodrun
--output-filename DIR`` writes ``DIR/rank.<r>/stdout|stderr`` (Open MPI adds a level).
This path is a contract with Filebeat (which derives job, host and rank from it), Logstash
and ``hvdlog`` over files; keep it stable.

Recognition uses the path patterns of the grok pattern file (``HOROVOD_LAYOUT_PATH``,
``HOROVOD_RANK_FILE_PATH``), the same ones Logstash applies, so the layout is spelled once.
They are compiled on first use: the training side, which only *writes* paths, never loads them.
:func:`walk` is the one directory walker of ``hvdlog parse DIR`` and ``hvdlog grep DIR``;
:func:`without_launcher_copies` leaves out, for both, the ``--output-filename`` copies of what
the layout already holds.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

if TYPE_CHECKING:
    from hvdlog.parse.patterns import CompiledPattern

__all__ = [
    "DEFAULT_ROOT",
    "KINDS",
    "LAUNCHER_LOG_PATH",
    "MAX_JOB_ID",
    "RankFile",
    "console_job",
    "is_compressed_log",
    "is_launcher_log",
    "is_log_file",
    "listed_job",
    "parse_path",
    "path_rank",
    "process_file",
    "rank_file",
    "safe_job_id",
    "tree_of",
    "walk",
    "without_launcher_copies",
]

#: Used when neither ``configure(root=...)`` nor ``HVDLOG_ROOT`` says otherwise.
DEFAULT_ROOT: Final = "hvdlog-logs"

#: File suffix per content kind.
KINDS: Final = {"events": "jsonl", "stdout": "stdout.log", "stderr": "stderr.log"}
_KIND_OF_SUFFIX: Final = {suffix: kind for kind, suffix in KINDS.items()}
_ROTATED: Final = re.compile(r"\.\d+$")

#: The launcher's console ``hvdlog run`` keeps (``<root>/<job>/launcher.log``, hvdlog/cli/run.py;
#: rotated ``.N``). No grok reads its path: Filebeat's hvdlog-launcher input globs it and takes the job.
LAUNCHER_LOG_PATH: Final = re.compile(r"(?:^|/)(?P<job>[^/]+)/launcher\.log(?:\.\d+)?$")

#: JSON lines (rotations too): events that name their job (hvdlog's, a timeline's ``.ndjson``), not a console.
_JSON_LINES: Final = re.compile(r"\.(?:jsonl|ndjson)(?:\.\d+)?$")

#: Other files a directory walk takes: logs by name (console captures, rotated ones).
_LOG_SUFFIX: Final = re.compile(r"\.(?:jsonl|log|ndjson)(?:\.\d+)?$")


_JOB_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: Longest job directory name: well under NAME_MAX (255 bytes), room for ``.tmp`` siblings.
MAX_JOB_ID: Final = 96
_READABLE: Final = 80


def safe_job_id(job: str) -> str:
    """``job`` as one path component, bounded and unique.

    Unsafe ASCII runs become ``-``; never starting with ``-`` or ``.`` (``python -c`` would give
    ``-c-...``, an option to every tool; ``..`` a parent). A name that is not already safe as it
    is (it had to lose or change characters: accents kept as their base letter, ``resnet 50``,
    ``resnet/50``, ``../../etc``), that has nothing readable left, or that is longer than
    :data:`MAX_JOB_ID`, gets a readable part plus ``-`` and a short hash of the whole name, so
    two names never share a directory (``训练`` -> ``job-1f0c...``; ``resnet 50`` and
    ``resnet:50`` differ, and neither is ``resnet-50``).
    """
    ascii_form = unicodedata.normalize("NFKD", job).encode("ascii", "ignore").decode()
    readable = _JOB_UNSAFE.sub("-", ascii_form).lstrip("-.")
    if readable == job and len(readable) <= MAX_JOB_ID:
        return readable
    digest = hashlib.sha256(job.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{readable[:_READABLE].rstrip('-.') or 'job'}-{digest}"


class RankFile(NamedTuple):
    """What a per-rank (or, elastic, per-process: ``rank`` None) path of our layout says."""

    job: str
    host: str
    rank: int | None
    kind: str


def rank_file(root: str | Path, job: str, host: str, rank: int, kind: str = "events") -> Path:
    """The path of one rank's file of one kind."""
    return Path(root) / job / host / f"rank-{rank}.{KINDS[kind]}"


def process_file(root: str | Path, job: str, host: str, pid: int, kind: str = "events") -> Path:
    """The path of one process's file of one kind, for elastic jobs: a process's rank can
    change at every reset, and a new worker can get a rank another process had, so the file
    is named after the process and each event's ``rank`` field (or each native line's rank
    tag) says the rank."""
    return Path(root) / job / host / f"pid-{pid}.{KINDS[kind]}"


@cache
def _pattern(name: str) -> CompiledPattern:
    from hvdlog.parse.patterns import compile_pattern

    return compile_pattern(name)


def _posix(path: str | os.PathLike[str]) -> str:
    return os.fspath(path).replace("\\", "/")


def parse_path(path: str | os.PathLike[str]) -> RankFile | None:
    """Job, host, rank and kind from a path of our layout, or None when it is not one."""
    text = _posix(path)
    fields = _pattern("HOROVOD_LAYOUT_PATH").search(text)
    if fields is None:
        return None
    suffix = _ROTATED.sub("", text).rsplit("/", 1)[-1].split(".", 1)[1]
    return RankFile(fields["job"], fields["host.name"], fields.get("rank"), _KIND_OF_SUFFIX[suffix])


def path_rank(path: str | os.PathLike[str]) -> int | None:
    """The rank a per-rank path names: our layout or an ``--output-filename`` tree."""
    text = _posix(path)
    fields = _pattern("HOROVOD_LAYOUT_PATH").search(text) or _pattern("HOROVOD_RANK_FILE_PATH").search(text)
    return fields.get("rank") if fields else None


def tree_of(path: str | os.PathLike[str]) -> str | None:
    """The directory holding the ``rank.<r>/`` folders of an ``--output-filename`` path (the job's tree)."""
    text = _posix(path)
    found = _pattern("HOROVOD_RANK_FILE_PATH").regex.search(text)
    if found is None or parse_path(text) is not None or "/" not in text[found.start() :]:
        return None
    return text[: found.start()] or "."


def is_log_file(path: str | os.PathLike[str]) -> bool:
    """Whether a file found under a directory is read: per-rank files, ``--output-filename``
    captures, and ``*.jsonl`` / ``*.log`` / ``*.ndjson`` (rotated ``.N`` too); not ``NOTES.txt``."""
    text = _posix(path)
    return bool(_LOG_SUFFIX.search(text) or _pattern("HOROVOD_RANK_FILE_PATH").search(text))


_COMPRESSED: Final = re.compile(r"\.(?:jsonl|log|ndjson)(?:[.-][0-9]+)?\.gz$")


def is_compressed_log(path: str | os.PathLike[str]) -> bool:
    """A log rotated and compressed (``rank-1.jsonl.3.gz``, ``rank.0/stdout.1.gz``): not read, but never skipped silently."""
    text = _posix(path)
    return text.endswith(".gz") and bool(_COMPRESSED.search(text) or is_log_file(text[:-3]))


def _compressed(path: Path, warn: Callable[[str], None]) -> None:
    warn(f"{path}: a compressed rotation, not read (decompress it, e.g. with gunzip -k, to search it)")


def console_job(path: str) -> str:
    """The job of a file whose lines name none (a console outside our layout): its
    ``--output-filename`` tree, else the file itself (as given). One rule for every reader:
    the analyses (:func:`hvdlog.documents.job_of`), ``hvdlog jobs`` and ``hvdlog import``,
    which stores it, so ``--es`` lists and reports the job under the same name. ``hvdlog run``'s
    own console (``<job>/launcher.log``) is its job's."""
    if launcher := LAUNCHER_LOG_PATH.search(_posix(path)):
        return launcher["job"]
    return tree_of(path) or path


def listed_job(path: Path, root: Path) -> str:
    """The job ``hvdlog jobs`` lists a file under: our layout's; a console's by :func:`console_job`;
    else (JSON lines outside the layout, whose events name their job: a timeline's ``.ndjson``
    beside the ranks' files) the first folder under the root, else the root's name."""
    found = parse_path(path)
    if found is not None:
        return found.job
    if not _JSON_LINES.search(path.name):
        return console_job(str(path))
    relative = path.relative_to(root).parts if root.is_dir() and path.is_relative_to(root) else ()
    return relative[0] if len(relative) > 1 else root.name


def walk(paths: Iterable[str | os.PathLike[str]], warn: Callable[[str], None]) -> Iterator[Path]:
    """Files named directly, then the log files under each named directory, in name order.

    A missing path, an unreadable directory or a gzip-compressed rotation is reported through
    ``warn`` (one sentence naming the file) and skipped; the caller decides whether that makes its exit code 2.
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found: list[Path] = []

            def unreadable(error: OSError) -> None:
                warn(f"{error.filename}: cannot read the directory ({error.strerror}); skipped")

            for directory, subdirs, files in os.walk(path, onerror=unreadable, followlinks=False):
                subdirs.sort()
                for name in files:
                    candidate = Path(directory, name)
                    if is_compressed_log(candidate):
                        _compressed(candidate, warn)
                    elif is_log_file(candidate) and _regular(candidate, warn):
                        found.append(candidate)
            yield from sorted(found)
        elif is_compressed_log(path) and path.is_file():
            _compressed(path, warn)
        elif path.exists():
            if _regular(path, warn):
                yield path
        else:
            warn(f"{path}: no such file or directory")


def _regular(path: Path, warn: Callable[[str], None]) -> bool:
    """Whether ``path`` is a regular file (or a link to one). A FIFO would block the reader for
    ever, ``/dev/zero`` would feed it without end: such a name is refused with one sentence."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False  # a dangling link, or gone since the walk: nothing to read
    if stat.S_ISREG(mode):
        return True
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
    warn(f"{path}: {kind}, not a regular file; not read")
    return False


_LAYOUT_NATIVE: Final = re.compile(r"^rank-(\d+)\.(stdout|stderr)\.log(?:\.\d+)?$")
_TREE_FILE: Final = re.compile(r"(?:^|/)rank\.(\d+)/(stdout|stderr)$")
_P = TypeVar("_P", str, Path)


def is_launcher_log(path: str) -> bool:
    """Whether ``path`` is the ``<job>/launcher.log`` (or a rotation) that ``hvdlog run`` keeps."""
    return "launcher.log" in path and LAUNCHER_LOG_PATH.search(path.replace("\\", "/")) is not None


def without_launcher_copies(files: list[_P]) -> list[_P]:
    """``files`` (paths, or names: ``-`` is kept) without the ``--output-filename`` tree files
    (``<dir>/rank.N/stdout|stderr``) under a job directory where hvdlog's layout captured the
    same rank's stream (or its events): horovodrun writes the same native lines again there,
    plus hvdlog's console lines, whose events the ``rank-N.jsonl`` files hold. Read twice,
    every line would count twice (Filebeat ships the layout alone)."""
    paths = [Path(item) for item in files]
    captured: set[tuple[Path, int, str]] = set()
    for path in paths:
        found = _LAYOUT_NATIVE.match(path.name)
        if found is not None:  # <job>/<host>/rank-N.stream.log
            captured.add((path.parent.parent, int(found.group(1)), found.group(2)))
        elif path.name.endswith(".jsonl") and path.name.startswith("rank-") and path.name[5:-6].isdigit():
            captured.add((path.parent.parent, int(path.name[5:-6]), "stdout"))  # hvdlog's console echoes go to stdout
    if not captured:
        return files
    jobs = {job for job, _, _ in captured}
    kept = []
    for item, path in zip(files, paths, strict=True):
        tree = _TREE_FILE.search(path.as_posix())
        if tree is not None:
            rank, stream = int(tree.group(1)), tree.group(2)
            if any((job, rank, stream) in captured for job in jobs if job in path.parents):
                continue
        kept.append(item)
    return kept

"""Find Horovod timelines among the paths a user gives, whatever they are called.

A timeline can sit anywhere under a job's directory: where ``hvdlog.configure(timeline=True)``
puts it (``<root>/<job>/<host>/horovod-timeline*.json``), or wherever ``HOROVOD_TIMELINE`` or
``horovodrun --timeline-filename`` pointed. Files are recognised by their first bytes (a
Chrome-trace array), not by name. Our per-rank files are never opened for this.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from hvdlog.layout import parse_path
from hvdlog.timeline_format.reader import looks_like_timeline

__all__ = ["find_timelines", "job_of_timeline"]

#: Suffixes worth sniffing; Horovod does not impose one, so files without a suffix are sniffed too.
_SKIP_SUFFIXES = (".jsonl", ".log", ".gz", ".pt", ".pth", ".ckpt", ".bin", ".npy", ".tar", ".zip")


def _candidates(path: Path) -> Iterable[Path]:
    if path.is_file():
        yield path
        return
    for directory, _dirs, files in os.walk(path):
        for name in files:
            candidate = Path(directory) / name
            if parse_path(candidate) is not None or name.endswith(_SKIP_SUFFIXES) or "rank." in directory:
                continue
            yield candidate


def job_of_timeline(path: Path) -> str | None:
    """The job a timeline belongs to: the directory holding ``<host>/rank-*.jsonl`` (elastic jobs:
    ``pid-*.jsonl``) at or above it."""
    for directory in (path.parent, *path.parent.parents)[:3]:
        if any(any(directory.glob(f"*/{name}-*.jsonl{rotated}")) for name in ("rank", "pid") for rotated in ("", ".*")):
            return directory.name
        if directory.parent == directory:
            break
    return None


def find_timelines(paths: Iterable[str | Path]) -> dict[str | None, list[Path]]:
    """Timeline files by job (None when no job directory is above them), oldest segment first."""
    found: dict[str | None, list[Path]] = {}
    for raw in paths:
        for candidate in _candidates(Path(raw)):
            if looks_like_timeline(candidate):
                found.setdefault(job_of_timeline(candidate.resolve()), []).append(candidate)
    for files in found.values():
        files.sort(key=lambda p: (_mtime(p), p.name))
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0

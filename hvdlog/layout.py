"""Where per-rank files live: ``<root>/<job>/<host>/rank-<rank>.<kind>``.

This path is a contract with Filebeat (which derives job, host and rank from it) and
with ``hvdlog`` over files; keep it stable. ``<kind>`` is ``jsonl`` for our events,
``stdout.log`` / ``stderr.log`` for the rank's native output.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ["DEFAULT_ROOT", "KINDS", "PATH_PATTERN", "RankFile", "parse_path", "rank_file", "safe_job_id"]

#: Used when neither ``configure(root=...)`` nor ``HVDLOG_ROOT`` says otherwise.
DEFAULT_ROOT: Final = "hvdlog-logs"

#: File suffix per content kind.
KINDS: Final = {"events": "jsonl", "stdout": "stdout.log", "stderr": "stderr.log"}

#: Matches the tail of a per-rank path; rotated files end in ``.1``, ``.2``...
PATH_PATTERN: Final = re.compile(
    r"(?:^|/)(?P<job>[^/]+)/(?P<host>[^/]+)/rank-(?P<rank>\d+)\.(?P<suffix>jsonl|stdout\.log|stderr\.log)(?:\.\d+)?$"
)


_JOB_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_job_id(job: str) -> str:
    """``job`` as one path component: unsafe runs become ``-``; never starting with ``-`` or
    ``.`` (``python -c`` would give ``-c-...``, an option to every tool; ``..`` a parent)."""
    return _JOB_UNSAFE.sub("-", job).lstrip("-.") or "job"


class RankFile(NamedTuple):
    """What a per-rank path says about its content."""

    job: str
    host: str
    rank: int
    kind: str


def rank_file(root: str | Path, job: str, host: str, rank: int, kind: str = "events") -> Path:
    """The path of one rank's file of one kind."""
    return Path(root) / job / host / f"rank-{rank}.{KINDS[kind]}"


def parse_path(path: str | Path) -> RankFile | None:
    """Job, host, rank and kind from a per-rank path, or None when it is not one."""
    match = PATH_PATTERN.search(str(path).replace("\\", "/"))
    if not match:
        return None
    kind = {suffix: kind for kind, suffix in KINDS.items()}[match["suffix"]]
    return RankFile(match["job"], match["host"], int(match["rank"]), kind)

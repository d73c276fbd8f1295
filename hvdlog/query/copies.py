"""The launcher's console read beside the ranks' own files: each line of a rank once.

``hvdlog run`` keeps horovodrun's console in ``<job>/launcher.log``. Outside elastic jobs it
holds every worker's output again, tagged ``[r]<stream>:``: the native lines rank r's capture
also wrote to ``rank-r.stdout|stderr.log``, and hvdlog's console echo of each of its events
(``HH:MM:SS.mmm LEVEL    [rank r step s] message``), which ``rank-r.jsonl`` holds. Read as one
job, every line of a rank counted twice: ``grep --rank 0`` showed ``Horovod initialized`` twice
and each event once more as its echo.

A tagged document of a launcher log is a copy when the same job's rank has a document of its
own files saying the same within :data:`COPY_WINDOW_S` (the console gets it later, through
horovodrun). Each of those documents pairs with one copy, so a line printed twice stays twice.
What only the console holds stays: a rank that never started hvdlog, what a rank printed before
its capture began, the shell's ``Terminated`` after a SIGTERM. The launcher's own lines (no
tag) are never copies.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from collections.abc import Collection, Hashable
from typing import Final

from hvdlog.documents import Document, get_field, job_of, rank_of, timestamp_millis
from hvdlog.layout import is_launcher_log

__all__ = ["COPY_WINDOW_S", "FollowedCopies", "drop_launcher_copies", "is_copy_of"]

#: How far apart (s) a rank's own document and the console's copy may be (arrival times: the
#: copy passes the launcher, a loaded node delays it).
COPY_WINDOW_S: Final = 30.0
#: hvdlog's console echo of an event (hvdlog/runtime/config.py ``_console_sink``): its message.
_ECHO: Final = re.compile(r"\d\d:\d\d:\d\d\.\d{3} [A-Z]+ *\[rank (?:\d+|-)(?: step -?\d+)?\] (?P<message>.*)", re.DOTALL)

_Key = tuple[Hashable, ...]


def _said(doc: Document) -> str:
    message = doc.get("message")
    return message if isinstance(message, str) else ""


def _copy_key(doc: Document) -> _Key | None:
    """(job, rank, message) of a rank's tagged line in a launcher log; None for anything else."""
    rank = rank_of(doc)
    path = get_field(doc, "log.file.path")
    if rank is None or not isinstance(path, str) or not is_launcher_log(path) or get_field(doc, "horovod.launcher.format") is None:
        return None
    said = _said(doc)
    echo = _ECHO.fullmatch(said)
    return job_of(doc), rank, echo["message"] if echo else said


def is_copy_of(doc: Document, ranks: Collection[int]) -> bool:
    """Whether ``doc`` is a launcher log's tagged line of one of ``ranks``, whose own files are
    read too. ``jobs`` reads only those files' ends, so it cannot pair a copy with its original;
    counted as the rank's, a copy's arrival time (a stall report's echo) was newer than the
    report itself, and a hung job read as running."""
    key = _copy_key(doc)
    return key is not None and key[1] in ranks


def _original_key(doc: Document) -> _Key | None:
    """(job, rank, message) of a rank's document from its own files (not a launcher log); None else."""
    rank = rank_of(doc)
    if rank is None or is_launcher_log(str(get_field(doc, "log.file.path") or "")):
        return None
    return job_of(doc), rank, _said(doc)


def _without(docs: list[Document], dropped: set[int]) -> list[Document]:
    return [doc for index, doc in enumerate(docs) if index not in dropped] if dropped else docs


def drop_launcher_copies(docs: list[Document], window: float = COPY_WINDOW_S) -> list[Document]:
    """``docs`` (sorted) without the launcher log's copies of what the ranks' own files say."""
    copies = {index: key for index, doc in enumerate(docs) if (key := _copy_key(doc)) is not None}
    if not copies:
        return docs
    wanted = set(copies.values())
    messages = {key[2] for key in wanted}
    originals: dict[_Key, list[int]] = {}  # key -> times (ms; untimed as -1) of the ranks' own documents
    for doc in docs:
        # the message test first: most documents say nothing the console repeated
        if _said(doc) in messages and (key := _original_key(doc)) in wanted:
            originals.setdefault(key, []).append(_millis(doc))
    window_ms = int(window * 1000)
    return _without(docs, {index for index, key in copies.items() if _pair(originals.get(key), _millis(docs[index]), window_ms)})


class FollowedCopies:
    """:func:`drop_launcher_copies` for followed files, batch by batch (``grep -f``): the ranks'
    own documents of the last ``window`` seconds are remembered, since the console's copy, which
    passes through the launcher, often arrives a poll after the rank's own line. A copy that
    arrives a poll *before* its original is shown (it cannot be known for one yet)."""

    def __init__(self, window: float = COPY_WINDOW_S) -> None:
        #: Whether a launcher log is among the followed files (until then nothing is remembered).
        self.active = False
        self._window_ms = int(window * 1000)
        self._originals: dict[_Key, list[int]] = {}
        self._seen: deque[tuple[int, _Key]] = deque()  # (time, key) in arrival order, to forget them

    def batch(self, docs: list[Document]) -> list[Document]:
        """One poll's documents (sorted) without the copies of what the ranks' own files said
        (in this poll, in either order, or in the polls of the last window)."""
        if not self.active:
            return docs
        copies, newest = {}, -1
        for index, doc in enumerate(docs):
            at = _millis(doc)
            newest = max(newest, at)
            if (key := _copy_key(doc)) is not None:
                copies[index] = (key, at)
            elif at >= 0 and (key := _original_key(doc)) is not None:
                bisect.insort(self._originals.setdefault(key, []), at)
                self._seen.append((at, key))
        dropped = {index for index, (key, at) in copies.items() if _pair(self._originals.get(key), at, self._window_ms)}
        self._forget(newest - self._window_ms)
        return _without(docs, dropped)

    def _forget(self, before: int) -> None:
        """Drop the remembered documents older than ``before`` (ms), and what was paired already."""
        while self._seen and self._seen[0][0] < before:
            at, key = self._seen.popleft()
            times = self._originals.get(key)
            if times and at in times:
                times.remove(at)
            if not times:
                self._originals.pop(key, None)


def _millis(doc: Document) -> int:
    millis = timestamp_millis(doc.get("@timestamp"))
    return -1 if millis is None else millis


def _pair(times: list[int] | None, at: int, window_ms: int) -> bool:
    """Take the original nearest ``at`` within the window (any, where either has no time) out of
    ``times`` (sorted: the documents came in time order); whether there was one."""
    if not times:
        return False
    if at < 0 or times[0] < 0:
        times.pop(0)
        return True
    index = bisect.bisect_left(times, at)
    nearest = min((i for i in (index - 1, index) if 0 <= i < len(times)), key=lambda i: abs(times[i] - at))
    if abs(times[nearest] - at) > window_ms:
        return False
    times.pop(nearest)
    return True

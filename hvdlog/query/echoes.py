"""One uncaught exception, one event: drop the native traceback that echoes hvdlog's own event.

In hvdlog's layout an uncaught exception is recorded twice: hvdlog's hook writes a structured
``uncaught_exception`` event (with step, job, host) to ``rank-N.jsonl``, and Python prints the
same traceback to stderr, which the tee captures in ``rank-N.stderr.log`` (a process without a
rank: ``rank-unknown-pidP.*``, told apart by host and pid). Both are kept as
documents (nothing is dropped at parse time), but ``grep`` and ``first-failure`` show the
exception once: the structured event stays, the native traceback with the same rank, job,
exception type and message goes (rank, or for a rank-unknown process host and pid). Natives without such an event (a rank without hvdlog, an
exception hvdlog could not see) are never touched.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Final

from hvdlog.documents import Document, get_field, job_of, timestamp_millis
from hvdlog.fields import APP_DATASET

__all__ = ["ECHO_WINDOW_S", "drop_echoes"]

#: How far apart (s) the event and the captured traceback may be when both have a time.
ECHO_WINDOW_S: Final = 10.0

#: (job, which process, short exception type, message).
_Key = tuple[Any, Any, str, str]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _process(doc: Document) -> object:
    """The process a document is from: its rank, or for a rank-unknown one its host and pid; None when neither is known."""
    rank = doc.get("rank")
    if _is_int(rank):
        return rank
    pid, host = get_field(doc, "process.pid"), get_field(doc, "host.name")
    return ("pid", host, pid) if _is_int(pid) and isinstance(host, str) else None


def _key(doc: Document) -> _Key | None:
    """(job, process, short exception type, message) of an exception document; None for anything else."""
    if "error" not in doc and "error.type" not in doc:  # most documents: what get_field would say, sooner
        return None
    error_type, process = get_field(doc, "error.type"), _process(doc)
    if not isinstance(error_type, str) or process is None:
        return None
    message = " ".join(str(get_field(doc, "error.message") or "").split())
    return job_of(doc), process, error_type.rsplit(".", 1)[-1], message


def _is_event(doc: Document) -> bool:
    action: object = get_field(doc, "event.action")
    return action == "uncaught_exception"


def _close(a: int | None, b: int | None, window_ms: int) -> bool:
    return a is None or b is None or abs(a - b) <= window_ms


def drop_echoes(docs: Iterable[Document], window: float = ECHO_WINDOW_S) -> Iterator[Document]:
    """``docs`` (in sort order) without native tracebacks that repeat an ``uncaught_exception`` event.

    Streams: a candidate traceback (and what follows it) is held only until its event shows
    up or the stream moves ``window`` seconds past it; an untimed candidate waits for the end.
    """
    window_ms = int(window * 1000)
    events: dict[_Key, list[int | None]] = {}
    held: deque[list[Any]] = deque()  # [doc, key or None, millis, dropped]
    waiting = 0
    for doc in docs:
        key = _key(doc)
        if key is None and not held:
            yield doc  # the common case: no exception, nothing held back (its time is not needed)
            continue
        millis = timestamp_millis(doc.get("@timestamp"))
        if key is not None and _is_event(doc):
            events.setdefault(key, []).append(millis)
            for entry in held:
                if entry[1] == key and not entry[3] and _close(entry[2], millis, window_ms):
                    entry[3], waiting = True, waiting - 1
        elif key is None or get_field(doc, "event.dataset") == APP_DATASET:
            pass  # only captured native output can echo an event
        elif any(_close(at, millis, window_ms) for at in events.get(key, ())):
            continue  # the event came first: this is its echo
        else:
            held.append([doc, key, millis, False])
            waiting += 1
            continue
        if not held:
            yield doc
            continue
        held.append([doc, None, millis, False])
        for entry in held:  # a timed candidate whose window has passed is no echo
            if entry[1] is not None and not entry[3] and entry[2] is not None and millis is not None and millis - entry[2] > window_ms:
                entry[1], waiting = None, waiting - 1
        while held and (held[0][1] is None or held[0][3]):
            entry = held.popleft()
            if not entry[3]:
                yield entry[0]
    for entry in held:
        if not entry[3]:
            yield entry[0]

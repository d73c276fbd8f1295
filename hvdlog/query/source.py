"""The one interface every place events come from implements, and merging several of them.

A source yields nested documents (the shape Elasticsearch stores) that match a
:class:`~hvdlog.query.spec.Filter`, in :func:`~hvdlog.documents.sort_key` order, so the
CLI never knows whether it reads files or Elasticsearch. A source that cannot deliver at all
raises :class:`SourceError`; one that loses only part of its input (an unreadable file)
reports it through ``on_warning`` and goes on.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Protocol

from hvdlog.documents import sort_key
from hvdlog.query.spec import Filter
from hvdlog.types import Document, Warn

__all__ = ["Source", "SourceError", "Warn", "failure_text", "merged", "stderr_warn"]

#: Callback for partial failures: one sentence, printed on stderr by the CLI.


class SourceError(RuntimeError):
    """A source could not deliver anything; the message says what to check."""


class Source(Protocol):
    """Files or Elasticsearch, behind one face."""

    label: str

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """Every matching document (or the ``last`` N), in sort-key order."""

    def follow(self, spec: Filter, interval: float, *, from_start: bool = False, wait: bool = False) -> Iterator[Document]:
        """Matching documents that appear from now on (polling every ``interval`` seconds);
        ``from_start``: what is there first; ``wait``: no input yet is not an error."""


def stderr_warn(message: str) -> None:
    """Default warning sink."""
    import sys

    print(f"hvdlog: warning: {message}", file=sys.stderr)


def failure_text(label: str, exc: BaseException) -> str:
    """``label: exc``, without the label when the sentence already names the source (an
    Elasticsearch error names its URL: said twice per line otherwise)."""
    text = str(exc)
    where = label.split(" ", 1)[-1]
    return text if " " in label and where in text else f"{label}: {text}"


def _guarded(source: Source, stream: Iterator[Document], failures: list[str], warn: Warn) -> Iterator[Document]:
    try:
        yield from stream
    except SourceError as exc:
        failures.append(f"{source.label}: {exc}")
        warn(failure_text(source.label, exc))


def merged(
    sources: Sequence[Source], spec: Filter, failures: list[str], warn: Warn = stderr_warn
) -> Iterator[Document]:
    """All sources' matches in one sorted stream; a failing source is reported, the rest kept."""
    streams = [_guarded(source, source.search(spec), failures, warn) for source in sources]
    return streams[0] if len(streams) == 1 else heapq.merge(*streams, key=sort_key)

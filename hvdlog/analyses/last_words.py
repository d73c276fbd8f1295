"""Evidence whose meaning the rest of the logs decide (docs/failure-model.md, "First failure").

Two kinds of evidence do not say on their own whether they are a rank's failure:

* a receive timeout (Gloo's ``Timed out waiting 30000ms for recv operation to complete``) is a
  survivor's reaction when a peer failed before it; when no other rank shows any failure before
  it, nothing else explains it, and the timed-out rank's own line is the best evidence of what
  happened (a first step that outlasted Gloo's timeout);
* NCCL's ``WARN`` line, and the ``file.cc:N -> 2`` lines that unwind its error, are a failure only
  when they end the rank's output: NCCL also warns and unwinds when it falls back from InfiniBand
  to sockets, and then goes on.

The second needs a fact the failure evidence does not hold: what each rank printed last.
:class:`LastWords` folds a rank's documents, in order, into it (the WARN that opens the error
chain the rank's output ends in); :func:`find_last_words` reads it from a source, only for the
ranks that have a WARN. Neither reading is ever ``certain``: each rests on what the logs lack (a
timeout is at most ``likely``; a WARN, a warning no failure line confirms, at most ``possible``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from hvdlog.analyses.failure_evidence import CHAIN_KINDS, Evidence
from hvdlog.analyses.resets import epoch_of
from hvdlog.documents import Document, get_field, job_of
from hvdlog.parse.evidence_rules import KIND
from hvdlog.parse.patterns import compile_pattern
from hvdlog.query.spec import Filter

__all__ = ["CHAIN_KINDS", "LastWords", "find_last_words", "read_in_context", "why_read"]

#: (job, rank): whose last words.
Key = tuple[Any, int]

_TIMEOUT: Final = compile_pattern("HVDLOG_EVIDENCE_TIMEOUT")
#: A rank's own end records (its exit, a signal it caught): how it ended, not a sign that it went on.
_ENDS: Final = frozenset({"process_exit", "launcher_exit", "signal"})


def _rank(doc: Document) -> int | None:
    rank = doc.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


class LastWords:
    """Per (job, rank), fed the rank's documents in order: the NCCL WARN that opens the error chain
    its output ends in (a WARN, then only its ``-> N`` unwinding, blank lines or end records)."""

    def __init__(self) -> None:
        self._runs: dict[Key, tuple[bool, Document | None]] = {}

    def add(self, doc: Document) -> None:
        """Fold one document of a rank (others are ignored)."""
        rank = _rank(doc)
        if rank is None or get_field(doc, "event.action") in _ENDS:
            return
        key = (job_of(doc), rank)
        kind = get_field(doc, KIND)
        in_chain, opened = self._runs.get(key, (False, None))
        if kind == "nccl_warn":
            self._runs[key] = (True, opened if in_chain and opened is not None else doc)
        elif kind == "nccl_unwind":
            self._runs[key] = (True, opened if in_chain else None)
        elif str(doc.get("message") or "").strip():
            self._runs[key] = (False, None)  # anything else it printed: it went on

    def chain_ends(self) -> dict[Key, Document]:
        """The ranks whose output ends in an NCCL error chain, with the WARN that opens it."""
        return {key: opened for key, (in_chain, opened) in self._runs.items() if in_chain and opened is not None}


def find_last_words(search: Callable[[Filter], Iterable[Document]], docs: Iterable[Document], base: Filter) -> dict[Key, Document]:
    """:meth:`LastWords.chain_ends` of the ranks that have an NCCL WARN among ``docs`` (their
    failure evidence), from each such rank's documents read from ``search`` (none: no read)."""
    keys: dict[Key, bool] = {}
    for doc in docs:
        if get_field(doc, KIND) == "nccl_warn" and (rank := _rank(doc)) is not None:
            key = (job_of(doc), rank)
            keys[key] = keys.get(key, False) or doc.get("job") == key[0]  # the job is a field it can be searched by
    words = LastWords()
    for (job, rank), by_field in keys.items():
        spec = replace(base, any_of=(), ranks=frozenset({rank}), jobs=(job,) if by_field else base.jobs,
                       min_level=None, pattern=None, tags=(), steps=None)
        for doc in search(spec):
            if job_of(doc) == job:
                words.add(doc)
    return words.chain_ends()


def _ident(doc: Document) -> tuple[Any, ...]:
    return doc.get("message"), doc.get("@timestamp"), get_field(doc, "log.file.path")


def _lone_timeout(item: Evidence, items: list[Evidence], quiet: Iterable[tuple[int | None, int]]) -> bool:
    """A rank's own receive timeout with no other rank's failure (or death) before it, and no peer that
    died or went quiet without a line of evidence (``quiet``: (epoch or None for any, rank))."""
    if item.kind != "peer_loss" or not item.own or item.rank is None:
        return False
    if _TIMEOUT.regex.search(str(item.doc.get("message") or "")) is None:
        return False
    mine = (epoch_of(item.doc), item.rank)
    if any(rank != item.rank and epoch in (None, mine[0]) for epoch, rank in quiet):
        return False  # a peer vanished at an elastic reset, or left no evidence at all: the timeout waited for it
    return not any(
        other.order < item.order and other.meaning in ("fault", "consequence")
        and (other.rank is None or (epoch_of(other.doc), other.rank) != mine)
        for other in items
    )


def _chain_opener(items: list[Evidence], key: Key, warn: Document) -> int | None:
    """Which of ``items`` is the WARN that opens the rank's last chain (the same line; else its last WARN)."""
    job, rank = key
    same = [index for index, item in enumerate(items) if item.kind == "nccl_warn" and item.rank == rank and job_of(item.doc) == job]
    exact = [index for index in same if _ident(items[index].doc) == _ident(warn)]
    found = exact or same
    return found[-1] if found else None


def read_in_context(items: list[Evidence], last_words: Mapping[Key, Document] | None,
                    quiet: Iterable[tuple[int | None, int]] = ()) -> list[Evidence]:
    """``items`` (one job's evidence, in order) with the two readings of the module's docstring applied;
    ``quiet``: the job's ranks with no evidence line of their own that may have died first, as (epoch, rank)
    (epoch None: any), e.g. a rank that vanished at an elastic reset."""
    quiet = list(quiet)
    out = [replace(item, read_as="fault") if _lone_timeout(item, items, quiet) else item for item in items]
    for key, warn in (last_words or {}).items():
        if (index := _chain_opener(out, key, warn)) is not None:
            out[index] = replace(out[index], read_as="fault")
    return out


def why_read(item: Evidence) -> str:
    """Why a reading of this module made ``item`` a fault, for a reasoning line ("" when none did)."""
    if item.read_as != "fault":
        return ""
    if item.kind == "nccl_warn":
        return "; NCCL's error chain is the rank's last output: it did not go on after it"
    return "; no other rank failed before this timeout: nothing else in the logs explains it"

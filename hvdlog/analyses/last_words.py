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
ranks that have a WARN, and of those only from their last chain's WARN on and until they are seen to go
on (a rank that printed one WARN early in a week-long job is not read whole). Neither reading is ever ``certain``: each rests on what the logs lack (a
timeout is at most ``likely``; a WARN, a warning no failure line confirms, at most ``possible``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from hvdlog.analyses.failure_evidence import CHAIN_KINDS, Evidence
from hvdlog.analyses.resets import epoch_of
from hvdlog.documents import Document, get_field, job_of, rank_of, timestamp_millis
from hvdlog.parse.evidence_rules import KIND
from hvdlog.parse.patterns import compile_pattern
from hvdlog.query.spec import Filter

__all__ = ["CHAIN_KINDS", "MAX_READ", "LastWords", "find_last_words", "read_in_context", "why_read"]

#: (job, rank): whose last words.
Key = tuple[Any, int]

#: Documents of one rank read from the start of its last chain on before the answer is "not decided":
#: then its WARN stays a warning, no failure (the conservative side: a fault is never named unread).
MAX_READ: Final = 10_000

_TIMEOUT: Final = compile_pattern("HVDLOG_EVIDENCE_TIMEOUT")
#: A rank's own end records (its exit, a signal it caught): how it ended, not a sign that it went on.
_ENDS: Final = frozenset({"process_exit", "launcher_exit", "signal"})
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _went_on(doc: Document) -> bool | None:
    """What one of a rank's documents says of its chain: True (anything else it printed: it went on),
    False (a WARN or its unwinding), None (nothing: a blank line, an end record)."""
    if get_field(doc, "event.action") in _ENDS:
        return None
    if get_field(doc, KIND) in CHAIN_KINDS:
        return False
    return True if str(doc.get("message") or "").strip() else None


class LastWords:
    """Per (job, rank), fed the rank's documents in order: the NCCL WARN that opens the error chain
    its output ends in (a WARN, then only its ``-> N`` unwinding, blank lines or end records)."""

    def __init__(self) -> None:
        self._runs: dict[Key, tuple[bool, Document | None]] = {}

    def add(self, doc: Document) -> None:
        """Fold one document of a rank (others are ignored)."""
        rank = rank_of(doc)
        if rank is None or (went_on := _went_on(doc)) is None:
            return
        key = (job_of(doc), rank)
        in_chain, opened = self._runs.get(key, (False, None))
        if went_on:
            self._runs[key] = (False, None)
        elif get_field(doc, KIND) == "nccl_warn":
            self._runs[key] = (True, opened if in_chain and opened is not None else doc)
        else:  # its unwinding
            self._runs[key] = (True, opened if in_chain else None)

    def opener(self, key: Key) -> Document | None:
        """The WARN that opens the chain ``key``'s output ends in so far (None: it went on, or no WARN yet)."""
        in_chain, opened = self._runs.get(key, (False, None))
        return opened if in_chain else None

    def chain_ends(self) -> dict[Key, Document]:
        """The ranks whose output ends in an NCCL error chain, with the WARN that opens it."""
        return {key: opened for key in self._runs if (opened := self.opener(key)) is not None}


@dataclass(slots=True)
class _Chain:
    """A rank's NCCL evidence, as the failure evidence (in order) shows it: the WARNs of its last run of NCCL
    evidence (after the last evidence it went on from), each with how many documents alike (:func:`_ident`)
    come up to it; ``by_field``: whether the job is a field it can be searched by."""

    warns: list[tuple[Document, int]] = field(default_factory=list)
    by_field: bool = False
    seen: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def add(self, doc: Document) -> None:
        ident = _ident(doc)
        self.seen[ident] = nth = self.seen.get(ident, 0) + 1
        if _went_on(doc):
            self.warns = []  # the evidence itself shows the rank went on after what came before
        elif get_field(doc, KIND) == "nccl_warn":
            self.warns.append((doc, nth))
            self.by_field = self.by_field or doc.get("job") is not None


def _chains(docs: Iterable[Document]) -> dict[Key, _Chain]:
    """The :class:`_Chain` of each rank that has an NCCL WARN among ``docs``."""
    chains: dict[Key, _Chain] = {}
    for doc in docs:
        if (rank := rank_of(doc)) is None:
            continue
        key = (job_of(doc), rank)
        if key in chains or get_field(doc, KIND) == "nccl_warn":
            chains.setdefault(key, _Chain()).add(doc)
    return chains


def _since(base: Filter, start: Document) -> datetime | None:
    """Where a read of a rank from ``start`` on can begin: its time (None: a WARN without a time of its own,
    or the user's ``--until``, under which the rank's untimed lines are not read: from the beginning)."""
    millis = timestamp_millis(start.get("@timestamp"))
    if millis is None or base.until is not None:
        return None
    at = _EPOCH + timedelta(milliseconds=millis)
    return at if base.since is None else max(base.since, at)


def _read_spec(base: Filter, key: Key, chain: _Chain, start: Document) -> Filter:
    """What to read of the rank: from its chain's start (:func:`_since`), with the lines that have no time
    (their place is their only time: none may be lost)."""
    spec = replace(base, any_of=(), ranks=frozenset({key[1]}), jobs=(key[0],) if chain.by_field else base.jobs,
                   min_level=None, pattern=None, tags=(), steps=None)
    if (since := _since(base, start)) is None:
        return spec
    return replace(spec, since=since, untimed=base.since is None)


def _read_from(search: Callable[[Filter], Iterable[Document]], base: Filter, key: Key, chain: _Chain, first: int) -> tuple[Document | None, int]:
    """:func:`_read` from the chain's ``first`` WARN on: the opener (or None), and 0, or the WARN to read from
    again when the rank went on before a later WARN that has a time of its own (the read until it is no answer)."""
    warns = chain.warns
    idents = [_ident(doc) for doc, _ in warns]
    wanted = set(idents)
    found = search(_read_spec(base, key, chain, warns[first][0]))
    words, seen, started, met, read = LastWords(), dict[tuple[Any, ...], int](), False, first, 0
    try:
        for doc in found:
            if job_of(doc) != key[0]:
                continue
            if (ident := _ident(doc)) in wanted:
                seen[ident] = nth = seen.get(ident, 0) + 1
                if met < len(warns) and (ident, nth) == (idents[met], warns[met][1]):
                    if not started:
                        words, started = LastWords(), True  # what came before the chain's start is decided already
                    met += 1
            words.add(doc)
            if not started:
                continue
            read += 1
            if words.opener(key) is None:  # it went on after the WARNs met so far
                if met == len(warns):
                    return None, 0  # past its last WARN: it went on
                if _since(base, warns[met][0]) is not None:
                    return None, met  # its next WARN can be read from its time
            if read >= MAX_READ:
                return None, 0  # not decided: no fault (find_last_words)
    finally:
        close = getattr(found, "close", None)
        if callable(close):
            close()  # a generator: the source's read ends here
    return words.opener(key), 0


def _read(search: Callable[[Filter], Iterable[Document]], base: Filter, key: Key, chain: _Chain) -> Document | None:
    """The WARN that opens the chain ``key``'s output ends in, read from ``search`` (find_last_words)."""
    first = 0
    while chain.warns:
        opener, again = _read_from(search, base, key, chain, first)
        if not again:
            return opener
        first = again  # always further on: the reads end
    return None


def find_last_words(search: Callable[[Filter], Iterable[Document]], docs: Iterable[Document], base: Filter) -> dict[Key, Document]:
    """:meth:`LastWords.chain_ends` of the ranks that have an NCCL WARN among ``docs`` (their failure
    evidence, in order), each read from ``search`` (none: no read) only where its answer can lie.

    ``docs`` hold every WARN and unwinding line of a rank, so its last chain can start no earlier than
    the first WARN after the last evidence it went on from; a rank whose evidence goes on after its
    last WARN is not read at all. The read begins at that WARN's time (a WARN without a time of its
    own, as in a console without times: at the rank's first document) and keeps the rank's lines
    without a time; it ends at the first line past the last WARN that is not part of the chain (before
    it, such a line sends the read on to the next WARN's time); and it gives up after :data:`MAX_READ`
    documents from a chain's start: the WARN then stays a warning, not a failure (the conservative side).
    """
    words: dict[Key, Document] = {}
    for key, chain in _chains(docs).items():
        if (opener := _read(search, base, key, chain)) is not None:
            words[key] = opener
    return words


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

"""Stall episodes from Horovod's stall inspector and from our per-rank watchdog.

Both report a stall repeatedly while it lasts; an *episode* is one stretch of such reports.
Inspector warnings (rank 0 only) name the missing ranks and tensors directly. Watchdog
events come from every rank that stopped making progress: a rank waiting inside a Horovod
collective is a victim, a rank stuck outside any collective is the culprit, and ranks of
the job that never reported while others waited are missing too. Under a DistributedOptimizer
the watchdog also names the tensors each rank waits for and those it has not submitted: a
rank that has not submitted a tensor another rank waits for is missing. An episode ends with a
``stall_resolved`` from every stalled rank, or — if it never resolves — in shutdown when
the job then fails (an error, a signal, or Horovod's own "Will shutdown").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Final

from hvdlog.documents import Document, get_field, job_of, sort_key, timestamp_millis
from hvdlog.fields import level_at_least
from hvdlog.query.spec import MAX_JOB_SIZE, Condition, Filter

__all__ = ["STALL_EVENTS", "StallEpisode", "find_stalls", "names_in", "progress_filter", "ranks_in", "stall_episodes"]

#: What the analysis needs from a source: stall reports and anything that ends a job.
STALL_EVENTS: Final = (
    Condition("horovod.stall.source"),
    Condition("horovod.stall.missing_ranks"),
    Condition("event.action", ("stall", "stall_resolved", "signal", "uncaught_exception")),
    Condition("log.level", min_level="error"),
)


@dataclass
class StallEpisode:
    """One stall, from first report to resolution or shutdown."""

    source: str
    job: str | None
    start: str | None
    end: str | None
    duration_s: float
    missing_ranks: list[int] = field(default_factory=list)
    waiting_ranks: list[int] = field(default_factory=list)
    tensors: list[str] = field(default_factory=list)
    unsubmitted_tensors: list[str] = field(default_factory=list)
    unsubmitted_ranks: list[int] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    step: int | None = None
    reports: int = 0
    resolved: bool = False
    shutdown: bool = False
    _start_ms: int = 0
    _last_ms: int = 0
    _stalled: set[int] = field(default_factory=set)
    _stalled_steps: dict[int, int] = field(default_factory=dict)
    _culprits: set[int] = field(default_factory=set)
    _waits: dict[int, set[str]] = field(default_factory=dict)
    _unsubmitted: dict[int, dict[str, None]] = field(default_factory=dict)
    _size: int | None = None
    #: Reports without a time (Horovod before 0.16, HOROVOD_LOG_HIDE_TIME): placed by position.
    _untimed: bool = False
    _last_index: int = 0

    def to_json(self) -> dict[str, Any]:
        """The public fields, for ``--json``."""
        return {key: value for key, value in asdict(self).items() if not key.startswith("_")}


def ranks_in(value: Any) -> list[int]:
    """The ranks a stall field holds: Elasticsearch stores a one-element list as a scalar, and
    values of another type (a ``"0,1"`` string, a nested object) name no rank we can trust."""
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, int) and not isinstance(item, bool)]


def names_in(value: Any) -> list[str]:
    """The tensor names a stall field holds: a scalar name is one name; anything not a string is ignored."""
    items = value if isinstance(value, list) else [value]
    return [item for item in items if isinstance(item, str)]


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _iso(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _is_failure(doc: Document) -> bool:
    return get_field(doc, "event.action") in ("signal", "uncaught_exception") or (
        level_at_least(str(get_field(doc, "log.level") or "info"), "error") and get_field(doc, "horovod.stall.source") is None
    )


def _open(source: str, doc: Document, millis: int) -> StallEpisode:
    seconds = _seconds(get_field(doc, "horovod.stall.seconds"))
    start = millis - int(seconds * 1000)
    return StallEpisode(source, job_of(doc), _iso(start), None, 0.0, _start_ms=start, _last_ms=millis)


def _add(episode: StallEpisode, doc: Document, millis: int) -> None:
    episode.reports += 1
    episode._last_ms = millis
    size = doc.get("size")
    if isinstance(size, int) and 0 < size <= MAX_JOB_SIZE:  # bounded: see MAX_JOB_SIZE
        episode._size = size
    for name in names_in(get_field(doc, "horovod.stall.tensors")):
        if name not in episode.tensors:
            episode.tensors.append(name)
    if isinstance(step := doc.get("step"), int):
        episode.step = step if episode.step is None else min(episode.step, step)
    if get_field(doc, "horovod.stall.shutdown"):
        episode.shutdown = True
    missing = ranks_in(get_field(doc, "horovod.stall.missing_ranks"))
    episode.missing_ranks = sorted(set(episode.missing_ranks) | set(missing))


def _add_watchdog(episode: StallEpisode, doc: Document, millis: int) -> None:
    _add(episode, doc, millis)
    rank = doc.get("rank")
    if not isinstance(rank, int):
        return
    if rank not in episode._stalled:  # the step it stalled at (a later report of the same stall repeats it)
        step = doc.get("step")
        episode._stalled_steps[rank] = step if isinstance(step, int) else -1
    episode._stalled.add(rank)
    episode._waits.setdefault(rank, set()).update(names_in(get_field(doc, "horovod.stall.tensors")))
    episode._unsubmitted.setdefault(rank, {}).update(dict.fromkeys(names_in(get_field(doc, "horovod.stall.unsubmitted_tensors"))))
    operation = get_field(doc, "horovod.stall.operation")
    if operation and rank in episode._culprits:
        # It stalled outside any collective (its first report); a later report from inside one
        # is the same rank having moved on into the step's allreduce, not a rank that waits.
        return
    if operation:
        if rank not in episode.waiting_ranks:
            episode.waiting_ranks = sorted({*episode.waiting_ranks, rank})
        if isinstance(operation, str) and operation not in episode.operations:
            episode.operations.append(operation)
    else:
        episode._culprits.add(rank)


def _blame_unsubmitted(episode: StallEpisode) -> set[int]:
    """Ranks that never submitted a tensor another rank waits for; fills ``unsubmitted_*``."""
    blamed: dict[str, None] = {}
    for rank, unsubmitted in episode._unsubmitted.items():
        needed = set().union(*(waits for other, waits in episode._waits.items() if other != rank))
        if names := [name for name in unsubmitted if name in needed]:
            episode.unsubmitted_ranks.append(rank)
            blamed.update(dict.fromkeys(names))
    episode.unsubmitted_tensors = list(blamed)
    episode.unsubmitted_ranks.sort()
    return set(episode.unsubmitted_ranks)


def _finish(episode: StallEpisode, failures: list[tuple[int, Document]], failed_at: list[int]) -> StallEpisode:
    if episode._untimed:  # no times: a failure later in the stream ends it in shutdown
        episode.shutdown = episode.shutdown or any(index > episode._last_index for index in failed_at)
        return episode
    if episode.source == "watchdog":
        missing = (set(episode._culprits) - set(episode.waiting_ranks)) | _blame_unsubmitted(episode)
        if episode._size and episode.waiting_ranks:
            reporting = set(episode.waiting_ranks) | episode._culprits
            missing |= set(range(episode._size)) - reporting
        episode.missing_ranks = sorted(set(episode.missing_ranks) | missing)
    end = episode._last_ms
    if not episode.resolved:
        after = [millis for millis, doc in failures if millis >= episode._start_ms]
        if after:
            episode.shutdown = True
            end = max(end, after[0])
    episode.end = _iso(end)
    episode.duration_s = round((end - episode._start_ms) / 1000, 3)
    return episode


def _progressed(episode: StallEpisode | None, doc: Document) -> bool:
    """A stalled rank logged a later step: it made progress even if its watchdog had no time to say so."""
    if episode is None:
        return False
    rank, step = doc.get("rank"), doc.get("step")
    stalled_at = episode._stalled_steps.get(rank) if isinstance(rank, int) else None
    return isinstance(step, int) and stalled_at is not None and step > stalled_at


def _resume(current: dict[tuple[str, Any], StallEpisode], key: tuple[str, Any], rank: int, millis: int) -> None:
    """``rank`` is moving again; the episode ends when no rank is stalled any more."""
    episode = current.get(key)
    if episode is None:
        return
    episode._stalled.discard(rank)
    if not episode._stalled:
        episode.resolved, episode._last_ms = True, millis
        del current[key]


def stall_episodes(docs: Iterable[Document], merge_gap: float = 150.0) -> list[StallEpisode]:
    """Every episode, ordered by start; reports further apart than ``merge_gap`` s split episodes.

    Reports without a time are kept too (episodes with no start): consecutive ones that share
    a missing rank are one episode, ordered by their position in the stream.
    """
    gap_ms = int(merge_gap * 1000)
    episodes: list[StallEpisode] = []
    current: dict[tuple[str, Any], StallEpisode] = {}
    failures: dict[Any, list[tuple[int, Document]]] = {}
    failed_at: dict[Any, list[int]] = {}  # positions of failures, for untimed episodes
    for index, doc in enumerate(sorted(docs, key=sort_key)):
        millis = timestamp_millis(doc.get("@timestamp"))
        job = job_of(doc)
        source = get_field(doc, "horovod.stall.source")
        if source is None and get_field(doc, "horovod.stall.missing_ranks") is not None:
            source = "inspector"
        if millis is None:
            if source is None and _is_failure(doc):
                failed_at.setdefault(job, []).append(index)
            elif source is not None:
                _add_untimed(episodes, current, (source, job), doc, index)
            continue
        action = get_field(doc, "event.action")
        if source is None:
            if _is_failure(doc):
                failures.setdefault(job, []).append((millis, doc))
                failed_at.setdefault(job, []).append(index)
            elif _progressed(current.get(("watchdog", job)), doc):
                _resume(current, ("watchdog", job), doc["rank"], millis)
            continue
        key = (source, job)
        episode = current.get(key)
        if action == "stall_resolved":
            if episode is not None and isinstance(rank := doc.get("rank"), int):
                _resume(current, key, rank, millis)
            continue
        if episode is None or millis - episode._last_ms > gap_ms:
            episode = current[key] = _open(source, doc, millis)
            episodes.append(episode)
        if source == "watchdog":
            _add_watchdog(episode, doc, millis)
        else:
            _add(episode, doc, millis)
    finished = [_finish(e, failures.get(e.job, []), failed_at.get(e.job, [])) for e in episodes]
    # Untimed episodes sort first (as untimed events do), in the order they were reported.
    return sorted(finished, key=lambda episode: (not episode._untimed, episode._start_ms))


def _add_untimed(
    episodes: list[StallEpisode], current: dict[tuple[str, Any], StallEpisode], key: tuple[str, Any], doc: Document, index: int
) -> None:
    """An untimed report joins the open untimed episode when they share a missing rank; else it opens one."""
    episode = current.get(key)
    missing = set(ranks_in(get_field(doc, "horovod.stall.missing_ranks")))
    if episode is None or not episode._untimed or (missing and episode.missing_ranks and not missing & set(episode.missing_ranks)):
        episode = current[key] = StallEpisode(key[0], key[1], None, None, 0.0, _untimed=True)
        episodes.append(episode)
    _add(episode, doc, 0)
    episode._last_index = index


def progress_filter(docs: Sequence[Document], base: Filter) -> Filter | None:
    """The later steps of ranks whose watchdog stall is still open in ``docs`` (None if none is).

    A rank that moves on may die before its watchdog reports the resolution; only its later
    step events show it. Fetching just those keeps ``stalls`` from reading every step event.
    """
    still_open = [e for e in stall_episodes(docs) if e.source == "watchdog" and not e.resolved and e._stalled]
    if not still_open:
        return None
    ranks = frozenset(rank for e in still_open for rank in e._stalled)
    first_step = min(e._stalled_steps.get(rank, -1) for e in still_open for rank in e._stalled)
    start = datetime.fromtimestamp(min(e._start_ms for e in still_open) / 1000, tz=timezone.utc)
    since = max(base.since, start) if base.since else start
    # Not narrowed by job: stall_episodes matches progress to its own job anyway.
    return replace(base, ranks=ranks, since=since, steps=(first_step + 1, None), any_of=())


def find_stalls(search: Callable[[Filter], Iterable[Document]], base: Filter, merge_gap: float = 150.0) -> list[StallEpisode]:
    """Episodes from any source: stall reports and failures first, then the progress that may end them."""
    docs = list(search(replace(base, any_of=STALL_EVENTS)))
    extra = progress_filter(docs, base)
    if extra is not None:
        reports = Filter(any_of=STALL_EVENTS)
        docs += [doc for doc in search(extra) if not reports.matches(doc)]
    return stall_episodes(docs, merge_gap)

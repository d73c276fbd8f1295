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

from hvdlog.analyses.stuck_location import stuck_location
from hvdlog.documents import Document, get_field, job_of, sort_key, timestamp_millis
from hvdlog.fields import LAUNCHER_DATASET, PARSE_FAILURE_TAG, level_at_least
from hvdlog.parse.patterns import compile_pattern
from hvdlog.parse.stalls import is_continuation
from hvdlog.query.spec import MAX_JOB_SIZE, Condition, Filter

__all__ = [
    "STALL_EVENTS", "EpisodeBuilder", "StallEpisode", "find_stalls", "names_in", "progress_filter", "ranks_in", "ready_entries",
    "reporters_filter", "stall_episodes",
]

#: A legacy ``<tensor> [missing|ready ranks: ...]`` entry (the pattern file's, one source).
_OP: Final = compile_pattern("HOROVOD_STALL_OP")

#: What the analysis needs from a source: stall reports and anything that ends a job.
STALL_EVENTS: Final = (
    Condition("horovod.stall.source"),
    Condition("horovod.stall.missing_ranks"),
    Condition("event.action", ("stall", "stall_resolved", "signal", "uncaught_exception")),
    Condition("log.level", min_level="error"),
)


@dataclass
class StallEpisode:
    """One stall, from first report to resolution or shutdown (the result; :class:`EpisodeBuilder` builds it)."""

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
    #: The job size the missing ranks were computed against (None: size unknown, missing is a lower bound).
    size: int | None = None
    #: Where the size came from: ``--size``, ``events`` (the job's own), or None.
    size_source: str | None = None
    #: The membership epoch (elastic reset count) of the incarnation the stall happened in.
    epoch: int = 0
    #: Per tensor of legacy ``[ready ranks: ...]`` reports: the ranks missing from it (never a union of ready sets).
    missing_by_tensor: dict[str, list[int]] = field(default_factory=dict)
    #: Watchdog: where the stalled ranks are stuck (:func:`stuck_location`, each rank's latest report) -> ranks.
    locations: dict[str, list[int]] = field(default_factory=dict)
    #: Watchdog: the tensor sets the waiting ranks wait for, when they differ (code paths that diverged).
    wait_groups: list[dict[str, list[Any]]] = field(default_factory=list)
    #: Watchdog: ranks whose report says the native log capture process was stuck.
    capture_stuck_ranks: list[int] = field(default_factory=list)
    #: Ranks of the job with a failure of their own (an error, a signal, an uncaught exception).
    failed_ranks: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


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


def _epoch(doc: Document) -> int:
    epoch = get_field(doc, "horovod.elastic.epoch")
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0 else 0


def ready_entries(doc: Document) -> list[tuple[str, list[int]]]:
    """(tensor, ready ranks) of each ``<tensor> [ready ranks: ...]`` entry of a legacy report."""
    if get_field(doc, "horovod.stall.ready_ranks") is None:
        return []
    entries = []
    for op in _OP.finditer(str(doc.get("message") or "")):
        if op["@metadata.hvd.stall_kind"] == "ready":
            entries.append((op["@metadata.hvd.stall_tensor"], [int(r) for r in op["@metadata.hvd.stall_ranks"].replace(" ", "").split(",")]))
    return entries


class EpisodeBuilder:
    """Builds one :class:`StallEpisode` from its reports: the accumulators live here, not in the result."""

    __slots__ = ("culprits", "episode", "last_index", "last_ms", "moved_on", "ready", "reporter", "size_seen", "stalled",
                 "stalled_steps", "start_ms", "stuck_at", "unsubmitted", "untimed", "waits")

    def __init__(self, episode: StallEpisode, start_ms: int = 0, last_ms: int = 0, *, untimed: bool = False) -> None:
        self.episode = episode
        self.start_ms, self.last_ms = start_ms, last_ms
        #: Reports without a time (Horovod before 0.16, HOROVOD_LOG_HIDE_TIME): placed by position.
        self.untimed = untimed
        self.last_index = 0
        #: Untimed reports: the rank and file of the last one, and whether that rank's own output went on after it.
        self.reporter: tuple[int, Any] | None = None
        self.moved_on = False
        self.stalled: set[int] = set()
        self.stalled_steps: dict[int, int] = {}
        self.culprits: set[int] = set()
        self.waits: dict[int, set[str]] = {}
        self.unsubmitted: dict[int, dict[str, None]] = {}
        self.ready: dict[str, set[int]] = {}
        self.size_seen: int | None = None
        #: rank -> where its latest report says it is stuck.
        self.stuck_at: dict[int, str] = {}

    @classmethod
    def open(cls, source: str, doc: Document, millis: int) -> EpisodeBuilder:
        """An episode that began ``horovod.stall.seconds`` before its first report."""
        start = millis - int(_seconds(get_field(doc, "horovod.stall.seconds")) * 1000)
        return cls(StallEpisode(source, job_of(doc), _iso(start), None, 0.0, epoch=_epoch(doc)), start, millis)

    def add(self, doc: Document, millis: int) -> None:
        """A report of any source: tensors, step, shutdown, the missing ranks it names."""
        episode = self.episode
        episode.reports += 1
        self.last_ms = millis
        size = doc.get("size")
        if isinstance(size, int) and 0 < size <= MAX_JOB_SIZE:  # bounded: see MAX_JOB_SIZE
            self.size_seen = size
        for name in names_in(get_field(doc, "horovod.stall.tensors")):
            if name not in episode.tensors:
                episode.tensors.append(name)
        if isinstance(step := doc.get("step"), int):
            episode.step = step if episode.step is None else min(episode.step, step)
        if get_field(doc, "horovod.stall.shutdown"):
            episode.shutdown = True
        entries = ready_entries(doc)
        for tensor, ready in entries:
            self.ready.setdefault(tensor, set()).update(ready)
        if not entries:  # legacy ready reports: missing is computed per tensor at the end
            episode.missing_ranks = sorted(set(episode.missing_ranks) | set(ranks_in(get_field(doc, "horovod.stall.missing_ranks"))))

    def add_watchdog(self, doc: Document, millis: int) -> None:
        """A watchdog report: the rank waits inside a collective (a victim) or is stuck outside one (a culprit)."""
        self.add(doc, millis)
        rank = doc.get("rank")
        if not isinstance(rank, int):
            return
        if rank not in self.stalled:  # the step it stalled at (a later report of the same stall repeats it)
            step = doc.get("step")
            self.stalled_steps[rank] = step if isinstance(step, int) else -1
        self.stalled.add(rank)
        self.stuck_at[rank] = stuck_location(doc)
        if get_field(doc, "event.reason") == "capture_stuck" and rank not in self.episode.capture_stuck_ranks:
            self.episode.capture_stuck_ranks = sorted({*self.episode.capture_stuck_ranks, rank})
        self.waits.setdefault(rank, set()).update(names_in(get_field(doc, "horovod.stall.tensors")))
        self.unsubmitted.setdefault(rank, {}).update(dict.fromkeys(names_in(get_field(doc, "horovod.stall.unsubmitted_tensors"))))
        operation = get_field(doc, "horovod.stall.operation")
        if operation and rank in self.culprits:
            # It stalled outside any collective (its first report); a later report from inside one
            # is the same rank having moved on into the step's allreduce, not a rank that waits.
            return
        episode = self.episode
        if operation:
            if rank not in episode.waiting_ranks:
                episode.waiting_ranks = sorted({*episode.waiting_ranks, rank})
            if isinstance(operation, str) and operation not in episode.operations:
                episode.operations.append(operation)
        else:
            self.culprits.add(rank)

    def blame_unsubmitted(self) -> set[int]:
        """Ranks that never submitted a tensor another rank waits for; fills ``unsubmitted_*``."""
        episode = self.episode
        blamed: dict[str, None] = {}
        for rank, unsubmitted in self.unsubmitted.items():
            needed = set().union(*(waits for other, waits in self.waits.items() if other != rank))
            if names := [name for name in unsubmitted if name in needed]:
                episode.unsubmitted_ranks.append(rank)
                blamed.update(dict.fromkeys(names))
        episode.unsubmitted_tensors = list(blamed)
        episode.unsubmitted_ranks.sort()
        return set(episode.unsubmitted_ranks)

    def size_for(self, size: int | None) -> None:
        """The job size: ``--size``, else the job's own events; left None (size unknown) when neither says it."""
        episode = self.episode
        if size is not None:
            episode.size, episode.size_source = size, "--size"
        elif self.size_seen is not None:
            episode.size, episode.size_source = self.size_seen, "events"

    def missing_per_tensor(self, highest: int | None) -> None:
        """Legacy ready reports: each tensor's missing ranks against the size; size unknown: the ranks below
        the highest rank the job shows that are not ready (a lower bound, said as such)."""
        episode = self.episode
        upto = episode.size if episode.size is not None else (highest + 1 if highest is not None else None)
        if upto is None:
            return
        for tensor, ready in self.ready.items():
            episode.missing_by_tensor[tensor] = [rank for rank in range(upto) if rank not in ready]
        episode.missing_ranks = sorted(set(episode.missing_ranks).union(*episode.missing_by_tensor.values()))

    def finish(self, failures: list[tuple[int, Document]], failed_at: list[int], size: int | None, highest: int | None) -> StallEpisode:
        """The episode: missing ranks (per tensor, against the size), its end and duration."""
        episode = self.episode
        self.size_for(size)
        self.missing_per_tensor(highest)
        if self.untimed:  # no times: a failure later in the stream ends it in shutdown
            episode.shutdown = episode.shutdown or any(index > self.last_index for index in failed_at)
            return episode
        if episode.source == "watchdog":
            self.roll_call()
            missing = (set(self.culprits) - set(episode.waiting_ranks)) | self.blame_unsubmitted()
            if episode.size and episode.waiting_ranks:
                reporting = set(episode.waiting_ranks) | self.culprits
                missing |= set(range(episode.size)) - reporting
            episode.missing_ranks = sorted(set(episode.missing_ranks) | missing)
        end = self.last_ms
        # Any failure of a rank of the job: a rank that died just before the others stalled is the dead rank.
        episode.failed_ranks = sorted({rank for _, doc in failures if isinstance(rank := doc.get("rank"), int)})
        if not episode.resolved:
            after = [millis for millis, doc in failures if millis >= self.start_ms]
            if after:
                episode.shutdown = True
                end = max(end, after[0])
        episode.end = _iso(end)
        episode.duration_s = round((end - self.start_ms) / 1000, 3)
        return episode

    def roll_call(self) -> None:
        """Group the stalled ranks by where they are stuck, and the waiting ranks by the tensors
        they wait for (kept only when those differ): groups, never one line per rank."""
        episode = self.episode
        groups: dict[str, list[int]] = {}
        for rank in sorted(self.stuck_at):
            groups.setdefault(self.stuck_at[rank], []).append(rank)
        episode.locations = dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[1][0])))
        sets: dict[tuple[str, ...], list[int]] = {}
        for rank in episode.waiting_ranks:
            if waits := self.waits.get(rank):
                sets.setdefault(tuple(sorted(waits)), []).append(rank)
        if len(sets) > 1:
            ordered = sorted(sets.items(), key=lambda item: (-len(item[1]), item[1][0]))
            episode.wait_groups = [{"tensors": list(names), "ranks": ranks} for names, ranks in ordered]

    def progressed(self, doc: Document) -> bool:
        """A stalled rank logged a later step: it made progress even if its watchdog had no time to say so."""
        rank, step = doc.get("rank"), doc.get("step")
        stalled_at = self.stalled_steps.get(rank) if isinstance(rank, int) else None
        return isinstance(step, int) and stalled_at is not None and step > stalled_at

    def resume(self, rank: int, millis: int) -> bool:
        """``rank`` is moving again; True when no rank is stalled any more (the episode resolved)."""
        self.stalled.discard(rank)
        if self.stalled:
            return False
        self.episode.resolved, self.last_ms = True, millis
        return True


_Key = tuple[str, Any, int]


def _resume(current: dict[_Key, EpisodeBuilder], key: _Key, rank: int, millis: int) -> None:
    builder = current.get(key)
    if builder is not None and builder.resume(rank, millis):
        del current[key]


def _highest(doc: Document, highest: dict[Any, int]) -> None:
    """The highest rank a job shows (its own ranks and the ranks its reports name): a lower bound of its size."""
    ranks = ranks_in(doc.get("rank")) + ranks_in(get_field(doc, "horovod.stall.ready_ranks")) + ranks_in(get_field(doc, "horovod.stall.missing_ranks"))
    if ranks:
        job = job_of(doc)
        highest[job] = max(highest.get(job, -1), *ranks)


def _builders(docs: Iterable[Document], merge_gap: float) -> tuple[list[EpisodeBuilder], dict[str, Any]]:
    """Every episode's builder, with what finishing needs (failures, their positions, the highest ranks)."""
    gap_ms = int(merge_gap * 1000)
    builders: list[EpisodeBuilder] = []
    current: dict[_Key, EpisodeBuilder] = {}
    seen: dict[str, Any] = {"failures": {}, "failed_at": {}, "highest": {}}
    for index, doc in enumerate(sorted(docs, key=sort_key)):
        _highest(doc, seen["highest"])
        millis = timestamp_millis(doc.get("@timestamp"))
        job = job_of(doc)
        source = get_field(doc, "horovod.stall.source")
        if source is None and get_field(doc, "horovod.stall.missing_ranks") is not None:
            source = "inspector"
        if source is None and _is_failure(doc):
            seen["failed_at"].setdefault(job, []).append(index)
            if millis is not None:
                seen["failures"].setdefault(job, []).append((millis, doc))
            continue
        if millis is None:
            if source is not None:
                _add_untimed(builders, current, (source, job, _epoch(doc)), doc, index)
            else:
                _reporter_moved_on(current.get(("inspector", job, _epoch(doc))), doc)
            continue
        if source is None:
            watched = current.get(("watchdog", job, _epoch(doc)))
            if watched is not None and watched.progressed(doc):
                _resume(current, ("watchdog", job, _epoch(doc)), doc["rank"], millis)
            continue
        _add_timed(builders, current, (source, job, _epoch(doc)), doc, millis, gap_ms)
    return builders, seen


def _add_timed(builders: list[EpisodeBuilder], current: dict[_Key, EpisodeBuilder], key: _Key, doc: Document, millis: int, gap_ms: int) -> None:
    """A timed report or resolution: it joins the open episode of its source, job and epoch, or opens one."""
    builder = current.get(key)
    if get_field(doc, "event.action") == "stall_resolved":
        if builder is not None and isinstance(rank := doc.get("rank"), int):
            _resume(current, key, rank, millis)
        return
    if builder is not None and builder.untimed and not _dates(builder, doc, millis):
        builder = None
    if builder is None or millis - builder.last_ms > gap_ms or _another_stall(builder, doc):
        builder = current[key] = EpisodeBuilder.open(key[0], doc, millis)
        builders.append(builder)
    if key[0] == "watchdog":
        builder.add_watchdog(doc, millis)
    else:
        builder.add(doc, millis)


def _another_stall(builder: EpisodeBuilder, doc: Document) -> bool:
    """Whether Horovod's inspector report ``doc`` (a report's head: it says for how long) names
    tensors and missing ranks, none of them the open episode's: each report lists every tensor
    stalled at the time, so the episode's stall is over and this is a new one. On a loaded node
    a rank that lags a few seconds behind (the inspector checks every
    HOROVOD_STALL_CHECK_TIME_SECONDS) is reported right after a hang ended; merged into the
    hang, that rank was named missing beside the hung one. (Horovod 0.15 prints each further
    entry of one report as a line of its own, without the seconds: those stay in the report.)"""
    episode = builder.episode
    if episode.source != "inspector" or not episode.tensors or get_field(doc, "horovod.stall.seconds") is None:
        return False
    named = set(names_in(get_field(doc, "horovod.stall.tensors")))
    missing = set(ranks_in(get_field(doc, "horovod.stall.missing_ranks")))
    return bool(named) and not named & set(episode.tensors) and not missing & set(episode.missing_ranks)


def _dates(builder: EpisodeBuilder, doc: Document, millis: int) -> bool:
    """Whether the first timed report of a job dates the untimed episode just before it (they
    share a missing rank): a report lost its time with its header line (a capture cut or a
    terminal wrap inside the header; its ``Missing ranks:`` lines are still read), and the
    timed reports that follow are the same stall, not a second episode. The episode then
    begins as if this report had opened it."""
    missing = set(ranks_in(get_field(doc, "horovod.stall.missing_ranks")))
    if not missing & set(builder.episode.missing_ranks):
        return False
    opened = EpisodeBuilder.open(builder.episode.source, doc, millis)
    builder.untimed, builder.start_ms, builder.last_ms = False, opened.start_ms, millis
    builder.episode.start = opened.episode.start
    return True


def stall_episodes(docs: Iterable[Document], merge_gap: float = 150.0, *, size: int | None = None) -> list[StallEpisode]:
    """Every episode, ordered by start; reports further apart than ``merge_gap`` s split episodes.

    Episodes are per incarnation of an elastic job (``horovod.elastic.epoch``). ``size``: the
    job size when the user knows it; else the job's own events say it, or it is unknown (the
    missing ranks of legacy ``[ready ranks]`` reports are then a lower bound). Reports without a
    time are kept too (episodes with no start): consecutive ones that share a missing rank are
    one episode, ordered by their position in the stream, unless the reporting rank printed
    between them (``docs`` holding its lines: :func:`reporters_filter`).
    """
    builders, seen = _builders(docs, merge_gap)
    for builder in builders:
        job = builder.episode.job
        builder.finish(seen["failures"].get(job, []), seen["failed_at"].get(job, []), size, seen["highest"].get(job))
    # Untimed episodes sort first (as untimed events do), in the order they were reported.
    return [b.episode for b in sorted(builders, key=lambda builder: (not builder.untimed, builder.start_ms))]


def _add_untimed(builders: list[EpisodeBuilder], current: dict[_Key, EpisodeBuilder], key: _Key, doc: Document, index: int) -> None:
    """An untimed report joins the open untimed episode when they share a missing rank and the
    reporting rank printed nothing between them (see :func:`_reporter_moved_on`); else it opens one."""
    builder = current.get(key)
    missing = set(ranks_in(get_field(doc, "horovod.stall.missing_ranks")))
    if builder is None or not builder.untimed or builder.moved_on or (
        missing and builder.episode.missing_ranks and not missing & set(builder.episode.missing_ranks)
    ):
        builder = current[key] = EpisodeBuilder(StallEpisode(key[0], key[1], None, None, 0.0, epoch=key[2]), untimed=True)
        builders.append(builder)
    builder.add(doc, 0)
    builder.last_index = index
    rank = doc.get("rank")
    builder.reporter = (rank, get_field(doc, "log.file.path")) if isinstance(rank, int) and not isinstance(rank, bool) else None
    builder.moved_on = False


def _reporter_moved_on(builder: EpisodeBuilder | None, doc: Document) -> None:
    """An untimed print of the rank that made the open untimed episode's last report, read after
    it in the same file, ends that episode: the stall inspector runs on the coordinator, whose
    training thread waits for the stalled tensors and prints nothing until they complete; a
    Horovod report repeats every HOROVOD_STALL_CHECK_TIME_SECONDS while the stall lasts, so the
    next report after such a print is a new stall. Only that rank's lines of that file count:
    untimed lines have an order only within one file (a source gives them in read order, by
    rank), and a missing rank may well print while the others wait for it."""
    if builder is None or not builder.untimed or builder.reporter is None:
        return
    if (doc.get("rank"), get_field(doc, "log.file.path")) != builder.reporter or doc.get("rank") in builder.episode.missing_ranks:
        return
    if _printed(doc):
        builder.moved_on = True


def _printed(doc: Document) -> bool:
    """A line the training script printed: an info line of no Horovod format, no parse failure
    and no piece of a stall report (a terminal that wraps a report's line leaves its first piece
    under the rank's tag: a header's words, a broken core header, a cut rank line)."""
    if get_field(doc, "event.dataset") != LAUNCHER_DATASET or get_field(doc, "log.level") != "info" or get_field(doc, "event.action"):
        return False
    tags = doc.get("tags")
    if tags == PARSE_FAILURE_TAG or (isinstance(tags, list) and PARSE_FAILURE_TAG in tags):
        return False
    message = str(doc.get("message") or "")
    return not (message.startswith("One or more") or is_continuation(message))


def reporters_filter(docs: Sequence[Document], base: Filter) -> Filter | None:
    """The stall events and every document of the ranks that made untimed reports one episode
    holds several of (None if no episode does): whether those ranks printed between their
    reports splits such an episode (see :func:`_reporter_moved_on`). Asked only then, so a job
    with times never reads more than its stall reports; one search for both keeps the order
    of the untimed lines."""
    builders, _ = _builders(docs, 150.0)
    ranks = sorted({b.reporter[0] for b in builders if b.untimed and b.reporter is not None and b.episode.reports > 1})
    if not ranks:
        return None
    return replace(base, any_of=(*STALL_EVENTS, Condition("rank", tuple(ranks))))


def progress_filter(docs: Sequence[Document], base: Filter) -> Filter | None:
    """The later steps of ranks whose watchdog stall is still open in ``docs`` (None if none is).

    A rank that moves on may die before its watchdog reports the resolution; only its later
    step events show it. Fetching just those keeps ``stalls`` from reading every step event.
    """
    builders, _ = _builders(docs, 150.0)
    still_open = [b for b in builders if b.episode.source == "watchdog" and not b.episode.resolved and b.stalled]
    if not still_open:
        return None
    ranks = frozenset(rank for b in still_open for rank in b.stalled)
    first_step = min(b.stalled_steps.get(rank, -1) for b in still_open for rank in b.stalled)
    start = datetime.fromtimestamp(min(b.start_ms for b in still_open) / 1000, tz=timezone.utc)
    since = max(base.since, start) if base.since else start
    # Not narrowed by job: stall_episodes matches progress to its own job anyway.
    return replace(base, ranks=ranks, since=since, steps=(first_step + 1, None), any_of=())


def find_stalls(
    search: Callable[[Filter], Iterable[Document]], base: Filter, merge_gap: float = 150.0, *, size: int | None = None,
    reread: Callable[[Filter], Iterable[Document]] | None = None,
) -> list[StallEpisode]:
    """Episodes from any source: stall reports and failures first, then the progress that may end them.
    ``reread`` answers the one search ``search`` may not hold the documents for (``report``
    searches what it kept in one pass, which holds no prints): the reporting ranks' own lines
    between untimed reports."""
    docs = list(search(replace(base, any_of=STALL_EVENTS)))
    wider = reporters_filter(docs, base)
    if wider is not None:  # untimed reports: read with the reporting ranks' own lines between them
        docs = list((reread or search)(wider))
    extra = progress_filter(docs, base)
    if extra is not None:
        reports = Filter(any_of=wider.any_of if wider is not None else STALL_EVENTS)
        docs += [doc for doc in search(extra) if not reports.matches(doc)]
    return stall_episodes(docs, merge_gap, size=size)

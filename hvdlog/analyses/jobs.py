"""``hvdlog jobs``: every job under a root or in the cluster, newest activity first.

The first question on a root with hundreds of jobs, so it reads little: over files, the
layout's paths give job, host and rank, ``stat`` gives the size, the first line and the last
lines of each ``.jsonl`` give the time span, the recent step interval and the newest stall
reports, and only the failure evidence, stall reports and exit records (a needle scan) are
parsed for the status. Over Elasticsearch one aggregation by ``job`` gives the same figures
(size on disk is not per job there: "size unknown"). The status is the job model's
(:func:`hvdlog.analyses.job.build`), so ``jobs`` and ``report`` give a job the same status.
Times are the events' own: a copied folder (``cp -r``) keeps its jobs' times.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.job import build
from hvdlog.analyses.job_facts import END_EVENTS, JobFacts, iso
from hvdlog.analyses.last_words import Key, find_last_words
from hvdlog.analyses.resets import recovery_filter
from hvdlog.analyses.stalls import STALL_EVENTS, stall_episodes
from hvdlog.documents import Document, get_field, in_place, timestamp_millis
from hvdlog.fields import APP_DATASET, UNTIMED
from hvdlog.layout import is_launcher_log, listed_job, parse_path, path_rank, walk
from hvdlog.parse.bounded import MAX_LINE_BYTES
from hvdlog.parse.evidence_rules import KIND
from hvdlog.query.copies import drop_launcher_copies, is_copy_of
from hvdlog.query.spec import Condition, Filter

if TYPE_CHECKING:
    from hvdlog.query.files import FileSource

__all__ = ["NEEDED", "JobRow", "from_aggregation", "from_files", "jobs_query", "status_documents"]

#: Bytes read from the end of a file: its last lines (a few dozen events).
_TAIL: Final = 16384


@dataclass
class JobRow:
    """One job's line in ``hvdlog jobs``."""

    job: str | None
    ranks: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None
    size_bytes: int | None = None
    files: int | None = None
    status: dict[str, str] = field(default_factory=dict)
    #: The answers every view shares (:meth:`hvdlog.analyses.job.JobModel.verdict`).
    verdict: dict[str, Any] = field(default_factory=dict)
    #: Where the job was found: a directory, or the cluster's URL.
    where: str = ""

    def to_json(self) -> dict[str, Any]:
        """The fields, for ``--json``."""
        return asdict(self)


def _edge_documents(path: Path) -> list[Document]:
    """The first line and the last lines (up to :data:`_TAIL` bytes) of a ``.jsonl`` file as
    documents: its time span, its last steps (how fast it went lately) and any exit record
    at its end; empty when unreadable."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(MAX_LINE_BYTES + 1)  # bounded: one line may be a 20 GB sparse file
            start = max(handle.tell(), os.fstat(handle.fileno()).st_size - _TAIL)
            handle.seek(start)
            tail = handle.read().split(b"\n")
    except OSError:
        return []
    lines = [first, *(tail[1:] if start > len(first) else tail)]  # a cut first tail line is no document
    docs = []
    for line in lines:
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            docs.append(doc)
    return docs


def from_files(roots: Iterable[str | Path], warn: Callable[[str], None], now: float | None = None) -> list[JobRow]:
    """Every job under the roots (files named directly count as their own job)."""
    # Keyed by root too: the same job name under two roots is two runs, not one.
    groups: dict[tuple[str, str], list[Path]] = {}
    where: dict[tuple[str, str], Path] = {}
    for root in map(Path, roots):
        for path in walk([root], warn):
            key = (str(root), listed_job(path, root))
            groups.setdefault(key, []).append(path)
            where.setdefault(key, root / key[1] if root.is_dir() and (root / key[1]).is_dir() else path.parent)
    rows = [_file_row(key[1], files, str(where[key]), warn, now) for key, files in groups.items()]
    return sorted(rows, key=lambda row: row.last or "", reverse=True)


def _file_row(job: str, files: list[Path], where: str, warn: Callable[[str], None], now: float | None) -> JobRow:
    from hvdlog.query.files import FileSource

    facts = JobFacts(job)
    tails: list[Document] = []
    size = 0
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        size += stat.st_size
        if (rank := path_rank(path)) is not None:
            facts.ranks.add(rank)
        if (parsed := parse_path(path)) is not None:
            facts.hosts.add(parsed.host)
        edges = _edge_documents(path) if path.name.endswith(".jsonl") else []
        for doc in edges:  # the same facts the report folds, from the file's ends only (never the file's mtime)
            facts.add(doc)
            if not NEEDED.matches(doc):  # those are read below, once
                tails.append(doc)
    # A file outside hvdlog's layout (a console) names its ranks and times only in its lines: read it whole, once.
    loose = [path for path in files if parse_path(path) is None and not path.name.endswith(".jsonl")]
    ranks_read = set(facts.ranks)  # the ranks with files of their own: a console's lines of theirs are copies
    layout = [path for path in files if path not in loose]
    sources = [FileSource(group, warn=lambda _m: None) if group else None for group in (loose, layout)]
    console = list(sources[0].search(Filter())) if sources[0] is not None else []
    for doc in console:
        if not is_copy_of(doc, ranks_read):
            facts.add(doc)
    search = _JobFiles(sources[1], console if loose else None, files).search  # the console's documents: not read again
    needed = status_documents(search, NEEDED)
    for message in (message for source in sources if source is not None for message in source.errors):
        warn(message)  # the row says what it read; a file it could not read is named
    loose_names = {str(path) for path in loose}
    for doc in needed:  # exit records and stall reports are facts wherever they are in the file
        if get_field(doc, "log.file.path") in loose_names:
            continue  # folded above
        if Filter(any_of=END_EVENTS).matches(doc) or Filter(any_of=STALL_EVENTS[:2]).matches(doc):
            facts.add(doc)
    return _row(facts, needed + tails, size, len(files), where, now, find_last_words(search, needed, Filter()))


class _JobFiles:
    """The searches of every file of a job, as one :class:`~hvdlog.query.files.FileSource` over ``files`` gives
    them, from ``source`` (the layout's files) and ``console``: the documents of the files outside it, read
    whole (None: there are none)."""

    def __init__(self, source: FileSource | None, console: list[Document] | None, files: list[Path]) -> None:
        from hvdlog.query.files import discover

        kept = {str(path) for path in discover(files, lambda _m: None)}  # not an --output-filename copy of the layout's files
        self.source = source
        self.console = [doc for doc in console if get_field(doc, "log.file.path") in kept] if console is not None else None
        self.launcher = any(is_launcher_log(path) for path in kept)

    def search(self, spec: Filter, last: int | None = None) -> list[Document]:
        """Every match (or the ``last`` N), in the order of one read of every file."""
        found = in_place([*self._layout(spec), *(doc for doc in self.console or () if spec.matches(doc))])
        if self.launcher:  # hvdlog run's console among them: its copies of the ranks' lines once
            found = drop_launcher_copies(found)
        return found[max(len(found) - last, 0) :] if last is not None else found

    def _layout(self, spec: Filter) -> list[Document]:
        from hvdlog.query.source import SourceError

        if self.source is None:
            return []
        try:
            return list(self.source.search(spec))
        except SourceError:
            if self.console is None:
                raise
            return []  # none of the layout's files could be read, but the console was: as one read of them all


#: What the status needs beyond the files' ends: failure evidence, stall reports, exit records.
NEEDED: Final = Filter(any_of=(*FAILURE_EVENTS, *STALL_EVENTS, *END_EVENTS))


def status_documents(search: Callable[[Filter, int | None], Iterable[Document]], needed: Filter) -> list[Document]:
    """The documents the status rests on, the same over files and Elasticsearch: ``needed``, and
    for a job that reset, the last step after the reset (did it go on? ``first-failure`` asks so)."""
    docs = list(search(needed, None))
    since_reset = recovery_filter(docs, needed)
    return docs + list(search(since_reset, 1)) if since_reset is not None else docs


def _row(facts: JobFacts, docs: list[Document], size: int | None, files: int | None, where: str, now: float | None,
         words: Mapping[Key, Document] | None = None) -> JobRow:
    """The row of one job: the job model built from the documents read (the status rule is the report's);
    ``words``: the ranks' last words after an NCCL WARN (:func:`~hvdlog.analyses.last_words.find_last_words`)."""
    reports = first_failure(docs, last_words=words) if docs else []
    episodes = stall_episodes(doc for doc in docs if Filter(any_of=(*STALL_EVENTS, Condition("step"))).matches(doc))
    model = build(facts, reports[0].to_json() if reports else None, episodes, (), docs, now)
    return JobRow(
        facts.job, sorted(facts.ranks), sorted(facts.hosts), iso(facts.first_ms), iso(facts.last_ms),
        size, files, model.status, model.verdict(), where,
    )


def _step_edge(order: str) -> dict[str, Any]:
    """The earliest (``asc``) or latest (``desc``) stepped event's time and step."""
    return {"top_hits": {"size": 1, "sort": [{"@timestamp": order}], "_source": ["@timestamp", "step"]}}


def jobs_query(size: int = 10000) -> dict[str, Any]:
    """The aggregation: per job, time span, ranks, hosts, error count; newest first."""
    return {
        "jobs": {
            "terms": {"field": "job", "size": size, "order": {"timed>last": "desc"}},
            "aggs": {
                # a line's read time (UNTIMED: import's or Filebeat's) is no time of the job's
                "timed": {"filter": {"bool": {"must_not": [{"term": {UNTIMED: True}}]}},
                          "aggs": {"first": {"min": {"field": "@timestamp"}}, "last": {"max": {"field": "@timestamp"}}}},
                # over files the span is read from the events files' ends: hvdlog's own records (events, exit records) decide it here too
                "app": {"filter": {"bool": {"should": [{"term": {"event.dataset": APP_DATASET}}, {"term": {"event.action": "launcher_exit"}}]}},
                        "aggs": {"first": {"min": {"field": "@timestamp"}}, "last": {"max": {"field": "@timestamp"}}}},
                "ranks": {"terms": {"field": "rank", "size": 4096}},
                "hosts": {"terms": {"field": "host.name", "size": 256}},
                # errors, and NCCL's WARN lines (a failure when NCCL's error chain ends a rank's output)
                "errors": {"filter": {"bool": {"should": [{"terms": {"log.level": ["error", "critical"]}},
                                                          {"term": {KIND: "nccl_warn"}}]}}},
                # exit records and stall reports: the facts the status rests on (JobFacts)
                "ends": {"filter": {"terms": {"event.action": ["process_exit", "launcher_exit", "stall"]}}},
                # the newest event that is neither a stall report nor an exit record: is a stall the job's last word?
                "active": {"filter": {"bool": {"must_not": [{"terms": {"event.action": ["stall", "process_exit", "launcher_exit", "resources"]}},
                                                            {"exists": {"field": "horovod.stall.missing_ranks"}},
                                                            {"term": {UNTIMED: True}}]}},
                           "aggs": {"last": {"max": {"field": "@timestamp"}}}},
                # the stepping span, for the step interval that judges silence (JobFacts.step_seconds)
                "stepped": {"filter": {"exists": {"field": "step"}}, "aggs": {"first": _step_edge("asc"), "last": _step_edge("desc")}},
            },
        }
    }


def from_aggregation(
    response: dict[str, Any], errors_of: Callable[[str], list[Document]], where: str, now: float | None = None,
    words_of: Callable[[list[Document]], Mapping[Key, Document]] | None = None,
) -> list[JobRow]:
    """Rows from :func:`jobs_query`'s answer; ``errors_of(job)`` fetches the job's :data:`NEEDED` documents
    (only for a job with errors, exit records or stall reports); ``words_of(docs)``, the ranks' last words
    after an NCCL WARN among them (:func:`~hvdlog.analyses.last_words.find_last_words`)."""
    rows = []
    for bucket in response.get("aggregations", {}).get("jobs", {}).get("buckets", []):
        facts = JobFacts(str(bucket["key"]))
        facts.ranks = {int(b["key"]) for b in bucket["ranks"]["buckets"]}
        facts.hosts = {str(b["key"]) for b in bucket["hosts"]["buckets"]}
        span = bucket["app"] if bucket.get("app", {}).get("doc_count") else bucket["timed"]
        facts.first_ms = int(span["first"]["value"]) if span["first"].get("value") is not None else None
        facts.last_ms = int(span["last"]["value"]) if span["last"].get("value") is not None else None
        for edge in ("first", "last"):
            for hit in bucket.get("stepped", {}).get(edge, {}).get("hits", {}).get("hits", []):
                millis, step = timestamp_millis(hit["_source"].get("@timestamp")), hit["_source"].get("step")
                if millis is not None and isinstance(step, int) and not isinstance(step, bool):
                    facts.saw_step(millis, step)
        docs = errors_of(str(bucket["key"])) if bucket["errors"]["doc_count"] or bucket.get("ends", {}).get("doc_count") else []
        for doc in docs:
            if Filter(any_of=END_EVENTS).matches(doc) or Filter(any_of=STALL_EVENTS[:2]).matches(doc):
                facts.add(doc)
        active = bucket.get("active", {}).get("last", {}).get("value")
        facts.last_activity_ms = int(active) if active is not None else facts.last_activity_ms
        rows.append(_row(facts, docs, None, None, where, now, words_of(docs) if words_of is not None and docs else None))
    return rows

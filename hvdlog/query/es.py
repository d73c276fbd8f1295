"""Events from Elasticsearch, in the same shape and order as from files.

The filter becomes a bool query (:mod:`hvdlog.query.es_query`); every hit is re-checked with
:meth:`Filter.matches`, so both sources agree exactly. Pagination is ``search_after`` inside
a point in time (``_shard_doc`` breaks ties), so no page boundary drops or repeats a document.
The connection (credentials from ``HVDLOG_ES_API_KEY``, or ``HVDLOG_ES_USERNAME`` +
``HVDLOG_ES_PASSWORD``, or the URL; CA; error sentences) is :mod:`hvdlog.elastic.connection`.
"""

from __future__ import annotations

import bisect
import contextlib
import operator
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import orjson

from hvdlog.documents import Document, as_read, sort_key
from hvdlog.elastic.connection import Credentials, ElasticsearchError, connect, errors, mask_credentials
from hvdlog.query.es_query import SORT, to_query
from hvdlog.query.scope import ReadScope
from hvdlog.query.source import SourceError, Warn, stderr_warn
from hvdlog.query.spec import Filter

__all__ = ["DEFAULT_INDEX", "ElasticsearchSource"]

#: Every data stream the pipeline writes: ``logs-horovod.app-*``, ``logs-horovod.core-*``...
DEFAULT_INDEX: Final = "logs-horovod.*-*"

#: Attempts after a partial answer (a node left mid-query), and the pause before each.
_PARTIAL_RETRIES: Final = 3
_RETRY_PAUSE_S: Final = 2.0

#: Newest first; documents without a time or rank sort first ascending, so last descending.
_DESC: Final = [{key: {**value, "order": "desc", "missing": "_last"}} for item in SORT for key, value in item.items()]

#: How many sort values are the key (time, rank); ``_shard_doc`` follows, unique in one point in time.
_KEY: Final = len(SORT)
#: ``_shard_doc`` beyond every document, to start descending at a key's first document.
_LAST_SHARD_DOC: Final = 2**63 - 1


class _PartialResultsError(Exception):
    """Some shards did not answer: the page must not be used."""


#: What aggregation answers carry that no analysis reads (``top_hits``' index, id, score, sort
#: values, totals; a date metric's ``value_as_string``, the epoch ``value`` is read): left out by
#: the server, a third of a per-rank aggregation's bytes.
_TRIM_HITS: Final = ",".join(f"-aggregations.**.{name}" for name in ("_index", "_id", "_score", "sort", "hits.max_score", "hits.total",
                                                                         "value_as_string"))


def _check_shards(response: Any, doing: str) -> None:
    """Raise :class:`_PartialResultsError` when any shard failed or the search timed out."""
    shards = response.get("_shards") or {}
    if shards.get("failed") or response.get("timed_out"):
        reasons = {str((failure.get("reason") or {}).get("type", failure)) for failure in shards.get("failures", [])}
        raise _PartialResultsError(
            f"{shards.get('failed', 0)} of {shards.get('total', '?')} shards failed while {doing}"
            + (f" ({', '.join(sorted(reasons))})" if reasons else "")
        )


class ElasticsearchSource:
    """One Elasticsearch cluster (and index pattern) as a :class:`~hvdlog.query.source.Source`."""

    def __init__(
        self,
        url: str,
        *,
        index: str = DEFAULT_INDEX,
        timeout: float = 10.0,
        page_size: int = 10_000,
        first_page: int = 2000,
        slices: int = 2,
        warn: Warn = stderr_warn,
        ca_certs: str | None = None,
    ) -> None:
        self.url = url
        self.ca_certs = ca_certs
        self.warn = warn
        self.index = index
        self.timeout = timeout
        self.page_size = page_size
        self.first_page = min(first_page, page_size)
        self.slices = slices
        self.label = f"elasticsearch {mask_credentials(url)}"
        self._es: Any = None
        #: Bytes of the answers received (searches, aggregations) and their number: what a
        #: command moved over the network, for the benchmarks' transfer figures.
        self.bytes_received = 0
        self.requests = 0

    def _received(self, response: Any) -> None:
        """Count one answer: its ``Content-Length`` when the server sent one, else its JSON size."""
        self.requests += 1
        length = response.meta.headers.get("content-length")
        self.bytes_received += int(length) if length and length.isdigit() else len(orjson.dumps(response.body))

    def _client(self) -> Any:
        if self._es is None:
            with self._errors("connecting"):
                self._es = connect(self.url, Credentials.from_env(), ca_certs=self.ca_certs, timeout=self.timeout, warn=self.warn)
        return self._es

    @contextmanager
    def _errors(self, doing: str = "searching") -> Iterator[None]:
        """Client exceptions become one :class:`SourceError` sentence that says what to check."""
        try:
            with errors(self.url, f"{doing} {self.index}", privileges=f"the read privilege on {self.index}", timeout=self.timeout):
                yield
        except ElasticsearchError as exc:
            raise SourceError(str(exc)) from None

    def _pages(self, query: dict[str, Any], newest_first: bool = False, first: int | None = None) -> Iterator[list[dict[str, Any]]]:
        """Pages of hits, each complete (every shard answered), never a document twice.

        A node that leaves mid-query (its shards fail, its point-in-time contexts vanish)
        makes a page partial: that page is not used; the search starts again in a new point
        in time (replicas answer there) after the sort key (time, rank) of the last document
        given, skipping those already given with that same key. Earlier pages were complete,
        so the order holds. After ``_PARTIAL_RETRIES`` attempts it fails: no answer rather
        than a partial one.
        """
        resume: list[Any] | None = None  # the (time, rank) sort values of the last document given
        at_resume: set[tuple[str, str]] = set()  # the documents given with exactly that key
        for attempt in range(_PARTIAL_RETRIES + 1):
            try:
                again = resume is not None
                for hits in self._pit_pages(query, newest_first, started=attempt > 0 or again, first=first, resume=resume):
                    if again and hits:  # the new point in time starts at the key's first document
                        again = hits[-1]["sort"][:_KEY] == resume  # the next page may hold more of that key
                        hits = [hit for hit in hits if hit["sort"][:_KEY] != resume or (hit["_index"], hit["_id"]) not in at_resume]
                    if not hits:
                        continue
                    key = hits[-1]["sort"][:_KEY]
                    if key != resume:
                        resume, at_resume = key, set()
                    for hit in reversed(hits):
                        if hit["sort"][:_KEY] != key:
                            break
                        at_resume.add((hit["_index"], hit["_id"]))
                    yield hits
                return
            except _PartialResultsError as exc:
                if attempt == _PARTIAL_RETRIES:
                    raise SourceError(
                        f"{self.label}: {exc}, {attempt + 1} times: giving no answer rather than a partial one"
                        " (is a node down? retry once the cluster health is yellow or green)"
                    ) from None
                self.warn(f"{self.label}: {exc}; searching again (nothing is shown twice)")
                time.sleep(_RETRY_PAUSE_S * (attempt + 1))

    def _pit_pages(
        self, query: dict[str, Any], newest_first: bool, started: bool, first: int | None = None, resume: list[Any] | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """One pass in one point in time; raises :class:`_PartialResultsError` when a shard fails.

        ``resume``: start at the first document with these (time, rank) sort values.

        The first page is small (``first``: what a terminal shows first comes quickly), the
        next ones big (``page_size``: each search costs the query again, the bigger the
        page the fewer the searches).
        """
        es = self._client()
        with self._retryable(started):
            opened = es.open_point_in_time(index=self.index, keep_alive="2m", ignore_unavailable=True)
        pit = opened["id"]
        _check_shards(opened, "opening the point in time")
        if not opened.get("_shards", {}).get("total", 1):
            self.warn(f"{self.label}: no index matches {self.index!r} (check --index)")
        holder = [pit]  # the newest id: an answer may hand a new one
        try:
            sort: list[dict[str, Any]] = [*_DESC, {"_shard_doc": "desc"}] if newest_first else [*SORT, {"_shard_doc": "asc"}]
            size = min(first or self.first_page, self.page_size)
            start = None if resume is None else [*resume, _LAST_SHARD_DOC if newest_first else -1]
            hits = self._page(es, holder, query, sort, size, start)
            if hits:
                yield hits
            if len(hits) < size:  # a short page is the last one: no search for an empty page
                return
            after = hits[-1]["sort"]
            if not newest_first and self.slices > 1:
                yield from self._sliced(es, holder, query, sort, after)
                return
            while True:
                hits = self._page(es, holder, query, sort, self.page_size, after)
                if hits:
                    yield hits
                if len(hits) < self.page_size:
                    return
                after = hits[-1]["sort"]
        finally:
            with contextlib.suppress(Exception):  # the PIT expires by itself; never mask the real error
                es.close_point_in_time(id=holder[0])

    def _page(
        self, es: Any, pit: list[str], query: dict[str, Any], sort: list[dict[str, Any]], size: int, after: Any, part: tuple[int, int] | None = None
    ) -> list[dict[str, Any]]:
        """One complete page of hits after ``after`` (of slice ``part``: id, max), in the point in time ``pit[0]``."""
        with self._retryable(True):
            response = es.search(
                pit={"id": pit[0], "keep_alive": "2m"},
                query=query,
                sort=sort,
                size=size,
                search_after=after,
                track_total_hits=False,
                **({"slice": {"id": part[0], "max": part[1]}} if part is not None else {}),
            )
        _check_shards(response, "searching")
        self._received(response)
        pit[0] = response.get("pit_id", pit[0])
        hits: list[dict[str, Any]] = response["hits"]["hits"]
        return hits

    def _sliced(self, es: Any, pit: list[str], query: dict[str, Any], sort: list[dict[str, Any]], after: Any) -> Iterator[list[dict[str, Any]]]:
        """The pages after ``after``, read as ``slices`` slices of the point in time in parallel, merged.

        Each slice (a part of every shard's documents) is read page by page by its own thread,
        one page ahead of the merge, so the server fetches several pages at once and while
        this process decodes and prints. The sort ends in ``_shard_doc``, unique in the point
        in time, so the merge by sort values gives exactly the order of one unsliced read.
        A slice's error (a failed shard, a lost node) is raised here, as an unsliced read would.
        """
        count = self.slices
        stop = threading.Event()
        queues: list[queue.Queue[list[dict[str, Any]] | BaseException]] = [queue.Queue(maxsize=1) for _ in range(count)]

        def put(part: int, item: list[dict[str, Any]] | BaseException) -> bool:
            while not stop.is_set():
                with contextlib.suppress(queue.Full):
                    queues[part].put(item, timeout=0.2)
                    return True
            return False

        def read(part: int) -> None:
            position = after
            try:
                while not stop.is_set():
                    hits = self._page(es, pit, query, sort, self.page_size, position, (part, count))
                    if not put(part, hits) or len(hits) < self.page_size:
                        return
                    position = hits[-1]["sort"]
            except BaseException as exc:  # noqa: BLE001 - handed to the merging thread, which raises it
                put(part, exc)

        for part in range(count):
            threading.Thread(target=read, args=(part,), daemon=True, name=f"hvdlog es slice {part}").start()
        key = operator.itemgetter("sort")
        pending: list[list[dict[str, Any]]] = [[] for _ in range(count)]
        done = [False] * count
        try:
            while True:
                for part in range(count):
                    if not done[part] and not pending[part]:
                        item = queues[part].get()
                        if isinstance(item, BaseException):
                            raise item
                        pending[part], done[part] = item, len(item) < self.page_size
                live = [pending[part][-1]["sort"] for part in range(count) if not done[part]]
                bound = min(live) if live else None
                merged: list[dict[str, Any]] = []
                for part in range(count):
                    cut = len(pending[part]) if bound is None else bisect.bisect_right(pending[part], bound, key=key)
                    merged.extend(pending[part][:cut])
                    pending[part] = pending[part][cut:]
                merged.sort(key=key)
                if merged:
                    yield merged
                if bound is None:
                    return
        finally:
            stop.set()

    @contextmanager
    def _retryable(self, started: bool) -> Iterator[None]:
        """Errors of a cluster losing a node become :class:`_PartialResultsError`; the rest, sentences.

        Before the first answer, a refused connection is the user's to fix (wrong URL): it
        is not retried. Once the search is under way, it means a node went away.
        """
        from elastic_transport import ConnectionError as TransportConnectionError

        from elasticsearch import ApiError

        with self._errors():
            try:
                yield
            except ApiError as exc:
                status, text = exc.meta.status, str(exc.body)
                if status >= 500 or status == 429 or (status == 404 and "search_context_missing" in text):
                    raise _PartialResultsError(f"Elasticsearch answered {status} ({exc.message})") from None
                raise
            except TransportConnectionError as exc:
                if started:
                    raise _PartialResultsError(f"the connection broke ({exc.message})") from None
                raise

    def aggregate(self, query: dict[str, Any], aggs: dict[str, Any]) -> dict[str, Any]:
        """The ``aggregations`` of one ``size: 0`` search (every shard must answer), counted in :attr:`bytes_received`."""
        es = self._client()
        with self._errors("aggregating"):
            response = es.options(request_timeout=max(self.timeout, 60)).search(
                index=self.index, query=query, size=0, aggs=aggs, filter_path=_TRIM_HITS)
        try:
            _check_shards(response, "aggregating")
        except _PartialResultsError as exc:
            raise SourceError(f"{exc}: giving no answer rather than a partial one") from None
        self._received(response)
        aggregations: dict[str, Any] = response.body.get("aggregations") or {}
        return aggregations

    def aggregatable(self, name: str) -> bool:
        """Whether every index of the pattern that maps ``name`` can aggregate on it, and one does."""
        es = self._client()
        with self._errors("reading the mapping of"):
            caps = es.field_caps(index=self.index, fields=name, ignore_unavailable=True, allow_no_indices=True).body
        found = (caps.get("fields") or {}).get(name) or {}
        return bool(found) and all(kind.get("aggregatable") for type_name, kind in found.items() if type_name != "unmapped")

    def scope(self, spec: Filter) -> ReadScope:
        """Ranks, steps and jobs the documents of ``spec`` hold, counted by the server (one aggregation, no documents read)."""
        aggs = {"ranks": {"cardinality": {"field": "rank"}}, "steps": {"cardinality": {"field": "step"}},
                "jobs": {"terms": {"field": "job", "size": 2}}}
        found = self.aggregate(to_query(spec), aggs)
        scope = ReadScope(counted_ranks=int((found.get("ranks") or {}).get("value") or 0),
                          steps=int((found.get("steps") or {}).get("value") or 0))
        for bucket in (found.get("jobs") or {}).get("buckets") or ():
            scope.jobs.setdefault(str(bucket.get("key")), None)
        return scope

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """Every match (or the ``last`` N), sorted by time then rank."""
        query = to_query(spec)
        if last is None:
            for hits in self._pages(query):
                for hit in hits:
                    if spec.matches(doc := as_read(hit["_source"])):
                        yield doc
            return
        newest: list[Document] = []
        for hits in self._pages(query, newest_first=True, first=last):
            newest.extend(doc for hit in hits if spec.matches(doc := as_read(hit["_source"])))
            if len(newest) >= last:
                break
        yield from sorted(reversed(newest[:last]), key=sort_key)  # noqa: C414 - reversed first: ties keep index order, as ascending

    def follow(
        self, spec: Filter, interval: float = 1.0, *, from_start: bool = False, wait: bool = False, lag: float = 0.0
    ) -> Iterator[Document]:
        """Documents indexed from now on, by polling for ``@timestamp`` at or after the last one seen.

        Documents that arrive later than ``interval`` with an older ``@timestamp`` than the
        newest already shown are missed unless ``lag`` says how far back (s) each poll looks
        again (``hvdlog watch``: shippers deliver ranks' lines out of order); those already
        yielded are recognised by id. ``grep`` without ``-f`` finds the rest. ``from_start``
        begins at ``spec.since`` (or the oldest document); ``wait`` is accepted for the files'
        sake (an index that does not exist yet is already waited for).
        """
        es = self._client()
        query = to_query(spec)
        seen: dict[str, int] = {}  # id -> @timestamp (ms) of what was yielded within the look-back
        edge = int(spec.since.timestamp() * 1000) if from_start and spec.since else 0 if from_start else int(time.time() * 1000)
        lag_ms = int(lag * 1000)
        while True:
            start = edge - lag_ms
            for hits in self._follow_pages(es, query, start):
                for hit in hits:
                    if hit["_id"] in seen:
                        continue
                    seen[hit["_id"]] = hit["sort"][0]
                    edge = max(edge, hit["sort"][0])
                    if spec.matches(doc := as_read(hit["_source"])):
                        yield doc
            seen = {key: at for key, at in seen.items() if at >= edge - lag_ms}
            time.sleep(interval)

    def _follow_pages(self, es: Any, query: dict[str, Any], start: int) -> Iterator[list[dict[str, Any]]]:
        """Every hit at or after ``start`` (ms), page by page (``search_after``)."""
        bounded = {"bool": {"filter": [query, {"range": {"@timestamp": {"gte": start, "format": "epoch_millis"}}}]}}
        after: Any = None
        while True:
            extra = {"search_after": after} if after is not None else {}
            with self._errors():
                hits = es.search(index=self.index, query=bounded, sort=SORT, size=self.page_size, ignore_unavailable=True, **extra)["hits"]["hits"]
            yield hits
            if len(hits) < self.page_size:
                return
            after = hits[-1]["sort"]

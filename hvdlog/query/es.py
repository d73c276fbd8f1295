"""Events from Elasticsearch, in the same shape and order as from files.

The filter becomes a bool query (:mod:`hvdlog.query.es_query`); every hit is re-checked with
:meth:`Filter.matches`, so both sources agree exactly. Pagination is ``search_after`` inside
a point in time (``_shard_doc`` breaks ties), so no page boundary drops or repeats a document.
The connection (credentials from ``HVDLOG_ES_API_KEY``, or ``HVDLOG_ES_USERNAME`` +
``HVDLOG_ES_PASSWORD``, or the URL; CA; error sentences) is :mod:`hvdlog.elastic.connection`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from hvdlog.documents import Document
from hvdlog.elastic.connection import Credentials, ElasticsearchError, connect, errors, mask_credentials
from hvdlog.query.es_query import SORT, to_query
from hvdlog.query.source import SourceError, Warn, stderr_warn
from hvdlog.query.spec import Filter, sort_key

__all__ = ["DEFAULT_INDEX", "ElasticsearchSource"]

#: Every data stream the pipeline writes: ``logs-horovod.app-*``, ``logs-horovod.core-*``...
DEFAULT_INDEX: Final = "logs-horovod.*-*"

#: Newest first; documents without a time or rank sort first ascending, so last descending.
_DESC: Final = [{key: {**value, "order": "desc", "missing": "_last"}} for item in SORT for key, value in item.items()]


class ElasticsearchSource:
    """One Elasticsearch cluster (and index pattern) as a :class:`~hvdlog.query.source.Source`."""

    def __init__(
        self,
        url: str,
        *,
        index: str = DEFAULT_INDEX,
        timeout: float = 10.0,
        page_size: int = 2000,
        warn: Warn = stderr_warn,
        ca_certs: str | None = None,
    ) -> None:
        self.url = url
        self.ca_certs = ca_certs
        self.warn = warn
        self.index = index
        self.timeout = timeout
        self.page_size = page_size
        self.label = f"elasticsearch {mask_credentials(url)}"
        self._es: Any = None

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

    def _pages(self, query: dict[str, Any], newest_first: bool = False) -> Iterator[list[dict[str, Any]]]:
        es = self._client()
        with self._errors():
            opened = es.open_point_in_time(index=self.index, keep_alive="2m", ignore_unavailable=True)
        pit = opened["id"]
        if not opened.get("_shards", {}).get("total", 1):
            self.warn(f"{self.label}: no index matches {self.index!r} (check --index)")
        try:
            after = None
            while True:
                with self._errors():
                    response = es.search(
                        pit={"id": pit, "keep_alive": "2m"},
                        query=query,
                        sort=[*_DESC, {"_shard_doc": "desc"}] if newest_first else [*SORT, {"_shard_doc": "asc"}],
                        size=self.page_size,
                        search_after=after,
                        track_total_hits=False,
                    )
                hits = response["hits"]["hits"]
                if not hits:
                    return
                pit = response.get("pit_id", pit)
                yield hits
                after = hits[-1]["sort"]
        finally:
            with contextlib.suppress(Exception):  # the PIT expires by itself; never mask the real error
                es.close_point_in_time(id=pit)

    def search(self, spec: Filter, last: int | None = None) -> Iterator[Document]:
        """Every match (or the ``last`` N), sorted by time then rank."""
        query = to_query(spec)
        if last is None:
            for hits in self._pages(query):
                for hit in hits:
                    if spec.matches(hit["_source"]):
                        yield hit["_source"]
            return
        newest: list[Document] = []
        for hits in self._pages(query, newest_first=True):
            newest.extend(hit["_source"] for hit in hits if spec.matches(hit["_source"]))
            if len(newest) >= last:
                break
        yield from sorted(reversed(newest[:last]), key=sort_key)  # noqa: C414 - reversed first: ties keep index order, as ascending

    def follow(self, spec: Filter, interval: float = 1.0) -> Iterator[Document]:
        """Documents indexed from now on, by polling for ``@timestamp`` at or after the last one seen.

        Documents that arrive later than ``interval`` with an older ``@timestamp`` than the
        newest already shown are missed; ``grep`` without ``-f`` finds them.
        """
        es = self._client()
        query = to_query(spec)
        seen_at_edge: set[str] = set()
        edge = int(time.time() * 1000)
        while True:
            bounded = {"bool": {"filter": [query, {"range": {"@timestamp": {"gte": edge, "format": "epoch_millis"}}}]}}
            with self._errors():
                hits = es.search(index=self.index, query=bounded, sort=SORT, size=self.page_size, ignore_unavailable=True)["hits"]["hits"]
            fresh = [hit for hit in hits if hit["_id"] not in seen_at_edge]
            for hit in fresh:
                if spec.matches(hit["_source"]):
                    yield hit["_source"]
            if fresh:
                newest = max(hit["sort"][0] for hit in fresh)
                if newest > edge:
                    edge, seen_at_edge = newest, set()
                seen_at_edge.update(hit["_id"] for hit in fresh if hit["sort"][0] == edge)
            time.sleep(interval)

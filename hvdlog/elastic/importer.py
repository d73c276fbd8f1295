"""Parsed documents into hvdlog's data streams, as the Logstash path would write them.

``hvdlog import`` is the way in without Filebeat and Logstash: logs copied off a cluster,
or a try of the ``--es`` commands without Docker. Each document goes to
``logs-<event.dataset>-<namespace>`` with ``data_stream.*`` set as the Logstash output sets
them (``data_stream_sync_fields``); a document without a time gets the import time, as an
untimed line gets Filebeat's read time on the Logstash path, marked ``hvdlog.untimed`` so the
readers see it untimed, as over the files. A console's lines name no job:
each document gets the one the readers over files give it (:func:`hvdlog.layout.console_job`),
so ``jobs --es`` lists it and ``report --es`` finds it.

Importing twice adds nothing: the ``_id`` is a digest of the document as parsed (its file
path and the import time left out, so the same files under another path are the same
events) and every write is ``op_type: create``, which the server refuses (409) for an id it
already has. Identical documents of one file at one time (a line printed twice) are told
apart by their order there. Writes go through the client's streaming bulk helper, one
bounded chunk at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Final

import orjson

from hvdlog.documents import job_of, read_time
from hvdlog.elastic import templates
from hvdlog.types import Document

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch

__all__ = ["CHUNK_BYTES", "CHUNK_DOCS", "ImportTotals", "actions", "document_id", "import_documents", "templates_missing"]

#: Documents and bytes per bulk request: a few MB in memory at a time, whatever the input.
CHUNK_DOCS: Final = 1000
CHUNK_BYTES: Final = 5 * 1024 * 1024


@dataclass(slots=True)
class ImportTotals:
    """What the server did with each document."""

    indexed: int = 0
    already_there: int = 0
    rejected: int = 0
    first_rejection: str = ""

    @property
    def read(self) -> int:
        return self.indexed + self.already_there + self.rejected


def document_id(doc: Document) -> str:
    """A digest of ``doc`` without its file path: the same event gives the same id wherever it was read."""
    log = doc.get("log")
    if isinstance(log, dict) and isinstance(log.get("file"), dict) and "path" in log["file"]:
        file = {key: value for key, value in log["file"].items() if key != "path"}
        log = {**log, "file": file} if file else {key: value for key, value in log.items() if key != "file"}
        doc = {**doc, "log": log}
    return hashlib.blake2b(orjson.dumps(doc, default=str, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()


def _file_of(doc: Document) -> object:
    log = doc.get("log")
    file = log.get("file") if isinstance(log, dict) else None
    return file.get("path") if isinstance(file, dict) else None


def actions(documents: Iterable[Document], namespace: str, now: str | None = None) -> Iterator[dict[str, Any]]:
    """Bulk ``create`` actions, one per document, into its dataset's data stream.

    Repeats of one document are counted only among neighbours of one file at one time, so
    memory stays bounded by the events of one instant.
    """
    templates.validate_namespace(namespace)
    stamp = now or datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    seen: dict[str, int] = {}
    last: tuple[object, object] = (None, None)
    for doc in documents:
        where = (_file_of(doc), doc.get("@timestamp"))
        if where != last:
            seen.clear()
            last = where
        base = document_id(doc)
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        dataset = str(doc.get("event", {}).get("dataset") or "horovod.launcher")
        source = {**read_time(doc, stamp), "data_stream": {"type": "logs", "dataset": dataset, "namespace": namespace}}
        if not doc.get("job") and (job := job_of(doc)) is not None:
            source["job"] = job  # a console's job, named as over files (not in the id: the same lines under another path are the same events)
        yield {
            "_op_type": "create",
            "_index": templates.data_stream_name(dataset, namespace),
            "_id": base if not occurrence else hashlib.blake2b(f"{base}#{occurrence}".encode(), digest_size=16).hexdigest(),
            "_source": source,
        }


def templates_missing(client: Elasticsearch) -> bool:
    """True when hvdlog's index template is not installed (writes would make untyped streams)."""
    return not bool(client.indices.exists_index_template(name=templates.INDEX_TEMPLATE))


def import_documents(
    client: Elasticsearch, documents: Iterable[Document], namespace: str, tick: Callable[[ImportTotals], None] | None = None
) -> ImportTotals:
    """Write ``documents`` with streaming bulk requests; count indexed, already there, rejected."""
    from elasticsearch import helpers

    totals = ImportTotals()
    results = helpers.streaming_bulk(
        client, actions(documents, namespace), chunk_size=CHUNK_DOCS, max_chunk_bytes=CHUNK_BYTES,
        raise_on_error=False, raise_on_exception=True, max_retries=3, initial_backoff=1,
    )
    for ok, item in results:
        result = item.get("create", item)
        if ok:
            totals.indexed += 1
        elif result.get("status") == 409:
            totals.already_there += 1
        else:
            totals.rejected += 1
            if not totals.first_rejection:
                error = result.get("error")
                reason = error.get("reason") or error.get("type") if isinstance(error, dict) else error
                totals.first_rejection = f"{result.get('_index', '?')}: {reason or result.get('status')}"
        if tick is not None:
            tick(totals)
    return totals

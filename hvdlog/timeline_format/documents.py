"""Timeline records as documents for Elasticsearch (``event.dataset: horovod.timeline``).

The raw timeline cannot be shipped line by line: Horovod puts many events on one line, writes
a newline only when a new tensor appears, and rewrites the last byte of the file on every
event, so a line-based shipper would wait forever or read half-written lines. What is worth
storing is also not the raw ``B``/``E`` pairs but what they mean, so hvdlog writes one
document per negotiation (which rank was last, the wait it caused, every rank's readiness)
and one per collective run (seconds in queue, memcpy, communication) to
``horovod-timeline.ndjson`` beside the timeline, which Filebeat ships like our other files.

:class:`TimelineFollower` does it while the job runs (on rank 0, from the timeline capture's
thread), reading only the bytes appended since the last poll; ``hvdlog timeline --export``
does it after the fact for any timeline.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

import orjson

from hvdlog.documents import get_field
from hvdlog.fields import TIMELINE_DATASET
from hvdlog.timeline_format.reader import read_events
from hvdlog.timeline_format.records import PHASES, Negotiation, OperationRun, RecordBuilder, phase_class

__all__ = ["DATASET", "EXPORT_FILE", "TimelineFollower", "documents", "export_line", "job_and_host", "records_from_documents"]

DATASET: Final = TIMELINE_DATASET
EXPORT_FILE: Final = "horovod-timeline.ndjson"


def _iso(epoch_us: int) -> str:
    return datetime.fromtimestamp(epoch_us // 1_000_000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{epoch_us % 1_000_000:06d}Z"


def documents(records: Iterable[Negotiation | OperationRun], job: str | None, host: str | None, epoch_fallback_us: int = 0) -> Iterator[dict[str, Any]]:
    """Flat (dotted-key) documents, one per finished negotiation or collective run."""
    for record in records:
        if record.end_us is None:
            continue
        base = record.epoch_us if record.epoch_us is not None else epoch_fallback_us
        doc: dict[str, Any] = {
            "@timestamp": _iso(base + record.start_us),
            "event.dataset": DATASET,
            "event.duration": (record.end_us - record.start_us) * 1000,
            "horovod.timeline.tensor": record.tensor,
            "horovod.timeline.operation": record.operation,
            "horovod.timeline.start_us": record.start_us,
        }
        if job is not None:
            doc["job"] = job
        if host is not None:
            doc["host.name"] = host
        if isinstance(record, Negotiation):
            doc["event.action"] = "negotiation"
            doc["horovod.timeline.negotiation_seconds"] = round((record.end_us - record.start_us) / 1e6, 6)
            if record.ready:
                ranks = sorted(record.ready, key=lambda r: (record.ready[r], r))
                doc["horovod.timeline.ready_ranks"] = ranks
                doc["horovod.timeline.ready_seconds"] = [round((record.ready[r] - record.start_us) / 1e6, 6) for r in ranks]
                doc["horovod.timeline.last_rank"] = record.last_rank
                doc["horovod.timeline.wait_seconds"] = round(record.wait_caused or 0.0, 6)
                doc["message"] = f"{record.tensor}: rank {record.last_rank} ready last, the others waited {record.wait_caused:.6f} s"
            else:
                doc["message"] = f"{record.tensor}: negotiated from the response cache (no per-rank readiness)"
        else:
            doc["event.action"] = "operation"
            by_phase: dict[str, float] = {}
            for activity, seconds in record.activities.items():
                key = phase_class(activity)
                by_phase[key] = by_phase.get(key, 0.0) + seconds
            for key, seconds in by_phase.items():
                doc[f"horovod.timeline.{key}_seconds"] = round(seconds, 6)
            doc["message"] = f"{record.tensor}: {record.operation} took {(record.end_us - record.start_us) / 1e6:.6f} s"
        yield doc


def _run_from_document(doc: dict[str, Any]) -> OperationRun | None:
    """A collective run back from its document: seconds per phase class (queue, memcpy, communication)."""
    start = get_field(doc, "horovod.timeline.start_us")
    if not isinstance(start, int):
        return None
    duration = get_field(doc, "event.duration")
    end = start + (duration // 1000 if isinstance(duration, int) else 0)
    phases = {name: float(seconds) for name in PHASES if isinstance(seconds := get_field(doc, f"horovod.timeline.{name}_seconds"), (int, float))}
    return OperationRun(str(get_field(doc, "horovod.timeline.tensor")), str(get_field(doc, "horovod.timeline.operation")), start, end, phases)


def records_from_documents(docs: Iterable[dict[str, Any]]) -> Iterator[Negotiation | OperationRun]:
    """Negotiations and collective runs back from stored documents (flat or nested), for analyses over Elasticsearch."""
    for doc in docs:
        action = get_field(doc, "event.action")
        if action == "operation" and (run := _run_from_document(doc)) is not None:
            yield run
        if action != "negotiation":
            continue
        start = get_field(doc, "horovod.timeline.start_us")
        seconds = get_field(doc, "horovod.timeline.negotiation_seconds")
        if not isinstance(start, int) or not isinstance(seconds, (int, float)):
            continue
        ranks = get_field(doc, "horovod.timeline.ready_ranks") or []
        offsets = get_field(doc, "horovod.timeline.ready_seconds") or []
        ranks = ranks if isinstance(ranks, list) else [ranks]
        offsets = offsets if isinstance(offsets, list) else [offsets]
        ready = {int(r): start + round(float(o) * 1e6) for r, o in zip(ranks, offsets, strict=False)}  # a malformed document may differ
        yield Negotiation(
            str(get_field(doc, "horovod.timeline.tensor")), str(get_field(doc, "horovod.timeline.operation")),
            start, start + round(seconds * 1e6), ready,
        )


class TimelineFollower:
    """Reads what Horovod appended to its timeline since the last poll; yields finished records.

    Every top-level object Horovod writes ends with ``}]`` or ``},`` (``]`` is overwritten by
    the next event), so the bytes up to the last such end are final; the rest waits for the
    next poll. One follower per file: tensor ids (``pid``) restart in each rotated segment.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.builder = RecordBuilder()

    def poll(self) -> list[Negotiation | OperationRun]:
        """Finished negotiations and runs found in the new bytes."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        end = max(chunk.rfind(b"}]"), chunk.rfind(b"},"))
        if end < 0:
            return []
        self.offset += end + 1
        return [record for event in read_events(io.BytesIO(chunk[: end + 1])) for record in self.builder.feed(event)]


def export_line(doc: dict[str, Any]) -> bytes:
    """One NDJSON line."""
    return orjson.dumps(doc) + b"\n"


def job_and_host(timeline: Path) -> tuple[str | None, str | None]:
    """Job and host of a timeline in our layout (``<root>/<job>/<host>/horovod-timeline.json``)."""
    parent = timeline.resolve().parent
    if any(parent.glob("rank-*.jsonl")) or any(parent.glob("rank-*.jsonl.*")):
        return parent.parent.name, parent.name
    return None, None

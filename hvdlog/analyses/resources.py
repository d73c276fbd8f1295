"""Per-rank resource figures for ``hvdlog stragglers``: what each rank's ``resources`` events say.

A slow rank with a saturated CPU, a host short of memory or a hot GPU explains itself; one
with ordinary figures points at data or code. Medians resist one odd sample; the largest RSS
and the lowest available memory are what hurt.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any, Final

from hvdlog.documents import Document, get_field, job_of
from hvdlog.query.spec import Condition

__all__ = ["RESOURCE_EVENTS", "attach", "figures", "is_resources", "short"]

#: What the figures need from a source.
RESOURCE_EVENTS: Final = (Condition("event.action", ("resources",)),)

_MEDIANS: Final = {
    "cpu_percent": "resources.process.cpu_percent",
    "host_memory_used_percent": "resources.host.memory_used_percent",
    "gpu_utilization_percent": "resources.gpu.utilization_percent",
    "gpu_temperature_celsius": "resources.gpu.temperature_celsius",
}
_MAXIMA: Final = {"rss_bytes_max": "resources.process.rss_bytes", "gpu_memory_used_bytes_max": "resources.gpu.memory_used_bytes"}


def is_resources(doc: Document) -> bool:
    """A ``resources`` event (they carry no step: the sampler thread is outside the step context)."""
    action: object = get_field(doc, "event.action")
    return action == "resources"


def figures(docs: Iterable[Document]) -> dict[tuple[str | None, int], dict[str, Any]]:
    """(job, rank) -> samples count, medians and maxima of the resources events."""
    values: dict[tuple[str | None, int], dict[str, list[float]]] = {}
    for doc in docs:
        rank = doc.get("rank")
        if not isinstance(rank, int) or not is_resources(doc):
            continue
        bucket = values.setdefault((job_of(doc), rank), {"samples": []})
        bucket["samples"].append(1.0)
        for name, field in {**_MEDIANS, **_MAXIMA}.items():
            if isinstance(value := get_field(doc, field), (int, float)):
                bucket.setdefault(name, []).append(float(value))
    result: dict[tuple[str | None, int], dict[str, Any]] = {}
    for key, bucket in values.items():
        row: dict[str, Any] = {"samples": len(bucket["samples"])}
        row.update({name: round(statistics.median(bucket[name]), 2) for name in _MEDIANS if bucket.get(name)})
        row.update({name: int(max(bucket[name])) for name in _MAXIMA if bucket.get(name)})
        result[key] = row
    return result


def attach(rows: Iterable[Any], found: dict[tuple[str | None, int], dict[str, Any]]) -> None:
    """Set ``row.resources`` on stragglers rows that have resources events."""
    for row in rows:
        row.resources = found.get((row.job, row.rank))


def short(resources: dict[str, Any] | None) -> str:
    """A few words for the text output: ``cpu 98% rss 1.2 GB gpu 40%``."""
    if not resources:
        return ""
    parts = []
    if "cpu_percent" in resources:
        parts.append(f"cpu {resources['cpu_percent']:.0f}%")
    if "rss_bytes_max" in resources:
        parts.append(f"rss {resources['rss_bytes_max'] / 1e9:.2g} GB")
    if "host_memory_used_percent" in resources:
        parts.append(f"host mem {resources['host_memory_used_percent']:.0f}%")
    if "gpu_utilization_percent" in resources:
        parts.append(f"gpu {resources['gpu_utilization_percent']:.0f}%")
    return " ".join(parts)

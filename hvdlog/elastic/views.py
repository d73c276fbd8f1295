"""The Kibana views hvdlog ships, as a readable definition: saved searches, Lens charts, dashboard.

Change what users see here; :mod:`hvdlog.elastic.kibana` renders these tables into Kibana's
saved-object shapes and ``python -m hvdlog.elastic.generate`` writes one file per Kibana shape
(``kibana/hvdlog-8.ndjson``, ``kibana/hvdlog-9.ndjson``; :mod:`hvdlog.elastic.kibana_versions`).
Queries are Lucene, not KQL, so the tests can run every one of them as an Elasticsearch
``query_string`` unchanged. Every field named here must be in :mod:`hvdlog.fields` (a test checks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from hvdlog.fields import CORE_DATASET, LEVELS, REJECTED_DATASET, TIMELINE_DATASET, level_at_least

__all__ = [
    "CHARTS",
    "DASHBOARD",
    "OWN_FAILURE",
    "SEARCHES",
    "Average",
    "Bucket",
    "Chart",
    "Control",
    "Count",
    "Dashboard",
    "DateHistogram",
    "LastValue",
    "Max",
    "Metric",
    "Panel",
    "SavedSearch",
    "Sum",
    "Terms",
    "level_query",
]


def level_query(minimum: str) -> str:
    """Lucene clause matching ``log.level`` at ``minimum`` or more severe, from the contract's LEVELS."""
    levels = [level for level in LEVELS if level_at_least(level, minimum)]
    return f"log.level:({' OR '.join(levels)})"


@dataclass(frozen=True, slots=True)
class SavedSearch:
    """A Discover session: a Lucene query, the columns shown and the sort."""

    slug: str
    title: str
    description: str
    query: str
    columns: tuple[str, ...]
    sort: tuple[tuple[str, Literal["asc", "desc"]], ...] = (("@timestamp", "desc"),)


@dataclass(frozen=True, slots=True)
class DateHistogram:
    """Bucket by time (Lens picks the interval from the time range)."""

    field: str = "@timestamp"
    label: str = "@timestamp"


@dataclass(frozen=True, slots=True)
class Terms:
    """Bucket by the values of a field; ``order`` by count (desc) or by key (asc)."""

    field: str
    label: str
    size: int = 10
    order: Literal["count", "key"] = "count"


@dataclass(frozen=True, slots=True)
class Count:
    """Number of documents."""

    label: str = "Events"


@dataclass(frozen=True, slots=True)
class Max:
    """Largest value of a field."""

    field: str
    label: str


@dataclass(frozen=True, slots=True)
class Sum:
    """Sum of a numeric field."""

    field: str
    label: str


@dataclass(frozen=True, slots=True)
class Average:
    """Mean of a numeric field."""

    field: str
    label: str


@dataclass(frozen=True, slots=True)
class LastValue:
    """Value of a field in the latest document that has it (Lens ``last_value``)."""

    field: str
    label: str
    sort_field: str = "@timestamp"


Bucket = DateHistogram | Terms
Metric = Count | Max | Sum | Average | LastValue


@dataclass(frozen=True, slots=True)
class Chart:
    """A Lens chart with one layer: buckets (x axis then split, or table rows) and metrics."""

    slug: str
    title: str
    description: str
    kind: Literal["bar_stacked", "bar", "line", "table"]
    buckets: tuple[Bucket, ...]
    metrics: tuple[Metric, ...]
    query: str = ""
    #: For tables: (column index, direction) of the default sort, indexes over buckets + metrics.
    table_sort: tuple[int, Literal["asc", "desc"]] | None = None


@dataclass(frozen=True, slots=True)
class Control:
    """An options-list control on a dashboard: pick values of one aggregatable field."""

    field: str
    title: str
    sort: tuple[Literal["_key", "_count"], Literal["asc", "desc"]] = ("_key", "asc")


@dataclass(frozen=True, slots=True)
class Panel:
    """A by-reference panel: a chart or saved search slug at a place on the 48-column grid."""

    slug: str
    x: int
    y: int
    w: int
    h: int


@dataclass(frozen=True, slots=True)
class Dashboard:
    """A dashboard: controls across the top, then panels."""

    slug: str
    title: str
    description: str
    controls: tuple[Control, ...]
    panels: tuple[Panel, ...]
    time_from: str = "now-24h"
    refresh_ms: int = 30_000


#: A rank's own failure: an uncaught exception other than Horovod's shutdown, which the other
#: ranks raise because one failed (first-failure's "collateral"; the failure model,
#: docs/failure-model.md, decides from all the evidence, this query from one event).
OWN_FAILURE: Final = (
    'event.action:uncaught_exception AND NOT error.type:"horovod.common.exceptions.HorovodInternalError"'
    ' AND NOT message:"Horovod has been shut down"'
)

SEARCHES: Final = (
    SavedSearch(
        "errors-by-rank",
        "Errors by rank",
        "Events at level error or above, rank by rank: which rank failed, at which step, and how.",
        level_query("error"),
        ("rank", "host.name", "step", "message"),
        (("rank", "asc"), ("@timestamp", "asc")),
    ),
    SavedSearch(
        "stall-warnings",
        "Stall warnings",
        "Stalls reported by Horovod's stall inspector (with the missing ranks) and by hvdlog's watchdog in each rank"
        " (which also works under Gloo, where Horovod 0.28.1 reports none; under a DistributedOptimizer it names the"
        " tensors each rank waits for and those it has not submitted). Resolved notices are left out.",
        "_exists_:horovod.stall.source AND NOT event.action:stall_resolved",
        (
            "rank",
            "host.name",
            "horovod.stall.source",
            "horovod.stall.missing_ranks",
            "horovod.stall.seconds",
            "horovod.stall.operation",
            "horovod.stall.tensors",
            "horovod.stall.unsubmitted_tensors",
            "message",
        ),
    ),
    SavedSearch(
        "elastic-resets",
        "Elastic resets",
        "Every reset of an elastic job, one event per surviving process and reset, oldest first: the new rank and size,"
        " the old ones, why (failure, hosts_added, hosts_removed) and the step the state was restored to. The membership"
        " epoch (horovod.elastic.epoch) on every later event of that process tells replayed steps apart.",
        "event.action:elastic_reset",
        (
            "job",
            "host.name",
            "process.pid",
            "horovod.elastic.epoch",
            "horovod.elastic.reason",
            "horovod.elastic.previous_rank",
            "rank",
            "horovod.elastic.previous_size",
            "size",
            "horovod.elastic.restored_step",
        ),
        (("@timestamp", "asc"),),
    ),
    SavedSearch(
        "horovod-debug-by-rank",
        "Horovod DEBUG by rank",
        "Trace and debug lines of Horovod's C++ core (HOROVOD_LOG_LEVEL=debug), rank by rank in time order.",
        f'event.dataset:"{CORE_DATASET}" AND log.level:(trace OR debug)',
        ("rank", "log.level", "log.origin.file.name", "log.origin.file.line", "message"),
        (("rank", "asc"), ("@timestamp", "asc")),
    ),
    SavedSearch(
        "job-timeline",
        "Job timeline",
        "Every event of a job, all ranks and sources, oldest first. Pick the job with a `job` filter"
        " or with the Job control of the Horovod training dashboard.",
        "",
        ("job", "rank", "host.name", "event.dataset", "log.level", "step", "message"),
        (("@timestamp", "asc"),),
    ),
    SavedSearch(
        "latest-errors",
        "Latest errors",
        "Events at level error or above, newest first, with the exception type.",
        level_query("error"),
        ("rank", "host.name", "step", "error.type", "message"),
    ),
    SavedSearch(
        "failures",
        "Failures across jobs",
        "Every rank's own uncaught exception, newest first, across jobs: the job, where it ran, the exception."
        " The shutdown the other ranks raise because of it is left out. `hvdlog history` groups them by"
        " fingerprint and tests hosts for being behind more failures than their share.",
        OWN_FAILURE,
        ("job", "host.name", "rank", "step", "error.type", "error.message"),
    ),
    SavedSearch(
        "rejected-events",
        "Rejected events",
        "Events Elasticsearch refused to index (a field of the wrong type, a bad @timestamp...), read back from"
        " Logstash's dead-letter queue: why (error.message) and the whole original event (event.original)."
        " Kept as long as the other data streams (ILM).",
        f'event.dataset:"{REJECTED_DATASET}"',
        ("job", "rank", "host.name", "error.type", "error.message", "event.original"),
    ),
)

CHARTS: Final = (
    Chart(
        "events-by-level",
        "Events by level over time",
        "How many events each level produced over time, all ranks.",
        "bar_stacked",
        (DateHistogram(), Terms("log.level", "Level", size=len(LEVELS))),
        (Count(),),
    ),
    Chart(
        "errors-by-rank-chart",
        "Errors by rank",
        "Number of events at level error or above per rank.",
        "bar",
        (Terms("rank", "Rank", size=100),),
        (Count("Errors"),),
        query=level_query("error"),
    ),
    Chart(
        "last-step-per-rank",
        "Last step per rank",
        "The straggler view: the latest step each rank logged and when; the lowest step is at the top.",
        "table",
        (Terms("rank", "Rank", size=1000, order="key"),),
        (LastValue("step", "Last step"), Max("@timestamp", "Last event")),
        query="_exists_:step",
        table_sort=(1, "asc"),
    ),
    Chart(
        "who-made-the-collective-wait",
        "Who made the collective wait",
        "From Horovod's timeline: seconds the other ranks waited, per rank that was ready last, over time."
        " One rank dominating is the straggler; the rank's share is also in `hvdlog stragglers`.",
        "bar_stacked",
        (DateHistogram(), Terms("horovod.timeline.last_rank", "Last ready rank", size=100, order="key")),
        (Sum("horovod.timeline.wait_seconds", "Wait caused (s)"),),
        query=f'event.dataset:"{TIMELINE_DATASET}" AND _exists_:horovod.timeline.last_rank',
    ),
    Chart(
        "step-time-per-rank",
        "Step time per rank",
        "Mean wall time of a training step, one line per rank (steps that log step_seconds)."
        " In synchronous training the lines move together; a rank above the others is slow outside the collectives.",
        "line",
        (DateHistogram(), Terms("rank", "Rank", size=100, order="key")),
        (Average("step_seconds", "Step time (s)"),),
        query="_exists_:step_seconds",
    ),
    Chart(
        "resources-per-rank",
        "Resources per rank",
        "From each rank's periodic resources events (configure(resources=...)): mean CPU % of its process,"
        " largest resident memory, mean host memory in use and mean GPU utilisation. A straggler with a busy"
        " CPU or a full host explains itself.",
        "table",
        (Terms("rank", "Rank", size=1000, order="key"),),
        (
            Average("resources.process.cpu_percent", "CPU % (mean)"),
            Max("resources.process.rss_bytes", "RSS bytes (max)"),
            Average("resources.host.memory_used_percent", "Host memory % (mean)"),
            Average("resources.gpu.utilization_percent", "GPU % (mean)"),
        ),
        query="event.action:resources",
        table_sort=(0, "asc"),
    ),
    Chart(
        "failures-by-host",
        "Failures by host",
        "Across jobs: how many ranks' own uncaught exceptions (not Horovod's shutdown on the other ranks) each host"
        " ran, and the latest. A host far above the others is a suspect; `hvdlog history` weighs it against its"
        " share of ranks.",
        "table",
        (Terms("host.name", "Host", size=1000),),
        (Count("Failures"), Max("@timestamp", "Last failure")),
        query=OWN_FAILURE,
        table_sort=(1, "desc"),
    ),
)

DASHBOARD: Final = Dashboard(
    "horovod-training",
    "Horovod training",
    "One training job at a glance: levels over time, errors and stalls by rank, the straggler view."
    " Pick a job and ranks with the controls.",
    (Control("job", "Job", ("_key", "desc")), Control("rank", "Rank", ("_key", "asc"))),
    (
        Panel("events-by-level", 0, 0, 32, 12),
        Panel("errors-by-rank-chart", 32, 0, 16, 12),
        Panel("last-step-per-rank", 0, 12, 16, 16),
        Panel("stall-warnings", 16, 12, 32, 16),
        Panel("latest-errors", 0, 28, 48, 16),
        Panel("rejected-events", 0, 44, 48, 12),
        Panel("who-made-the-collective-wait", 0, 56, 24, 14),
        Panel("step-time-per-rank", 24, 56, 24, 14),
        Panel("resources-per-rank", 0, 70, 48, 12),
        Panel("elastic-resets", 0, 82, 48, 12),
    ),
)

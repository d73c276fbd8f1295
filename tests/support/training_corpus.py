"""A realistic multi-rank corpus written with the field contract, for Elasticsearch and Kibana tests.

Job ``demo``: 6 ranks on 2 hosts train 16 steps; rank 4 turns straggler at step 10 and
hangs after step 14, so the others wait in allreduce: watchdog stall events on every
rank, Horovod's stall inspector warning (missing rank 4) on rank 0, then rank 4 dies
with a traceback and the others log Horovod core errors and SIGTERM. Rank 1 had a short
stall that resolved. Ranks 0 and 1 also print Horovod DEBUG lines, one launcher line
fails to parse, and one event carries undeclared keys (``extra``). Job ``other`` (2 ranks)
has one error, so job filters have something to exclude.

Every document has a unique ``doc_id`` and a unique millisecond timestamp (ES ``date``
keeps milliseconds), so "sorted by time" has exactly one right answer.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hvdlog.documents import Document, expand

__all__ = ["JOB_DEMO", "JOB_OTHER", "STRAGGLER", "corpus", "flat_corpus", "index_corpus"]

JOB_DEMO = "demo-20261129-150000"
JOB_OTHER = "other-20261128-090000"
STRAGGLER = 4
_T0 = datetime(2026, 11, 29, 15, 0, 0, tzinfo=timezone.utc)


class _Clock:
    """Hands out strictly increasing timestamps, a few milliseconds apart."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def tick(self, ms: int = 7) -> str:
        self.now += timedelta(milliseconds=ms)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class _Job:
    def __init__(self, job: str, hosts: list[str], per_host: int, clock: _Clock, out: list[dict[str, Any]]) -> None:
        self.job, self.hosts, self.per_host, self.clock, self.out = job, hosts, per_host, clock, out
        self.size = len(hosts) * per_host

    def event(self, rank: int, level: str, message: str, dataset: str = "horovod.app", ms: int = 7, **fields: Any) -> None:
        base = {
            "@timestamp": self.clock.tick(ms),
            "log.level": level,
            "message": message,
            "rank": rank,
            "local_rank": rank % self.per_host,
            "size": self.size,
            "local_size": self.per_host,
            "host.name": self.hosts[rank // self.per_host],
            "process.pid": 4000 + rank,
            "job": self.job,
            "event.dataset": dataset,
            "data_stream.type": "logs",
            "data_stream.dataset": dataset,
        }
        base.update(fields)
        base["doc_id"] = f"{self.job.split('-')[0]}-{len(self.out):04d}"
        self.out.append(base)


def _demo(clock: _Clock, out: list[dict[str, Any]]) -> None:
    job = _Job(JOB_DEMO, ["node1", "node2"], 3, clock, out)
    for rank in range(job.size):
        job.event(rank, "info", "training started", **{"log.logger": "hvdlog.train", "extra": {"batch_size": 64, "model": "cnn"}})
    for step in range(16):
        for rank in range(job.size):
            if rank == STRAGGLER and step >= 15:
                continue
            slow = rank == STRAGGLER and step >= 10
            job.event(rank, "info", "train step", ms=40 if slow else 7, step=step, epoch=step // 8, loss=round(2.0 / (step + 1), 4),
                      lr=0.01, samples_per_sec=300.0 if slow else 810.0 + rank)
            if rank in (0, 1) and step % 5 == 0:
                job.event(rank, "debug", "[0]: Sent 1 tensors to coordinator", "horovod.core",
                          **{"log.logger": "horovod", "log.origin.file.name": "/src/horovod/common/operations.cc", "log.origin.file.line": 921})
                job.event(rank, "trace", "Processing 1 tensors", "horovod.core",
                          **{"log.logger": "horovod", "log.origin.file.name": "/src/horovod/common/controller.cc", "log.origin.file.line": 340})
        if step == 5:
            job.event(1, "warning", "stall", step=5, **{"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 12.0,
                                                       "horovod.stall.operation": "allreduce"})
            job.event(1, "info", "stall resolved", step=5, **{"event.action": "stall_resolved", "horovod.stall.source": "watchdog",
                                                             "horovod.stall.seconds": 13.5})
    for rank in range(job.size):
        step = 14 if rank == STRAGGLER else 15
        job.event(rank, "warning", "stall", ms=900, step=step, **{"event.action": "stall", "horovod.stall.source": "watchdog",
                                                                  "horovod.stall.seconds": 60.0, "horovod.stall.operation": "allreduce",
                                                                  "horovod.stall.tensors": ["allreduce.loss"]})
    job.event(0, "warning", "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks"
              " and are waiting for remainder of ranks for more than 60 seconds.", "horovod.core",
              **{"log.logger": "horovod", "log.origin.file.name": "/src/horovod/common/stall_inspector.cc", "log.origin.file.line": 79,
                 "horovod.stall.source": "inspector", "horovod.stall.missing_ranks": [STRAGGLER],
                 "horovod.stall.tensors": ["allreduce.loss", "allreduce.grad.0"], "horovod.stall.seconds": 60.0,
                 "horovod.stall.shutdown": False})
    job.event(STRAGGLER, "critical", "uncaught exception", step=14, **{
        "event.action": "uncaught_exception", "error.type": "RuntimeError", "error.message": "injected fault on rank 4",
        "error.stack_trace": 'Traceback (most recent call last):\n  File "train.py", line 80, in main\nRuntimeError: injected fault on rank 4'})
    # Horovod's shutdown as the training script sees it: an uncaught exception too, but collateral.
    job.event(0, "critical", "uncaught exception", step=15, **{
        "event.action": "uncaught_exception", "error.type": "horovod.common.exceptions.HorovodInternalError",
        "error.message": "Horovod has been shut down. This was caused by an exception on one of the ranks or an asynchronous"
                         " operation that was canceled"})
    for rank in range(job.size):
        if rank != STRAGGLER:
            job.event(rank, "error", "Horovod has been shut down. This was caused by an exception on one of the ranks.", "horovod.core",
                      **{"log.logger": "horovod", "log.origin.file.name": "/src/horovod/common/operations.cc", "log.origin.file.line": 1200})
            job.event(rank, "warning", "signal", step=15, **{"event.action": "signal"})
    job.event(2, "info", "[2]<stderr>:unexpected output that matched no pattern", "horovod.launcher",
              **{"tags": ["_hvdlog_parse_failure"], "event.kind": "pipeline_error", "horovod.launcher.stream": "stderr",
                 "horovod.launcher.format": "gloo"})


def _other(clock: _Clock, out: list[dict[str, Any]]) -> None:
    job = _Job(JOB_OTHER, ["node3"], 2, clock, out)
    for step in range(3):
        for rank in range(job.size):
            job.event(rank, "info", "train step", step=step, epoch=0, loss=1.0, lr=0.1, samples_per_sec=500.0)
    job.event(1, "error", "loss is NaN", step=2, **{"error.type": "FloatingPointError", "error.message": "loss is NaN"})


def flat_corpus() -> list[dict[str, Any]]:
    """The documents with flat dotted keys (as our JSON files hold them), plus ``doc_id``."""
    out: list[dict[str, Any]] = []
    _other(_Clock(_T0 - timedelta(days=1)), out)
    _demo(_Clock(_T0), out)
    return out


def corpus() -> list[tuple[str, Document]]:
    """``(doc_id, nested document)`` pairs, as Logstash hands them to Elasticsearch."""
    result = []
    for flat in flat_corpus():
        flat = dict(flat)
        doc_id = flat.pop("doc_id")
        result.append((doc_id, expand(flat)))
    return result


def index_corpus(client: Any, namespace: str) -> dict[str, Document]:
    """Install our templates, bulk-create every document in its ``logs-<dataset>-<namespace>`` stream, refresh.

    Returns the documents by id, as indexed (with ``data_stream.namespace`` set).
    """
    from elasticsearch import helpers
    from hvdlog.elastic.install import ElasticsearchInstaller
    from hvdlog.elastic.templates import data_stream_name

    list(ElasticsearchInstaller(client, "test").install(namespace))
    docs = {}
    actions = []
    for doc_id, doc in corpus():
        doc["data_stream"]["namespace"] = namespace
        docs[doc_id] = doc
        stream = data_stream_name(doc["event"]["dataset"], namespace)
        actions.append({"_op_type": "create", "_index": stream, "_id": doc_id, "_source": doc})
    created, errors = helpers.bulk(client, actions, raise_on_error=False, refresh="wait_for")
    assert not errors and created == len(actions), errors[:3]
    return docs

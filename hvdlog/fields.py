"""The field contract: the one place every field name, type and dataset is declared.

Everything else (the JSON renderer, Logstash filters, Elasticsearch templates, Kibana
objects, the CLI) is generated from this module or checked against it by a test.
It imports nothing of ours, on purpose: the training side, the parsers and the build
scripts can all load it cheaply.

Names follow ECS (version :data:`ECS_VERSION`) wherever ECS names the thing; ``rank``,
``local_rank``, ``size``, ``local_size``, ``step``, ``epoch`` and ``job`` stay top-level
because they are the user's vocabulary; parsed Horovod data lives under ``horovod.*``;
keys nobody declared go to the ``extra`` catch-all (type ``flattened``) so they cannot
explode the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "APP_DATASET",
    "CORE_DATASET",
    "DATASETS",
    "ECS_VERSION",
    "EVIDENCE_KINDS",
    "EVIDENCE_SOURCES",
    "EXTRA",
    "FIELDS",
    "FIELDS_BY_NAME",
    "LAUNCHER_DATASET",
    "LEVELS",
    "PARSE_FAILURE_TAG",
    "REJECTED_DATASET",
    "TIMELINE_DATASET",
    "UNTIMED",
    "Field",
    "level_at_least",
]

ECS_VERSION: Final = "8.11.0"

Origin = Literal["ecs", "hvdlog", "horovod"]


@dataclass(frozen=True, slots=True)
class Field:
    """One field of every document we write: its dotted name, ES type and why it exists."""

    name: str
    type: str
    origin: Origin
    description: str
    example: object = None


#: The datasets by name, for code (every module spells them through these).
APP_DATASET: Final = "horovod.app"
CORE_DATASET: Final = "horovod.core"
LAUNCHER_DATASET: Final = "horovod.launcher"
TIMELINE_DATASET: Final = "horovod.timeline"
REJECTED_DATASET: Final = "horovod.rejected"

#: Which source a document came from; each has its own data stream ``logs-<dataset>-<ns>``.
DATASETS: Final = {
    APP_DATASET: "structured JSON events written by hvdlog in the training processes",
    CORE_DATASET: "lines printed by Horovod's C++ core (log lines, stall inspector warnings)",
    LAUNCHER_DATASET: "anything else a rank printed: launcher output, Python tracebacks, prints",
    TIMELINE_DATASET: "negotiations and collective runs derived from Horovod's timeline (which rank the others waited for)",
    REJECTED_DATASET: "events Elasticsearch refused to index, read back from Logstash's dead-letter queue:"
    " the reason in error.message, the original event as JSON text in event.original",
}

#: What a document that is evidence about a failure says (``hvdlog.evidence.kind``; docs/failure-model.md).
EVIDENCE_KINDS: Final = (
    "exception", "signal", "exit_status", "peer_loss", "horovod_shutdown", "launcher_verdict", "expected_exit", "stall_report",
    # the safety net: an error line, or a line with the shape of a failure, that no specific rule classifies
    "unrecognised",
    # a known-benign error line (TensorFlow's `failed call to cuInit` on a rank that goes on): no failure
    "benign",
    # NCCL's WARN line and the `file.cc:N -> 2` lines that unwind its error: a failure only when they end the
    # rank's output (NCCL may go on after a WARN: a fallback from InfiniBand to sockets)
    "nccl_warn", "nccl_unwind",
)
#: Who says it (``hvdlog.evidence.source``): the rank itself, or a launcher about a rank.
EVIDENCE_SOURCES: Final = ("rank", "horovodrun", "openmpi_box", "mpirun_noticed", "srun", "hydra", "elastic_driver")

#: Lower-case level names, in increasing severity (the values of ``log.level``).
LEVELS: Final = ("trace", "debug", "info", "warning", "error", "critical")

#: Tag added to a line that no pattern matched; the raw line is kept in ``message``.
PARSE_FAILURE_TAG: Final = "_hvdlog_parse_failure"

#: Set (true) on a stored document whose ``@timestamp`` is when it was read, not a time of its
#: own: a data stream needs one, so an untimed line is stored with its read time (``hvdlog
#: import``'s; Filebeat's on the Logstash path).
UNTIMED: Final = "hvdlog.untimed"

#: The catch-all object for undeclared keys.
EXTRA: Final = "extra"

FIELDS: Final[tuple[Field, ...]] = (
    # --- ECS base -------------------------------------------------------------------
    Field("@timestamp", "date", "ecs",
          "When the event happened, UTC: the line's own time; `hvdlog parse` leaves it out for a line that has none"
          " (Elasticsearch: the time Logstash received it).", "2026-11-29T15:47:55.123456Z"),
    Field("message", "text", "ecs", "The human message (our event name, or the text after a native header).", "step done"),
    Field("tags", "keyword", "ecs", "Markers such as the parse-failure tag.", [PARSE_FAILURE_TAG]),
    Field("log.level", "keyword", "ecs", "Lower-case severity, one of LEVELS.", "info"),
    Field("log.logger", "keyword", "ecs", "Logger name (stdlib logger, or `horovod` for the C++ core).", "hvdlog.train"),
    Field("log.origin.file.name", "keyword", "ecs", "Source file that emitted the line.", "/src/horovod/common/stall_inspector.cc"),
    Field("log.origin.file.line", "long", "ecs", "Line in that source file.", 79),
    Field("log.origin.function", "keyword", "ecs", "Function that emitted the event.", "train_step"),
    Field("log.file.path", "keyword", "ecs", "The file the line was read from.", "/logs/job-1/node1/rank-0.jsonl"),
    Field(
        "log.dropped", "long", "hvdlog",
        "Lines that could not be written (disk full, read-only, capture restarted), on the `log_dropped` event written once writing works again.", 1234,
    ),
    Field(
        "hvdlog.truncated.lines", "long", "hvdlog",
        "Lines of a parsed native document's message cut past the byte cap (1 MiB, hvdlog/parse/assets/blocks.json); tag `_hvdlog_truncated`.", 12000,
    ),
    Field("hvdlog.truncated.bytes", "long", "hvdlog", "Bytes of that message cut past the byte cap.", 1450000),
    Field(
        UNTIMED, "boolean", "hvdlog",
        "True when the line has no time of its own: @timestamp is when it was read (Filebeat's read time, or `hvdlog import`'s), "
        "and the readers over Elasticsearch order it by position and give it no time, as over the files.", True,
    ),
    Field(
        "hvdlog.truncated.documents", "long", "hvdlog",
        "On Logstash's summary of one Filebeat event past the piece cap (10,000 documents): how many documents it stands for.", 40001,
    ),
    Field("host.name", "keyword", "ecs", "Host the rank ran on.", "node1"),
    Field("process.pid", "long", "ecs", "PID of the rank's process.", 4242),
    Field("process.exit_code", "long", "ecs", "Exit status of a rank, as horovodrun reports it or as the rank recorded at its end (`process_exit`).", 1),
    Field(
        "hvdlog.launcher.exit_code", "long", "hvdlog",
        "Exit status of the launcher (`horovodrun`, `mpirun`) that `hvdlog run` ran, on its `launcher_exit` event (128+N: killed by signal N).", 0,
    ),
    Field("event.dataset", "keyword", "ecs", "Source of the document, one of DATASETS.", "horovod.app"),
    Field("event.kind", "keyword", "ecs", "`event`, or `pipeline_error` when parsing failed.", "event"),
    Field(
        "event.action", "keyword", "ecs",
        "What happened, for events with a meaning: stall, stall_resolved, snapshot, signal, uncaught_exception, process_exit, launcher_exit, resources,"
        " elastic_reset, autotune_sample;"
        " negotiation or operation (timeline).", "stall",
    ),
    Field("event.id", "keyword", "ecs", "The request a `snapshot` event answers (`hvdlog snapshot`'s trigger).", "1733450000123-4242"),
    Field("process.thread.name", "keyword", "ecs", "Thread whose stack a `snapshot` event holds.", "MainThread"),
    Field("event.reason", "keyword", "ecs", "Why the event happened, e.g. the signal name of a `signal` event.", "SIGTERM"),
    Field("event.original", "keyword", "ecs", "The raw line(s), kept when parsing native output.", "[2026-...]"),
    Field("event.duration", "long", "ecs", "Duration in nanoseconds, where an event has one.", 12000000000),
    Field("error.type", "keyword", "ecs", "Exception class.", "RuntimeError"),
    Field("error.message", "text", "ecs", "Exception message, or why parsing failed.", "injected fault on rank 1"),
    Field("error.stack_trace", "text", "ecs", "Full traceback.", "Traceback (most recent call last): ..."),
    Field("data_stream.type", "keyword", "ecs", "Always `logs`.", "logs"),
    Field("data_stream.dataset", "keyword", "ecs", "Same as event.dataset.", "horovod.app"),
    Field("data_stream.namespace", "keyword", "ecs", "Deployment namespace, e.g. the cluster name.", "default"),
    # --- hvdlog: the user's vocabulary ---------------------------------------------
    Field("rank", "integer", "hvdlog", "Global Horovod rank; absent: rank unknown (a process no launcher gave a rank, `rank-unknown-pid<N>` files).", 3),
    Field("local_rank", "integer", "hvdlog", "Rank within the host.", 1),
    Field("size", "integer", "hvdlog", "Number of ranks in the job.", 8),
    Field("local_size", "integer", "hvdlog", "Number of ranks on this host.", 2),
    Field("job", "keyword", "hvdlog", "Job id (HVDLOG_JOB, else derived at start).", "mnist-20261129-154755"),
    Field("step", "long", "hvdlog", "Global training step, bound for the duration of the step.", 120),
    Field("epoch", "integer", "hvdlog", "Epoch, bound with the step.", 2),
    Field("loss", "double", "hvdlog", "Training loss (averaged over ranks where the example does so).", 0.31),
    Field("lr", "double", "hvdlog", "Learning rate.", 0.01),
    Field("samples_per_sec", "double", "hvdlog", "Throughput of this rank.", 5120.0),
    Field("step_seconds", "double", "hvdlog", "Wall time of this rank's whole step (collective waits included).", 0.31),
    Field("resources.interval_seconds", "double", "hvdlog", "Seconds between this rank's resources events.", 10.0),
    Field(
        "resources.process.cpu_percent", "double", "hvdlog",
        "CPU time of the rank's process since the previous sample, % of one core (above 100 with busy threads).", 97.5,
    ),
    Field("resources.process.rss_bytes", "long", "hvdlog", "Resident memory of the rank's process.", 1234567890),
    Field("resources.host.memory_used_percent", "double", "hvdlog", "Memory in use on the rank's host, %.", 63.2),
    Field("resources.host.memory_available_bytes", "long", "hvdlog", "Memory still available on the rank's host.", 8589934592),
    Field("resources.gpu.status", "keyword", "hvdlog", "`ok`, or why there are no GPU figures (no nvidia-ml-py, no GPU, NVML error).", "ok"),
    Field("resources.gpu.index", "integer", "hvdlog", "NVML index of the rank's GPU (local_rank modulo the GPU count).", 1),
    Field("resources.gpu.utilization_percent", "double", "hvdlog", "GPU utilisation over NVML's last sample period, %.", 88.0),
    Field("resources.gpu.memory_used_bytes", "long", "hvdlog", "GPU memory in use.", 17179869184),
    Field("resources.gpu.temperature_celsius", "double", "hvdlog", "GPU temperature.", 71.0),
    Field("resources.error", "keyword", "hvdlog", "A probe that failed (named once): its figures are left out.", "memory: PermissionError: ..."),
    Field(
        "hvdlog.evidence.kind", "keyword", "hvdlog",
        "What failure evidence the document is (set at parse time from the message table): exception, signal, exit_status,"
        " peer_loss, horovod_shutdown, launcher_verdict, expected_exit, stall_report, unrecognised, benign, nccl_warn"
        " or nccl_unwind.", "signal",
    ),
    Field(
        "hvdlog.evidence.rank", "integer", "hvdlog",
        "The rank the evidence is about, which is not always the rank that printed it (`mpirun noticed that process rank 2`);"
        " absent: rank unknown.", 2,
    ),
    Field(
        "hvdlog.evidence.source", "keyword", "hvdlog",
        "Who says it: rank, horovodrun, openmpi_box, mpirun_noticed, srun, hydra or elastic_driver.", "mpirun_noticed",
    ),
    Field(EXTRA, "flattened", "hvdlog", "Catch-all for keys this contract does not declare.", {"batch_size": 64}),
    # --- horovod: parsed from Horovod's own output, or detected by our watchdog -----
    Field("horovod.stall.missing_ranks", "integer", "horovod", "Ranks that had not joined the collective.", [1]),
    Field("horovod.stall.ready_ranks", "integer", "horovod", "Ranks that had joined (oldest stall format).", [0]),
    Field("horovod.stall.shutdown_ranks", "integer", "horovod", "Ranks marked `!`: past the shutdown time.", [1]),
    Field(
        "horovod.stall.tensors", "keyword", "horovod",
        "Tensor names the collective waits on (watchdog: submitted by this rank, not complete).", ["allreduce.loss"],
    ),
    Field(
        "horovod.stall.unsubmitted_tensors", "keyword", "horovod",
        "Watchdog: gradients this rank's DistributedOptimizer has not submitted in its current step (rank outside any collective, or mid-step).",
        ["allreduce.fc2.bias"],
    ),
    Field(
        "horovod.stall.inspection_error", "keyword", "horovod",
        "Why the watchdog could not read a DistributedOptimizer's pending tensors.", "RuntimeError: ...",
    ),
    Field("horovod.stall.seconds", "double", "horovod", "How long the stall has lasted (or the threshold reported).", 60.0),
    Field("horovod.stall.shutdown", "boolean", "horovod", "Horovod announced it will shut down because of the stall.", False),
    Field("horovod.stall.source", "keyword", "horovod", "`inspector` (Horovod's message) or `watchdog` (ours).", "watchdog"),
    Field("horovod.stall.operation", "keyword", "horovod", "The collective waited in, when known (allreduce, broadcast, ...).", "allreduce"),
    Field("horovod.stall.stack", "text", "horovod", "Python stack of the stalled thread (watchdog).", "  File \"train.py\", line 80, in main ..."),
    Field("horovod.timeline.tensor", "keyword", "horovod", "Tensor (collective) name in Horovod's timeline.", "allreduce.fc1.weight"),
    Field("horovod.timeline.operation", "keyword", "horovod", "Collective: ALLREDUCE, BROADCAST, ALLGATHER...", "ALLREDUCE"),
    Field("horovod.timeline.start_us", "long", "horovod", "Microseconds since the timeline started, when the record began.", 5745108),
    Field("horovod.timeline.last_rank", "integer", "horovod", "The rank that became ready last in a negotiation (the one the others waited for).", 1),
    Field("horovod.timeline.wait_seconds", "double", "horovod", "Seconds all other ranks were ready and waited for the last rank alone.", 0.131732),
    Field("horovod.timeline.negotiation_seconds", "double", "horovod", "Length of the negotiation, first request seen to all ready.", 0.131734),
    Field("horovod.timeline.ready_ranks", "integer", "horovod", "Ranks in the order they became ready.", [0, 1]),
    Field(
        "horovod.timeline.ready_seconds", "double", "horovod",
        "When each of ready_ranks became ready, seconds after the negotiation began.", [0.000002, 0.131734],
    ),
    Field("horovod.timeline.queue_seconds", "double", "horovod", "Seconds a collective run spent queued or waiting for data.", 0.000012),
    Field("horovod.timeline.memcpy_seconds", "double", "horovod", "Seconds a collective run spent copying into and out of the fusion buffer.", 0.000014),
    Field(
        "horovod.timeline.communication_seconds", "double", "horovod",
        "Seconds a collective run spent communicating (MPI_ALLREDUCE, GLOO_ALLREDUCE...).", 0.000248,
    ),
    # --- Horovod's elastic driver on horovodrun's console (messages.json HOROVOD_ELASTIC_* rows) ---
    Field("horovod.elastic.workers", "long", "horovod", "The driver's `reset workers: N`: the new world size.", 3),
    Field(
        "horovod.elastic.host", "keyword", "horovod",
        "The host a driver line names (`start worker process`, `record state`, `blacklist failing host`, a scale-down's `what()`).", "localhost",
    ),
    Field("horovod.elastic.slot", "long", "horovod", "The local slot of `host[slot]` in a driver line or a scale-down's `what()`.", 2),
    Field("horovod.elastic.assigned_rank", "long", "horovod", "The driver's `rank and size: R S`: the rank given to a slot (-1: the slot was removed).", 1),
    Field("horovod.elastic.assigned_size", "long", "horovod", "The size in the same line (-1: the slot was removed).", 3),
    Field("horovod.elastic.state", "keyword", "horovod", "The driver's `record state: host[slot] = STATE`: FAILURE, READY or SUCCESS.", "FAILURE"),
    Field("horovod.elastic.count", "long", "horovod", "The count in the driver's `... count == N -> stop running`.", 2),
    Field("horovod.elastic.stop_reason", "keyword", "horovod", "Why the driver stopped the job: success, all_failed, all_blacklisted.", "all_blacklisted"),
    Field(
        "horovod.elastic.epoch", "integer", "horovod",
        "Elastic jobs: the membership epoch, this process's reset count; on every event from the first reset on (absent: 0).", 1,
    ),
    Field("horovod.elastic.previous_rank", "integer", "horovod", "On an `elastic_reset` event: the rank before the reset (`rank` is the new one).", 2),
    Field("horovod.elastic.previous_size", "integer", "horovod", "On an `elastic_reset` event: the job size before the reset.", 3),
    Field("horovod.elastic.previous_local_rank", "integer", "horovod", "On an `elastic_reset` event: the local rank before the reset.", 0),
    Field(
        "horovod.elastic.reason", "keyword", "horovod",
        "On an `elastic_reset` event: failure (a peer was lost), hosts_added, hosts_removed or unknown.", "failure",
    ),
    Field(
        "horovod.elastic.restored_step", "long", "horovod",
        "On an `elastic_reset` event: the step the state holds after the reset (its `step`, `global_step` or `batch`), when known.", 30,
    ),
    Field("horovod.autotune.sample", "long", "horovod", "Autotune: the sample's line number in HOROVOD_AUTOTUNE_LOG (1 = first after the header).", 3),
    Field("horovod.autotune.cycle_time_ms", "double", "horovod", "Autotune: the cycle time tried (HOROVOD_CYCLE_TIME, ms).", 5.0),
    Field("horovod.autotune.fusion_threshold_mb", "double", "horovod", "Autotune: the tensor fusion threshold tried (HOROVOD_FUSION_THRESHOLD, MB).", 64.0),
    Field("horovod.autotune.cache_enabled", "boolean", "horovod", "Autotune: whether the response cache was on.", True),
    Field("horovod.autotune.hierarchical_allreduce", "boolean", "horovod", "Autotune: hierarchical allreduce on.", False),
    Field("horovod.autotune.hierarchical_allgather", "boolean", "horovod", "Autotune: hierarchical allgather on.", False),
    Field("horovod.autotune.torus_allreduce", "boolean", "horovod", "Autotune: torus allreduce on.", False),
    Field("horovod.autotune.score", "double", "horovod", "Autotune: the sample's score (bytes reduced per microsecond; higher is better).", 0.072),
    Field(
        "horovod.autotune.chosen", "boolean", "horovod",
        "Autotune: this line is the setting Horovod kept (the repeat of the best sample it writes when tuning ends).", True,
    ),
    Field("horovod.launcher.stream", "keyword", "horovod", "stdout or stderr of the rank.", "stderr"),
    Field("horovod.launcher.job", "keyword", "horovod", "Open MPI job id from a `[job,rank]` tag.", "1"),
    Field("horovod.launcher.format", "keyword", "horovod", "Which launcher tag was seen: gloo, openmpi, mpich, none.", "gloo"),
)

FIELDS_BY_NAME: Final = {field.name: field for field in FIELDS}

_LEVEL_INDEX: Final = {name: index for index, name in enumerate(LEVELS)}


def level_at_least(level: str, minimum: str) -> bool:
    """True when ``level`` is as severe as ``minimum`` or more (unknown levels count as info)."""
    return _LEVEL_INDEX.get(level, 2) >= _LEVEL_INDEX[minimum]

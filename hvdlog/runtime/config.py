"""``hvdlog.configure()``: the one setup call a training script makes.

It decides everything once — file path, static fields, level filter, console sink,
hooks, native capture, watchdog — so each log call runs a fixed, lean path. Bad
settings raise here with a plain sentence, never at log time. Callable before and
after ``hvd.init()``; calling it again replaces the previous configuration.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import structlog

from hvdlog import layout
from hvdlog.fields import APP_DATASET, LEVELS
from hvdlog.runtime import ending
from hvdlog.runtime import rank as _rank
from hvdlog.runtime import resets as _resets
from hvdlog.runtime.capture import NativeCapture
from hvdlog.runtime.hooks import Hooks
from hvdlog.runtime.logger import LEVEL_NUMBERS, make_bound_logger_class
from hvdlog.runtime.pending import track_distributed_optimizers
from hvdlog.runtime.renderer import EcsJsonRenderer
from hvdlog.runtime.resource_sampler import ResourceSampler, resources_interval
from hvdlog.runtime.secrets import Redactor, secret_values
from hvdlog.runtime.snapshot import SnapshotTrigger
from hvdlog.runtime.timeline_export import TimelineCapture, timeline_requested
from hvdlog.runtime.watchdog import StallWatchdog
from hvdlog.runtime.writer import RankFileWriter, foreign_owner, make_private_dirs, not_regular

__all__ = ["Configuration", "configure", "default_job_id", "get_logger", "refresh_rank", "shutdown"]

@dataclass
class Configuration:
    """What :func:`configure` set up; returned so tests and tools can look."""

    path: Path
    job: str
    host: str
    level: str
    static: dict[str, Any]
    writer: RankFileWriter
    renderer: EcsJsonRenderer
    hooks: Hooks | None = None
    capture: NativeCapture | None = None
    watchdog: StallWatchdog | None = None
    timeline: TimelineCapture | None = None
    resources: ResourceSampler | None = None
    local_rank: int | None = None

    def emit(self, level: str, message: str, fields: dict[str, Any]) -> None:
        """Log one event outside structlog (hooks, watchdog, capture): same renderer, same
        file; never raises."""
        if LEVEL_NUMBERS.get(level, 20) >= LEVEL_NUMBERS[self.level]:
            self.writer.write(self.renderer.render_safely(level, message, fields))

    def try_emit(self, level: str, message: str, fields: dict[str, Any]) -> bool:
        """:meth:`emit` for a caller that keeps the event and retries when it could not be
        written (the capture's drop counts): False then, and not counted as dropped. The writer
        looks first whether its file was deleted: the capture's own file being deleted (the job
        folder removed) is when this is called, and its report must not go to a deleted file."""
        return self.writer.write(self.renderer.render_safely(level, message, fields), count_drop=False, look_first=True)

    def dropped_note(self, count: int, reason: str) -> bytes:
        """The ``log_dropped`` line the writer puts before the first line that gets through."""
        return self.renderer.render_safely(
            "warning",
            f"{count} log lines were dropped ({reason})",
            {"event.action": "log_dropped", "event.reason": reason, "log.dropped": count},
        )


_current: Configuration | None = None

# One renderer and one writer per process, re-pointed by each configure(): structlog
# caches bound loggers on first use, and those must follow a reconfiguration.
_WRITER = RankFileWriter()
_RENDERER = EcsJsonRenderer({})


def default_job_id(env: dict[str, str] | None = None, script: str | None = None) -> str:
    """A job id every rank of one launch agrees on without talking to the others.

    ``HVDLOG_JOB`` wins; else the scheduler's or launcher's job id (Slurm, PMIx/Open MPI,
    the Gloo rendezvous port); else the script name and the start minute.
    """
    env = dict(os.environ) if env is None else env
    if env.get("HVDLOG_JOB"):
        return layout.safe_job_id(env["HVDLOG_JOB"])
    stem = Path(script or (sys.argv[0] if sys.argv and sys.argv[0] else "python")).stem.lstrip("-.") or "python"
    for key in ("SLURM_JOB_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "HOROVOD_GLOO_RENDEZVOUS_PORT"):
        if env.get(key):
            return layout.safe_job_id(f"{stem}-{time.strftime('%Y%m%d')}-{env[key]}")
    return layout.safe_job_id(f"{stem}-{time.strftime('%Y%m%d-%H%M')}")


def _rank_info() -> _rank.RankInfo:
    return _rank.from_horovod() or _rank.from_environment()


#: Set by shutdown() before the console fd (a dup kept by the capture) is closed.
console_off = threading.Event()


def _console_sink(fd: int, redactor: Redactor | None) -> Callable[[dict[str, Any]], None]:
    """A short human line per event, for a person watching rank 0's terminal (secrets redacted too)."""
    console_off.clear()

    def write(event: dict[str, Any]) -> None:
        if console_off.is_set():
            return
        step = event.get("step")
        rank = event.get("rank")  # None outside a launcher: shown as "-", never "None"
        where = f"rank {'-' if rank is None else rank}" + (f" step {step}" if step is not None else "")
        line = f"{event['@timestamp'][11:23]} {event['log.level'].upper():8} [{where}] {event['message']}\n"
        with contextlib.suppress(Exception):  # the console is a courtesy, never a failure
            data = line.encode(errors="replace")
            os.write(fd, redactor(data) if redactor else data)

    return write


def configure(
    *,
    root: str | os.PathLike[str] | None = None,
    job: str | None = None,
    level: str = "info",
    console: bool | None = None,
    capture_native: bool = True,
    max_bytes: int = 100 * 1024 * 1024,
    backups: int = 5,
    stall_after: float | None = 60.0,
    stall_repeat: float | None = None,
    install_hooks: bool = True,
    redact: bool = True,
    timeline: bool | None = None,
    resources: float | None = None,
) -> Configuration:
    """Set up rank-aware JSON logging for this process: validate, open the files, start the optional parts.

    Args:
        root: directory for all jobs' logs (``HVDLOG_ROOT``, else ``./hvdlog-logs``).
        job: job id (``HVDLOG_JOB``, else derived, see :func:`default_job_id`).
        level: least severe level written: trace, debug, info, warning, error, critical.
            Loggers structlog already cached keep the level they were first used with.
        console: also print short human lines on the terminal; default: rank 0 only.
        capture_native: keep fds 1 and 2 (Horovod's C++ output) in per-rank files.
        max_bytes, backups: size-based rotation of each file (0 disables).
        stall_after: seconds without progress before a stall event (None disables).
        stall_repeat: seconds between repeated stall events (default: stall_after).
        install_hooks: route stdlib logging, warnings, uncaught exceptions and SIGTERM here.
        redact: replace values of secret-looking environment variables.
        timeline: have Horovod write its timeline into this job's directory, rotated like the
            files (``HVDLOG_TIMELINE=1``); call before ``hvd.init()``. See :mod:`hvdlog.runtime.timeline_export`.
        resources: seconds between ``resources`` events (CPU, memory, GPU) of this rank
            (``HVDLOG_RESOURCES``); None or 0 disables. See :mod:`hvdlog.runtime.resource_sampler`.

    .. versionadded:: 0.1.0
    """
    global _current  # one process, one logging configuration
    level = level.lower()
    resources_every = _validate(level, stall_after, max_bytes, backups, resources)
    shutdown()
    _end_lingering_capture()
    config = _open(root, job, level, console, capture_native, (max_bytes, backups), redact)
    # The optional parts, each one line: a part that cannot start is said once; training goes on without it.
    if install_hooks:
        config.hooks = _start_part(config, "hooks", lambda: _started(Hooks(config.emit, max(LEVEL_NUMBERS[level], logging.DEBUG)), "install"))
    _patch_horovod_init()
    track_distributed_optimizers()
    if timeline_requested(timeline):
        config.timeline = _start_part(config, "timeline capture", lambda: _timeline(config, max_bytes, backups))
    if resources_every is not None:
        config.resources = _start_part(config, "resources sampler", lambda: _started(ResourceSampler(config.emit, resources_every, config.local_rank)))
    if stall_after is not None:
        config.watchdog = _start_part(config, "stall watchdog", lambda: _watchdog(config, stall_after, stall_repeat))
    _current = config
    _start_part(config, "elastic reset tracking", lambda: _track_resets(config))
    return config


def _track_resets(config: Configuration) -> None:
    """Horovod's elastic reset path refreshes the rank fields and logs a reset event (:mod:`hvdlog.runtime.resets`)."""
    _resets.install()
    incarnations: list[Callable[[int], None]] = [config.timeline.next_incarnation] if config.timeline else []
    _resets.tracker.attach(config.emit, _rank_fields, config.renderer.update_static, incarnations)


def _validate(level: str, stall_after: float | None, max_bytes: int, backups: int, resources: float | None) -> float | None:
    """Refuse bad settings with one sentence (before anything is touched); the resources interval."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}: use one of {', '.join(LEVELS)}")
    if stall_after is not None and stall_after <= 0:
        raise ValueError("stall_after must be a positive number of seconds, or None to disable the watchdog")
    if max_bytes < 0 or backups < 0:
        raise ValueError("max_bytes and backups must be zero or positive")
    return resources_interval(resources)


_Part = TypeVar("_Part")


def _start_part(config: Configuration, name: str, start: Callable[[], _Part | None]) -> _Part | None:
    """Build and start one optional part; when that fails, a warning event (and one line on
    stderr) says so, and training goes on without the part."""
    try:
        return start()
    except Exception as exc:  # noqa: BLE001 - logging must never stop training ("can't start new thread", EMFILE, ...)
        _say(f"hvdlog: {name} not started: {type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            config.emit("warning", f"{name} not started", {"error.type": type(exc).__name__, "error.message": str(exc)})
        return None


def _started(part: _Part, method: str = "start") -> _Part:
    getattr(part, method)()
    return part


def _timeline(config: Configuration, max_bytes: int, backups: int) -> TimelineCapture:
    capture = TimelineCapture(
        config.path.parent, config.emit, max_bytes=max_bytes, backups=backups, rank=lambda: config.static.get("rank"),
    )
    capture.prepare()
    capture.start()
    return capture


def _watchdog(config: Configuration, stall_after: float, stall_repeat: float | None) -> StallWatchdog:
    watchdog = StallWatchdog(config.emit, stall_after, stall_repeat)
    watchdog.on_tick = _watchdog_tick
    watchdog.snapshot = SnapshotTrigger(config.path.parent.parent, config.emit).poll  # <root>/<job>/<host>/rank-N.jsonl
    if config.capture is not None:
        watchdog.capture_state = config.capture.stuck
    watchdog.start()
    return watchdog


def _open(
    root: str | os.PathLike[str] | None,
    job: str | None,
    level: str,
    console: bool | None,
    capture: bool,
    rotation: tuple[int, int],
    redact: bool,
) -> Configuration:
    """The rank's paths, the native capture, the renderer, the JSON writer and structlog."""
    info = _rank_info()
    host = socket.gethostname()
    job_id = layout.safe_job_id(job) if job else default_job_id()
    root_dir = Path(root or os.environ.get("HVDLOG_ROOT") or layout.DEFAULT_ROOT)
    paths = _resets.process_paths(root_dir, job_id, host, info.rank)  # elastic jobs: named after the process
    path = paths["events"]
    refusal = foreign_owner(root_dir, path.parent)
    max_bytes, backups = rotation
    native = _start_capture(paths, info.rank, max_bytes, backups, redact) if capture and refusal is None else None
    static = {"host.name": host, "process.pid": os.getpid(), "job": job_id, "event.dataset": APP_DATASET, **info.as_fields()}
    show_console = (info.rank in (0, None)) if console is None else console
    console_fd = native.console_fd(2) if native else 2
    redactor = Redactor(secret_values()) if redact else None
    renderer = _RENDERER
    renderer.reset(static, redactor, _console_sink(console_fd, redactor) if show_console else None)
    writer = _WRITER
    writer.console_fd = console_fd
    writer.open(path, max_bytes=max_bytes, backups=backups, refuse=refusal)
    structlog.configure(
        processors=[renderer],
        wrapper_class=make_bound_logger_class(level, renderer, writer),
        logger_factory=lambda *args: writer,
        cache_logger_on_first_use=True,
    )
    config = Configuration(path=path, job=job_id, host=host, level=level, static=static, writer=writer, renderer=renderer, capture=native)
    config.local_rank = info.local_rank
    writer.drop_note = config.dropped_note
    if native is not None:
        native.emit, native.try_emit = config.emit, config.try_emit
    return config


def _start_capture(paths: dict[str, Path], rank: int | None, max_bytes: int, backups: int, redact: bool) -> NativeCapture | None:
    """fds 1 and 2 through the capture process; None (said once) when it cannot start.
    In elastic jobs each native line is tagged with the rank the process has when it prints."""
    capture = NativeCapture(
        paths["stdout"], paths["stderr"], max_bytes=max_bytes, backups=backups, redact=redact,
        rank_tags=_resets.is_elastic(), rank=rank,
    )
    with contextlib.suppress(OSError):  # read-only or full: the writers say so, and retry
        make_private_dirs(capture.stdout_path.parent)
    try:
        capture.start()
    except Exception as exc:  # noqa: BLE001 - no fd, no process (EMFILE, EAGAIN): log without it
        _say(f"hvdlog: native output is not captured (cannot start the capture process: {exc})")
        return None
    return capture


def refresh_rank() -> None:
    """Re-read rank/size from Horovod (after ``hvd.init()`` or an elastic reset).

    Called by the patched ``hvd.init``, by Horovod's elastic re-init (:mod:`hvdlog.runtime.resets`)
    and by the watchdog every tick, so the fields stay true without a check on the hot path.
    The file path keeps the rank at configure time (in elastic jobs it names the process).
    """
    config = _current
    if config is None:
        return
    info = _rank.from_horovod()
    if info is None:
        return
    fields = info.as_fields()
    if any(config.static.get(key) != value for key, value in fields.items()):
        config.renderer.update_static(fields)  # config.static is the renderer's dict
        if config.capture is not None:
            config.capture.set_rank(info.rank)  # native lines printed from now on are the new rank's


def _rank_fields() -> dict[str, Any]:
    """Rank fields in force after a refresh (the elastic reset path asks for them)."""
    refresh_rank()
    config = _current
    return {key: config.static.get(key) for key in ("rank", "size", "local_rank", "local_size")} if config else {}


def _watchdog_tick() -> None:
    """Every watchdog tick: rank fields stay true, and optimizers made after a late
    ``import horovod.torch`` are still registered for naming stalled tensors."""
    track_distributed_optimizers()
    _resets.install()
    refresh_rank()


def _patch_horovod_init() -> None:
    """Wrap ``horovod.torch.init`` (if imported) so rank fields update right after init."""
    hvd = sys.modules.get("horovod.torch")
    if hvd is None or getattr(hvd.init, "_hvdlog_wrapped", False):
        return
    original = hvd.init

    def init(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        refresh_rank()
        _resets.install()
        return result

    init._hvdlog_wrapped = True  # type: ignore[attr-defined]
    hvd.init = init  # type: ignore[attr-defined]  # a module takes any attribute; ModuleType's stub has no __setattr__


def get_logger(*args: Any, **initial: Any) -> Any:
    """A structlog bound logger writing through the configured pipeline."""
    return structlog.get_logger(*args, **initial)


def shutdown() -> None:
    """Stop the watchdog, remove hooks and close files (idempotent).

    The native capture stays on until the process ends (a later ``configure()`` stops it):
    Horovod's last lines, printed at interpreter exit, still reach ``rank-N.stdout.log``.
    Returns in well under a second, even when children still hold the capture pipes
    (what they write later still reaches the console and the files); never raises.
    """
    global _current
    config, _current = _current, None
    if config is None:
        return
    _resets.tracker.detach()
    steps = [
        lambda: config.watchdog.stop(timeout=0.2) if config.watchdog is not None else None,
        lambda: config.timeline.stop() if config.timeline is not None else None,
        lambda: config.resources.stop() if config.resources is not None else None,
        lambda: config.hooks.uninstall() if config.hooks is not None else None,
        lambda: _record_exit_in(config),
        console_off.set,
        lambda: setattr(config.writer, "console_fd", 2),
        lambda: _linger(config.capture),
        structlog.reset_defaults,
        config.writer.close,
    ]
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - shutting logging down must not fail training
            _say(f"hvdlog: during shutdown: {type(exc).__name__}: {exc}")


#: The capture a shutdown() left on until the process ends (a later configure() stops it).
_lingering: NativeCapture | None = None


def _linger(capture: NativeCapture | None) -> None:
    """Keep the native capture until the process ends: Horovod prints its last lines from its
    own shutdown at interpreter exit, after the script's ``hvdlog.shutdown()``."""
    global _lingering
    _lingering = capture
    if capture is not None:
        capture.linger()


def _end_lingering_capture() -> None:
    """A new configuration brings its own capture: the one left on by shutdown() stops (fds restored)."""
    global _lingering
    capture, _lingering = _lingering, None
    if capture is not None:
        try:
            capture.stop()
        except Exception as exc:  # noqa: BLE001 - logging must not fail training
            _say(f"hvdlog: stopping the previous capture: {type(exc).__name__}: {exc}")


def _record_exit_in(config: Configuration) -> None:
    """After shutdown the process's exit record is appended to the rank's events file (never through a symlink)."""
    path, renderer = config.path, config.renderer

    def append(level: str, message: str, fields: dict[str, Any]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            if not_regular(os.fstat(fd).st_mode) is None:  # never a FIFO planted there: it would block the exit
                os.write(fd, renderer.render_safely(level, message, fields))
        finally:
            os.close(fd)

    if config.hooks is not None:
        ending.recorder.fallback = append


def _say(message: str) -> None:
    """A one-off diagnostic on the process's stderr, whatever state it is in."""
    with contextlib.suppress(OSError):
        os.write(2, (message + "\n").encode("utf-8", "replace"))

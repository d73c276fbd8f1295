"""Per-rank resource figures as a periodic ``resources`` event: CPU, memory, and GPU when there is one.

A straggler is often a rank whose host is busy (another job, a data-loader storm), short of
memory, or whose GPU runs hot and throttles. One small event per rank every ``interval``
seconds puts those figures beside the step events, in the same file and the same stream, so
``hvdlog stragglers`` and Kibana can show them next to the lag.

* process CPU %: CPU time of this process (all threads) over wall time since the previous
  sample, in percent of one core (like ``top``; above 100 with several busy threads);
* process RSS, host memory used % and available bytes: psutil when installed (Horovod
  depends on it), else ``/proc`` on Linux, else left out;
* GPU utilisation, memory and temperature through NVML, when ``nvidia-ml-py`` is installed
  and a GPU answers; otherwise ``resources.gpu.status`` says why, once per event, and nothing fails.

A sampler thread never lets an exception reach training: a failing probe is dropped and said
once in ``resources.error``. Enable with ``hvdlog.configure(resources=10)`` or
``HVDLOG_RESOURCES=10`` (seconds).
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any, Final

from hvdlog.runtime.periodic import Periodic
from hvdlog.types import Emit

__all__ = ["ResourceSampler", "resources_interval"]

#: Shortest interval accepted: sampling is cheap, but not free.
MIN_INTERVAL: Final = 0.5


def resources_interval(option: float | None, env: dict[str, str] | None = None) -> float | None:
    """Seconds between samples: the argument, else ``HVDLOG_RESOURCES``; None or 0 disables."""
    env = dict(os.environ) if env is None else env
    if option is None and env.get("HVDLOG_RESOURCES"):
        try:
            option = float(env["HVDLOG_RESOURCES"])
        except ValueError:
            raise ValueError(f"HVDLOG_RESOURCES={env['HVDLOG_RESOURCES']!r} is not a number of seconds") from None
    if not option:
        return None
    if option < MIN_INTERVAL:
        raise ValueError(f"resources interval must be at least {MIN_INTERVAL} s (or 0/None to disable), not {option}")
    return float(option)


def _proc_meminfo() -> dict[str, int]:
    values = {}
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) * 1024
    return values


class _Gpu:
    """NVML handle of this rank's GPU, or the reason there is none."""

    def __init__(self, local_rank: int | None) -> None:
        self.handle: Any = None
        self.nvml: Any = None
        try:
            pynvml = importlib.import_module("pynvml")  # nvidia-ml-py: optional, untyped
        except ImportError:
            self.status = "unavailable: nvidia-ml-py is not installed"
            return
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            if count == 0:
                self.status = "unavailable: no GPU"
                return
            self.index = (local_rank or 0) % count
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            self.nvml = pynvml
            self.status = "ok"
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...
            self.status = f"unavailable: {type(exc).__name__}: {exc}"

    def sample(self) -> dict[str, Any]:
        if self.handle is None:
            return {"resources.gpu.status": self.status}
        nvml = self.nvml
        util = nvml.nvmlDeviceGetUtilizationRates(self.handle)
        memory = nvml.nvmlDeviceGetMemoryInfo(self.handle)
        return {
            "resources.gpu.status": "ok",
            "resources.gpu.index": self.index,
            "resources.gpu.utilization_percent": float(util.gpu),
            "resources.gpu.memory_used_bytes": int(memory.used),
            "resources.gpu.temperature_celsius": float(nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)),
        }


class ResourceSampler(Periodic):
    """A daemon thread logging one ``resources`` event every ``interval`` seconds."""

    def __init__(self, emit: Emit, interval: float, local_rank: int | None = None) -> None:
        super().__init__()
        self.emit = emit
        self.interval = interval
        self.local_rank = local_rank
        self._last_cpu = self._cpu_seconds()
        self._last_wall = time.monotonic()
        self._gpu: _Gpu | None = None
        self._failed: set[str] = set()
        try:
            psutil = importlib.import_module("psutil")  # optional (by name: mypy would want the separate types-psutil)
            self._process: Any = psutil.Process()
            self._psutil: Any = psutil
        except ImportError:
            self._process = self._psutil = None

    @staticmethod
    def _cpu_seconds() -> float:
        times = os.times()
        return times.user + times.system

    def sample(self) -> dict[str, Any]:
        """One event's fields; a probe that fails is left out (and named once in ``resources.error``)."""
        fields: dict[str, Any] = {"event.action": "resources", "resources.interval_seconds": self.interval}
        now_cpu, now_wall = self._cpu_seconds(), time.monotonic()
        if now_wall > self._last_wall:
            fields["resources.process.cpu_percent"] = round(100 * (now_cpu - self._last_cpu) / (now_wall - self._last_wall), 2)
        self._last_cpu, self._last_wall = now_cpu, now_wall
        for name, probe in (("memory", self._memory), ("gpu", self._gpu_fields)):
            try:
                fields.update(probe())
            except Exception as exc:  # noqa: BLE001 - a probe must never stop the sampler
                if name not in self._failed:
                    self._failed.add(name)
                    fields["resources.error"] = f"{name}: {type(exc).__name__}: {exc}"
        return fields

    def _memory(self) -> dict[str, Any]:
        if self._psutil is not None:
            memory = self._psutil.virtual_memory()
            return {
                "resources.process.rss_bytes": int(self._process.memory_info().rss),
                "resources.host.memory_used_percent": float(memory.percent),
                "resources.host.memory_available_bytes": int(memory.available),
            }
        with open("/proc/self/statm", encoding="ascii") as handle:
            rss = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        info = _proc_meminfo()
        total, available = info["MemTotal"], info.get("MemAvailable", info.get("MemFree", 0))
        return {
            "resources.process.rss_bytes": rss,
            "resources.host.memory_used_percent": round(100 * (total - available) / total, 1),
            "resources.host.memory_available_bytes": available,
        }

    def _gpu_fields(self) -> dict[str, Any]:
        if self._gpu is None:
            self._gpu = _Gpu(self.local_rank)  # in the thread: NVML init can take a moment
        return self._gpu.sample()

    def tick(self) -> bool:
        """Log one event (an error is dropped; the next tick tries again)."""
        self.emit("info", "resources", self.sample())
        return True

    def start(self) -> None:
        """Start sampling (first event after one interval)."""
        self.start_thread("hvdlog-resources")

    def stop(self) -> None:
        """Stop sampling."""
        self.stop_thread()

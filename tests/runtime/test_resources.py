"""hvdlog.runtime.resource_sampler: periodic per-rank CPU/memory/GPU events, and their figures in `hvdlog stragglers`."""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from hvdlog.analyses.resources import figures
from hvdlog.fields import FIELDS_BY_NAME
from hvdlog.runtime.resource_sampler import ResourceSampler, resources_interval

HAVE_NVML = importlib.util.find_spec("pynvml") is not None


class TestInterval:
    def test_option_then_environment(self) -> None:
        """The argument wins; else HVDLOG_RESOURCES; 0 or nothing disables."""
        assert resources_interval(5, {"HVDLOG_RESOURCES": "1"}) == 5.0
        assert resources_interval(None, {"HVDLOG_RESOURCES": "2.5"}) == 2.5
        assert resources_interval(None, {}) is None and resources_interval(0, {}) is None

    @pytest.mark.parametrize(("option", "env"), [(0.01, {}), (None, {"HVDLOG_RESOURCES": "often"})])
    def test_bad_settings_fail_at_configure(self, option: float | None, env: dict[str, str]) -> None:
        """A nonsense interval is refused with a sentence, not at the first sample."""
        with pytest.raises(ValueError, match=r"resources interval|HVDLOG_RESOURCES"):
            resources_interval(option, env)


class TestSample:
    def test_plausible_figures(self) -> None:
        """CPU % is the process's CPU time over wall time (checked with an independent clock, since the
        machine may be loaded); RSS and host memory are in range; every key is in the contract."""
        sampler = ResourceSampler(lambda *_: None, 1.0, local_rank=0)
        cpu0, wall0 = time.process_time(), time.monotonic()
        stop = time.monotonic() + 0.6
        busy = threading.Thread(target=lambda: [None for _ in iter(lambda: time.monotonic() > stop, True)])
        busy.start()
        busy.join()
        fields = sampler.sample()
        expected = 100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)
        assert fields["resources.process.cpu_percent"] > 0
        assert fields["resources.process.cpu_percent"] == pytest.approx(expected, abs=10)
        assert 10 * 2**20 <= fields["resources.process.rss_bytes"] <= 64 * 2**30
        assert 0 < fields["resources.host.memory_used_percent"] < 100 and fields["resources.host.memory_available_bytes"] > 0
        assert set(fields) <= set(FIELDS_BY_NAME)

    def test_proc_fallback_agrees_with_psutil(self) -> None:
        """Without psutil, /proc gives the same memory figures (within what changes between two reads)."""
        sampler = ResourceSampler(lambda *_: None, 1.0)
        with_psutil = sampler.sample()
        sampler._psutil = None  # the fallback path, on this machine's real /proc
        from_proc = sampler.sample()
        assert abs(from_proc["resources.process.rss_bytes"] - with_psutil["resources.process.rss_bytes"]) < 32 * 2**20
        assert abs(from_proc["resources.host.memory_used_percent"] - with_psutil["resources.host.memory_used_percent"]) < 5

    @pytest.mark.skipif(HAVE_NVML, reason="this case is the machine without nvidia-ml-py")
    def test_no_nvml_degrades(self) -> None:
        """Without nvidia-ml-py (as here): no GPU figures, a status saying why, CPU and memory still there."""
        fields = ResourceSampler(lambda *_: None, 1.0).sample()
        assert fields["resources.gpu.status"] == "unavailable: nvidia-ml-py is not installed"
        assert not [key for key in fields if key.startswith("resources.gpu.") and key != "resources.gpu.status"]
        assert "resources.error" not in fields and "resources.process.rss_bytes" in fields

    def test_failing_probe_is_named_once(self) -> None:
        """A probe that raises is left out and named in resources.error once; the sampler goes on."""
        sampler = ResourceSampler(lambda *_: None, 1.0)
        sampler._process = None  # psutil present but the process handle unusable: memory_info() raises
        first, second = sampler.sample(), sampler.sample()
        assert first["resources.error"].startswith("memory: AttributeError") and "resources.error" not in second
        assert "resources.process.cpu_percent" in second and "resources.process.rss_bytes" not in second


def test_events_at_the_interval(tmp_path: Path) -> None:
    """configure(resources=0.5) in a real process: events every ~0.5 s, in the rank's file, then figures per rank."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import sys, time, hvdlog
        hvdlog.configure(root=sys.argv[1], job="res", resources=0.5, capture_native=False, stall_after=None, install_hooks=False)
        end = time.monotonic() + 3.2
        while time.monotonic() < end:
            sum(range(1000))
        hvdlog.shutdown()
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HVDLOG_", "HOROVOD_", "OMPI_", "PMI_"))}
    env.update(HOROVOD_RANK="0", HOROVOD_LOCAL_RANK="0", HOROVOD_SIZE="1")
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert result.returncode == 0, result.stderr
    (path,) = (tmp_path / "logs" / "res").glob("*/rank-0.jsonl")
    events = [e for e in map(orjson.loads, path.read_bytes().splitlines()) if e.get("event.action") == "resources"]
    assert 3 <= len(events) <= 7, len(events)
    times = [datetime.fromisoformat(e["@timestamp"].replace("Z", "+00:00")).timestamp() for e in events]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(0.45 <= gap <= 2.0 for gap in gaps), gaps
    # The process spins on one thread: between none and one core's worth (the machine may be loaded).
    assert all(0 < e["resources.process.cpu_percent"] <= 110 for e in events), [e["resources.process.cpu_percent"] for e in events]
    (row,) = figures(events).values()
    assert row["samples"] == len(events) and row["rss_bytes_max"] == max(e["resources.process.rss_bytes"] for e in events)

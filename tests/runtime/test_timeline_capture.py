"""hvdlog.configure(timeline=True): Horovod's timeline lands in the job directory, bounded on disk.

Each case runs a real one-rank Horovod (hvd.init() without a launcher) in a fresh process,
because Horovod reads HOROVOD_TIMELINE once, at init.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from hvdlog.runtime.timeline_export import timeline_requested
from hvdlog.timeline.analysis import analyse_files
from hvdlog.timeline_format.reader import looks_like_timeline

pytestmark = pytest.mark.horovod


def run_script(tmp_path: Path, body: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "HVDLOG_"))}
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], capture_output=True, text=True,
                            timeout=120, env={**clean, **(env or {})}, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def events(tmp_path: Path) -> list[dict]:
    (path,) = (tmp_path / "logs").glob("*/*/rank-0.jsonl")
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_option_and_environment() -> None:
    """The argument wins; else HVDLOG_TIMELINE=1/true/yes/on."""
    assert timeline_requested(None, {"HVDLOG_TIMELINE": "1"}) and timeline_requested(None, {"HVDLOG_TIMELINE": "Yes"})
    assert not timeline_requested(None, {}) and not timeline_requested(False, {"HVDLOG_TIMELINE": "1"})
    assert timeline_requested(True, {})


def test_rotation_keeps_disk_bounded(tmp_path: Path) -> None:
    """Past max_bytes the size watch switches Horovod to a new segment and deletes the oldest beyond `backups`."""
    run_script(tmp_path, """
        import sys, torch, hvdlog
        config = hvdlog.configure(root=sys.argv[1], job="rot", timeline=True, max_bytes=6000, backups=2,
                                  capture_native=False, stall_after=None, install_hooks=False)
        assert config.timeline is not None and config.timeline.owned
        import horovod.torch as hvd
        hvd.init()
        for i in range(400):
            hvd.allreduce(torch.ones(4), name=f"grad.{i % 5}")
            if i % 10 == 0:
                config.timeline.check()
        print(config.timeline.segments)
        hvd.shutdown()
        hvdlog.shutdown()
    """)
    segments = sorted((tmp_path / "logs" / "rot").glob("*/horovod-timeline*.json"))
    names = [p.name for p in segments]
    assert len(segments) == 3 and "horovod-timeline.json" not in names, names  # the first segments were deleted
    assert sum(p.stat().st_size for p in segments) <= 3 * 6000 + 3 * 4000  # + what 10 allreduces add between checks
    for segment in segments:  # each segment stands alone: its own tensor names and start time
        assert looks_like_timeline(segment)
        analysis = analyse_files([segment])
        assert analysis.negotiations > 0 and {t.tensor for t in analysis.tensors} <= {f"allreduce.grad.{i}" for i in range(5)}


def test_user_timeline_is_left_alone(tmp_path: Path) -> None:
    """HOROVOD_TIMELINE set by the user: hvdlog neither moves nor rotates it, nor touches the response cache."""
    target = tmp_path / "mine.json"
    out = run_script(tmp_path, """
        import os, sys, hvdlog
        config = hvdlog.configure(root=sys.argv[1], job="own", timeline=True, capture_native=False, stall_after=None, install_hooks=False)
        print(config.timeline.owned, os.environ.get("HOROVOD_CACHE_CAPACITY"))
        hvdlog.shutdown()
    """, env={"HOROVOD_TIMELINE": str(target)})
    assert out.stdout.split() == ["False", "None"]


def test_too_late_is_a_warning_not_an_error(tmp_path: Path) -> None:
    """configure(timeline=True) after hvd.init(): training goes on; one warning event says what to do."""
    run_script(tmp_path, """
        import sys, hvdlog
        import horovod.torch as hvd
        hvd.init()
        hvdlog.configure(root=sys.argv[1], job="late", timeline=True, capture_native=False, stall_after=None, install_hooks=False)
        hvdlog.shutdown()
    """)
    (warning,) = [e for e in events(tmp_path) if e["log.level"] == "warning"]
    assert "before hvd.init()" in warning["message"]
    assert not list((tmp_path / "logs").glob("*/*/horovod-timeline*.json"))


def _exported(job_dir: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(documents the live export wrote, documents an offline read of the finished raw timeline gives), as keys."""
    from hvdlog.timeline_format.documents import documents
    from hvdlog.timeline_format.records import negotiations_and_runs

    (raw,) = job_dir.glob("*/horovod-timeline.json")
    exports = list(job_dir.glob("*/horovod-timeline*.ndjson"))
    live = [orjson.loads(line) for export in exports for line in export.read_bytes().splitlines()]
    offline = list(documents(negotiations_and_runs([raw]), None, None))

    def key(doc: dict) -> tuple[str, str, str]:
        return doc["@timestamp"], doc["event.action"], doc["horovod.timeline.tensor"]

    return sorted(map(key, live)), sorted(map(key, offline))


_SHUTDOWN_SCRIPT = """
    import sys, torch, hvdlog
    hvdlog.configure(root=sys.argv[1], job="end", timeline=True, capture_native=False, stall_after=None, install_hooks=False)
    import horovod.torch as hvd
    hvd.init()
    for i in range(40):
        hvd.allreduce(torch.ones(4), name=f"grad.{i % 4}")
    hvd.allreduce(torch.ones(4), name="the.last.one")
    ORDER
"""


@pytest.mark.parametrize("order", ["hvd.shutdown(); hvdlog.shutdown()", "hvdlog.shutdown(); hvd.shutdown()", "pass  # atexit"])
def test_the_last_collectives_are_exported_at_shutdown(tmp_path: Path, order: str) -> None:
    """Whatever the shutdown order (or none: the interpreter's exit), the export holds every
    document of the finished timeline, the last collective included. The job is shorter than
    the 5 s size watch, so everything is exported at shutdown."""
    run_script(tmp_path, _SHUTDOWN_SCRIPT.replace("ORDER", order))
    live, offline = _exported(tmp_path / "logs" / "end")
    assert len(offline) >= 40, offline  # a negotiation and a run per collective, minus what Horovod itself drops at exit
    assert live == offline
    # Only where hvdlog closes the timeline itself (hvdlog.shutdown() first) is the last record Horovod's to write
    # for sure; after hvd.shutdown() or at the interpreter's exit Horovod may drop it from the file (seen 4 runs in
    # a row on a quiet machine, and on a loaded CI run), and the export can only equal the file (asserted above).
    if order.startswith("hvdlog.shutdown"):
        assert ("operation", "allreduce.the.last.one") in {(action, tensor) for _, action, tensor in live}


def test_one_export_per_timeline_under_horovodrun(tmp_path: Path) -> None:
    """Two ranks on one host share the job directory: only rank 0 (the timeline's writer) exports, once."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(_SHUTDOWN_SCRIPT.replace("ORDER", "pass  # atexit")))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "HVDLOG_"))}
    result = subprocess.run(["horovodrun", "-np", "2", "--gloo", sys.executable, str(script), str(tmp_path / "logs")],
                            capture_output=True, text=True, timeout=180, env=clean, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    live, offline = _exported(tmp_path / "logs" / "end")
    assert len(offline) >= 40 and live == offline  # not twice: rank 1 exported nothing

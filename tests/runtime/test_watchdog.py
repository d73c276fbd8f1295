"""hvdlog.runtime.watchdog: a rank's own stall detection, independent of Horovod's inspector."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

import hvdlog
from hvdlog.runtime.watchdog import StallWatchdog, describe_wait


class TestStallWatchdog:
    def test_stall_repeats_then_resolves(self) -> None:
        """No progress for `after` s gives a stall event, repeated every `repeat` s, then one resolved event."""
        emitted: list[tuple[str, str, dict[str, Any]]] = []
        hvdlog.mark_progress(41)
        watchdog = StallWatchdog(lambda *event: emitted.append(event), after=0.3, repeat=0.3, poll=0.05)
        watchdog.start()
        time.sleep(1.0)
        with hvdlog.step(42):
            pass
        time.sleep(0.2)
        watchdog.stop()
        actions = [fields["event.action"] for _, _, fields in emitted]
        assert actions[0] == "stall" and actions[-1] == "stall_resolved"
        assert 2 <= actions.count("stall") <= 4 and actions.count("stall_resolved") == 1
        first, resolved = emitted[0][2], emitted[-1][2]
        assert first["step"] == 41 and resolved["step"] == 41
        assert 0.3 <= first["horovod.stall.seconds"] < 0.6
        assert 0.9 <= resolved["horovod.stall.seconds"] < 1.5
        assert emitted[0][0] == "warning" and "outside any horovod collective" in emitted[0][1]

    def test_no_event_while_progressing(self) -> None:
        """A loop that keeps stepping never triggers a stall."""
        emitted: list[Any] = []
        watchdog = StallWatchdog(lambda *event: emitted.append(event), after=0.3, poll=0.05)
        watchdog.start()
        for step in range(20):
            with hvdlog.step(step):
                time.sleep(0.03)
        watchdog.stop()
        assert emitted == []

    def test_startup_is_given_longer(self) -> None:
        """Before the first step (import, hvd.init, broadcast) the threshold is STARTUP_FACTOR times longer."""
        from hvdlog.runtime.context import progress_state
        from hvdlog.runtime.watchdog import STARTUP_FACTOR

        emitted: list[Any] = []
        progress_state.step = None
        progress_state.last = time.monotonic()
        watchdog = StallWatchdog(lambda *event: emitted.append(event), after=0.2, poll=0.02)
        watchdog.start()
        time.sleep(0.2 * STARTUP_FACTOR * 0.75)
        assert emitted == []
        time.sleep(0.2 * STARTUP_FACTOR * 0.5)
        watchdog.stop()
        assert emitted and emitted[0][2]["event.action"] == "stall" and "step" not in emitted[0][2]

    def test_bad_threshold(self) -> None:
        """A non-positive threshold is refused when the watchdog is made."""
        with pytest.raises(ValueError, match="positive number of seconds"):
            StallWatchdog(lambda *e: None, after=0)


def test_describe_wait_names_user_code() -> None:
    """For a thread blocked in user code, the location is that code, and no collective is named."""
    ready, release = threading.Event(), threading.Event()

    def stuck_in_user_code() -> None:
        ready.set()
        release.wait(5)

    thread = threading.Thread(target=stuck_in_user_code)
    thread.start()
    ready.wait(5)
    import sys

    fields = describe_wait(sys._current_frames()[thread.ident])
    release.set()
    thread.join()
    assert "horovod.stall.operation" not in fields
    assert fields["log.origin.function"] == "stuck_in_user_code"
    assert "release.wait(5)" in fields["horovod.stall.stack"]


@pytest.mark.parametrize("path", ["/tmp/checkout/hvdlog/training/train.py", "/data/horovod/experiments/train.py", "/srv/torch/train.py"])
def test_user_code_in_a_folder_named_like_a_library_is_named(path: str) -> None:
    """A user's script whose path shares a library's folder name (a checkout named hvdlog, a project
    under /data/horovod/) is user code: named as where the thread waits, never taken for Horovod's op."""
    ready, release = threading.Event(), threading.Event()
    namespace: dict[str, object] = {"ready": ready, "release": release}
    exec(compile("def inject_faults():\n    ready.set()\n    release.wait(5)\n", path, "exec"), namespace)  # noqa: S102 - code at that path
    thread = threading.Thread(target=namespace["inject_faults"])  # type: ignore[arg-type]
    thread.start()
    ready.wait(5)
    fields = describe_wait(sys._current_frames()[thread.ident])  # type: ignore[index]
    release.set()
    thread.join()
    assert (fields.get("log.origin.file.name"), fields.get("log.origin.function")) == (path, "inject_faults")
    assert "horovod.stall.operation" not in fields

"""The watchdog's snapshot trigger: each thread's stack as events on request, the blocked training thread included."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from hvdlog.runtime.snapshot import TRIGGER, SnapshotTrigger


class TestSnapshotTrigger:
    def _trigger(self, tmp_path: Path, training: int) -> tuple[SnapshotTrigger, list[tuple[str, str, dict[str, Any]]]]:
        events: list[tuple[str, str, dict[str, Any]]] = []
        return SnapshotTrigger(tmp_path, lambda level, message, fields: events.append((level, message, fields)), training), events

    def test_a_new_request_is_answered_once_with_every_thread_the_training_thread_last(self, tmp_path: Path) -> None:
        """A thread blocked on a lock is seen where it waits; the request id is each event's ``event.id``."""
        release = threading.Event()

        def blocked_in_training() -> None:
            release.wait(30)

        worker = threading.Thread(target=blocked_in_training, name="trainer")
        worker.start()
        try:
            assert worker.ident is not None
            trigger, events = self._trigger(tmp_path, worker.ident)
            assert not trigger.poll()  # no request yet
            (tmp_path / TRIGGER).write_text("req-1\n")
            assert trigger.poll()
            assert not trigger.poll()  # the same request is answered once
        finally:
            release.set()
            worker.join()
        assert {fields["event.id"] for _, _, fields in events} == {"req-1"}
        assert all(fields["event.action"] == "snapshot" for _, _, fields in events)
        last = events[-1][2]
        assert last["event.reason"] == "training_thread" and last["process.thread.name"] == "trainer"
        assert last["log.origin.function"] == "blocked_in_training" and "release.wait" in last["horovod.stall.stack"]
        assert "MainThread" not in {fields["process.thread.name"] for _, _, fields in events}  # the polling thread (the watchdog) is left out
        assert [fields["event.reason"] for _, _, fields in events].count("training_thread") == 1

    def test_a_request_written_before_the_process_started_is_not_answered(self, tmp_path: Path) -> None:
        """The trigger's modification time at start is the baseline: only a later request is for this process."""
        (tmp_path / TRIGGER).write_text("old\n")
        trigger, events = self._trigger(tmp_path, threading.get_ident())
        assert not trigger.poll() and not events
        stamp = time.time_ns() + 10_000_000
        os.utime(tmp_path / TRIGGER, ns=(stamp, stamp))
        assert trigger.poll() and events

    def test_a_missing_job_folder_is_no_request(self, tmp_path: Path) -> None:
        """Polling a folder that does not exist (yet) answers nothing and raises nothing."""
        trigger, events = self._trigger(tmp_path / "absent", threading.get_ident())
        assert not trigger.poll() and not events

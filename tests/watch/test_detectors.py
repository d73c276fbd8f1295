"""The watch detectors on plain documents (times given, so every case is exact); delivery is tests/watch/test_delivery.py."""

from __future__ import annotations

from typing import Any

import pytest

from hvdlog.watch.detectors import Alert, Watcher

T0 = 1_800_000_000.0  # a fixed "now" for the detectors (2027-01-15)


def _stamp(seconds: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _doc(at: float, rank: int, message: str = "train step", job: str = "j", **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"@timestamp": _stamp(at), "rank": rank, "size": 2, "job": job, "message": message,
                           "log": {"level": fields.pop("level", "info")}, "host": {"name": f"node{rank}"}}
    for key, value in fields.items():
        node = doc
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return doc


def _feed(watcher: Watcher, docs: list[dict[str, Any]]) -> list[Alert]:
    """Each document received at its own time, a check after each."""
    alerts: list[Alert] = []
    for doc in docs:
        at = _seconds(doc["@timestamp"])
        watcher.add(doc, at)
        alerts += watcher.check(at)
    return alerts


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _steps(first: int, last: int, start: float, ranks: tuple[int, ...] = (0, 1), every: float = 1.0, **fields: Any) -> list[dict[str, Any]]:
    return [_doc(start + (s - first) * every + r * 0.01, r, step=s, **fields) for s in range(first, last + 1) for r in ranks]


class TestWatcher:
    def test_stall_once_for_both_ranks_then_resolved(self) -> None:
        """Two ranks report the same stall every second: one firing naming the culprit, one resolved."""
        watcher = Watcher(silent_after=60)
        docs = _steps(1, 3, T0)
        for i in range(5):
            at = T0 + 4 + i
            report: dict[str, Any] = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 2 + i}
            docs.append(_doc(at, 1, "no progress outside", step=3, level="warning", **report))
            docs.append(_doc(at + 0.1, 0, "waiting", step=3, level="warning", **report, **{"horovod.stall.operation": "allreduce"}))
        docs += [_doc(T0 + 10, r, "progress resumed", step=3, **{"event.action": "stall_resolved", "horovod.stall.source": "watchdog"}) for r in (0, 1)]
        alerts = [a for a in _feed(watcher, docs) if a.kind == "stall"]
        assert [(a.status, a.ranks) for a in alerts] == [("firing", [1]), ("resolved", [1])]
        assert alerts[0].step == 3 and alerts[0].episode == alerts[1].episode and alerts[0].hosts == ["node1"]

    def test_progress_then_crash_resolves_the_stall(self) -> None:
        """The hung rank moves on (steps 4, 5; its watchdog had no time to say so) and then crashes: resolved, not shut down."""
        watcher = Watcher(silent_after=60)
        report = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 3}
        docs = [*_steps(1, 3, T0), _doc(T0 + 6, 1, "no progress", step=3, level="warning", **report), *_steps(4, 5, T0 + 9),
                _doc(T0 + 11.5, 1, "uncaught exception", step=6, level="critical", **{"event.action": "uncaught_exception"})]
        stall = [a for a in _feed(watcher, docs) if a.kind == "stall"]
        assert [a.status for a in stall] == ["firing", "resolved"] and "progress resumed" in stall[1].summary

    def test_failure_once_then_collateral_update(self) -> None:
        """The culprit's exception fires at once; the other rank's shutdown error later is an update naming it collateral."""
        watcher = Watcher(silent_after=60)
        docs = _steps(1, 2, T0)
        crash = _doc(T0 + 3, 1, "uncaught exception", step=3, level="critical",
                     **{"event.action": "uncaught_exception", "error.type": "ValueError", "error.message": "bad batch"})
        watcher.add(crash, T0 + 3)
        (first,) = watcher.check(T0 + 3.1)  # its own exception: certain, alerted on the check that read it
        watcher.add(_doc(T0 + 7, 0, "Horovod has been shut down. This was caused by an exception on one of the ranks.", level="error"), T0 + 7)
        (update,) = watcher.check(T0 + 8)
        assert (first.kind, first.status, first.ranks) == ("failure", "firing", [1]) and "ValueError" in first.summary
        assert (update.status, update.details["new_collateral_ranks"]) == ("update", [0])
        assert watcher.check(T0 + 9) == [] and _feed(watcher, docs) == []

    def test_silent_rank_while_the_other_logs(self) -> None:
        """Rank 1 stops, rank 0 keeps logging: one alert after silent_after, a resolution when rank 1 is back."""
        watcher = Watcher(silent_after=5)
        report = {"event.action": "stall", "horovod.stall.source": "watchdog"}
        docs = _steps(1, 3, T0) + [_doc(T0 + 3 + i, 0, "stall", level="warning", **report) for i in range(1, 8)]
        alerts = [a for a in _feed(watcher, docs) if a.kind == "silent_rank"]
        assert [(a.status, a.ranks) for a in alerts] == [("firing", [1])] and alerts[0].step == 3
        back = _feed(watcher, [_doc(T0 + 11.5, 1, "hello", step=4)])
        assert [(a.kind, a.status, a.ranks) for a in back] == [("silent_rank", "resolved", [1])]

    def test_quiet_start_is_neither_silent_nor_finished(self) -> None:
        """Before the first step (imports, hvd.init) a quiet rank is no alert, and the job has not ended."""
        watcher = Watcher(silent_after=5)
        watcher.add(_doc(T0, 0, "training starts"), T0)
        watcher.add(_doc(T0, 1, "training starts"), T0)
        assert watcher.check(T0 + 30) == []

    def test_straggler_flagged_on_three_checks_once(self) -> None:
        """Of three ranks, one with under a quarter of the others' samples/s: one straggler alert, not one per step."""
        watcher = Watcher(silent_after=60)
        docs = [doc for s in range(1, 13) for doc in (_doc(T0 + s, 0, step=s, samples_per_sec=900.0),
                                                      _doc(T0 + s + 0.01, 1, step=s, samples_per_sec=200.0),
                                                      _doc(T0 + s + 0.02, 2, step=s, samples_per_sec=880.0))]
        alerts = [a for a in _feed(watcher, docs) if a.kind == "straggler"]
        assert [(a.status, a.ranks) for a in alerts] == [("firing", [1])] and "samples/s" in alerts[0].summary

    def test_two_ranks_never_page_a_straggler(self) -> None:
        """With two ranks the median is their mean: step figures cannot say which one is slow, so no page."""
        watcher = Watcher(silent_after=60)
        docs = [doc for s in range(1, 13) for doc in (_doc(T0 + s, 0, step=s, samples_per_sec=900.0),
                                                      _doc(T0 + s + 0.01, 1, step=s, samples_per_sec=200.0))]
        assert [a for a in _feed(watcher, docs) if a.kind == "straggler"] == []

    def test_noise_is_no_straggler(self) -> None:
        """Two thirds of the other rank's samples/s (a loaded machine) is below the analysis' 25 % but no alert: it takes half."""
        watcher = Watcher(silent_after=60)
        docs = [doc for s in range(1, 13) for doc in (_doc(T0 + s, 0, step=s, samples_per_sec=340.0),
                                                      _doc(T0 + s + 0.01, 1, step=s, samples_per_sec=204.0))]
        assert [a for a in _feed(watcher, docs) if a.kind == "straggler"] == []

    def test_too_few_steps_say_nothing(self) -> None:
        """Four steps are not enough data to call a straggler."""
        watcher = Watcher(silent_after=60)
        docs = [doc for s in range(1, 5) for doc in (_doc(T0 + s, 0, step=s, samples_per_sec=900.0), _doc(T0 + s, 1, step=s, samples_per_sec=100.0))]
        assert [a for a in _feed(watcher, docs) if a.kind == "straggler"] == []

    def test_finished_success_after_quiet(self) -> None:
        """Every rank quiet for the threshold after training: job finished, success (likely); once."""
        watcher = Watcher(silent_after=5)
        _feed(watcher, _steps(1, 4, T0))
        (finished,) = watcher.check(T0 + 20)
        assert (finished.kind, finished.status, finished.confidence, finished.step) == ("job_finished", "success", "likely", 4)
        assert watcher.check(T0 + 40) == []

    def test_finished_failure_names_the_failure_s_step(self) -> None:
        """The crash at step 6 (the ranks' last step events say 5): both lines say step 6 (issue 40, M8)."""
        watcher = Watcher(silent_after=5)
        crash = _doc(T0 + 7, 1, "uncaught exception", step=6, level="critical",
                     **{"event.action": "uncaught_exception", "error.type": "ValueError", "error.message": "bad batch"})
        alerts = _feed(watcher, [*_steps(1, 5, T0), crash]) + watcher.check(T0 + 10) + watcher.check(T0 + 30)
        failure = next(a for a in alerts if a.kind == "failure")
        finished = next(a for a in alerts if a.kind == "job_finished")
        assert failure.step == finished.step == 6 and "at step 6" in failure.summary and "at step 6" in finished.summary
        assert finished.details["verdict"] == {"status": "failed", "culprit": [1], "step": 6, "recovered": False, "stragglers": []}

    def test_finished_after_a_stall_does_not_say_no_stall(self) -> None:
        """A stall alerted, then resolved, then a quiet end: the finished line says there was one (M8); 'ranks waiting' reads unambiguously."""
        watcher = Watcher(silent_after=5)
        report = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 3}
        docs = [*_steps(1, 3, T0), _doc(T0 + 5, 0, "waiting", step=3, level="warning", **report, **{"horovod.stall.operation": "allreduce"}),
                _doc(T0 + 5.1, 1, "no progress", step=3, level="warning", **report), *_steps(4, 6, T0 + 8)]
        alerts = _feed(watcher, docs) + watcher.check(T0 + 30)
        stall = next(a for a in alerts if a.kind == "stall" and a.status == "firing")
        assert stall.summary.endswith("rank 1 not progressing; ranks waiting: 0")
        finished = next(a for a in alerts if a.kind == "job_finished")
        assert "no stall" not in finished.reasoning and "after 1 stall alert(s)" in finished.reasoning

    def test_a_hang_ended_from_outside_is_the_stalled_rank_s(self) -> None:
        """Rank 1 hangs at step 3 (the watchdogs say so), then an operator's SIGTERM: the failure is rank 1's at step 3 (M3)."""
        watcher = Watcher(silent_after=5)
        report = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 3}
        docs = [*_steps(1, 3, T0)]
        for i in range(3):
            docs += [_doc(T0 + 5 + 2 * i, 1, "no progress", step=3, level="warning", **report),
                     _doc(T0 + 5.1 + 2 * i, 0, "waiting", step=3, level="warning", **report, **{"horovod.stall.operation": "allreduce"})]
        docs += [_doc(T0 + 12, r, "received SIGTERM: terminating", level="warning", **{"event.action": "signal", "event.reason": "SIGTERM"})
                 for r in (0, 1)]
        docs += [_doc(T0 + 12.2, 0, "Horovod has been shut down. This was caused by an exception on one of the ranks.", level="error")]
        alerts = _feed(watcher, docs) + watcher.check(T0 + 16) + watcher.check(T0 + 40)
        failure = next(a for a in alerts if a.kind == "failure")
        assert (failure.ranks, failure.step) == ([1], 3) and "hung at step 3" in failure.summary, failure

    def test_a_recorded_end_finishes_at_once(self) -> None:
        """Every rank's exit record of status 0: finished, success, certain, without waiting for silence."""
        watcher = Watcher(silent_after=60)
        ends = [_doc(T0 + 5, r, "process exit: status 0", **{"event.action": "process_exit", "process.exit_code": 0}) for r in (0, 1)]
        alerts = _feed(watcher, [*_steps(1, 4, T0), *ends])
        (finished,) = [a for a in alerts if a.kind == "job_finished"]
        assert (finished.status, finished.confidence) == ("success", "certain") and not [a for a in alerts if a.kind == "failure"]

    def test_default_silence_is_three_median_steps_at_least_a_minute(self) -> None:
        """3x the median step time, never below 60 s."""
        watcher = Watcher()
        _feed(watcher, _steps(1, 5, T0, every=30.0))
        assert watcher.silence_threshold(watcher.jobs["j"]) == pytest.approx(90.0, abs=0.1)
        fast = Watcher()
        _feed(fast, _steps(1, 5, T0, every=1.0))
        assert fast.silence_threshold(fast.jobs["j"]) == 60.0



def _stall_report(at: float, rank: int, outside: bool, **fields: Any) -> dict[str, Any]:
    """A watchdog stall report: rank ``rank`` waits in the optimizer's allreduce, or is stuck outside any collective."""
    report: dict[str, Any] = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 3.0, **fields}
    if not outside:
        report["horovod.stall.operation"] = "_DistributedOptimizer.step > synchronize"
    return _doc(at, rank, "no progress", step=3, level="warning", **report)


class TestHangClassInWatch:
    """The stall alert says the hang class of `hvdlog stalls` (one verdict), never one a late report would contradict."""

    @pytest.mark.parametrize(("kind", "expected"), [("culprit_outside", "culprit_outside"), ("divergence", "divergence"),
                                                    ("dead_or_silent", "dead_or_silent"), ("silent", "dead_or_silent"),
                                                    ("all_wedged", "all_wedged"), ("capture_stuck", "capture_stuck")])
    def test_each_class_in_the_stall_alert(self, tmp_path: Any, kind: str, expected: str) -> None:
        """The synthetic hung jobs of tests/analyses/test_hang.py (8 ranks), fed to the watcher as they were written."""
        import orjson
        from support.hang_jobs import write_hung_job

        folder = write_hung_job(tmp_path, kind, 8, 5)
        docs = sorted((orjson.loads(line) for path in folder.rglob("*.jsonl") for line in path.read_bytes().splitlines()),
                      key=lambda doc: doc["@timestamp"])
        watcher = Watcher(silent_after=60)
        firing = [a for a in _feed(watcher, docs) + watcher.check(_seconds(docs[-1]["@timestamp"]) + 2) if a.kind == "stall"]
        assert [a.status for a in firing][:1] == ["firing"], firing
        hang = firing[0].details["hang"]
        assert hang["kind"] == expected and expected.replace("_", " ") in firing[0].summary, firing[0]
        assert firing[0].ranks == ([] if expected == "all_wedged" else [5]) and hang["roll_call"]
        assert not [a for a in firing if a.status == "update"], "the first class was wrong"

    def test_a_rank_not_yet_reported_is_not_called_silent(self) -> None:
        """Rank 0's report lands a poll before rank 1's: no "dead or silent" alert in between; the alert says culprit outside."""
        watcher = Watcher(silent_after=60)
        _feed(watcher, _steps(1, 3, T0))
        watcher.add(_stall_report(T0 + 7, 0, outside=False), T0 + 7)
        assert watcher.check(T0 + 7) == [] and watcher.check(T0 + 7.9) == []
        assert watcher.due == pytest.approx(T0 + 7 + 1.5)  # the loop looks again when the grace ends, not a poll later
        watcher.add(_stall_report(T0 + 7.8, 1, outside=True), T0 + 8.2)
        (alert,) = watcher.check(T0 + 8.2)
        assert (alert.kind, alert.status, alert.ranks, alert.details["hang"]["kind"]) == ("stall", "firing", [1], "culprit_outside")

    def test_a_silent_rank_is_alerted_after_the_grace(self) -> None:
        """Rank 1 stopped (SIGSTOP): rank 0 alone reports; after the grace the alert names rank 1, dead or silent (likely)."""
        watcher = Watcher(silent_after=60)
        _feed(watcher, _steps(1, 3, T0))
        watcher.add(_stall_report(T0 + 7, 0, outside=False), T0 + 7)
        assert watcher.check(T0 + 7) == [] and watcher.check(T0 + 8) == []
        (alert,) = watcher.check(T0 + 8.6)
        assert (alert.ranks, alert.details["hang"]["kind"], alert.confidence) == ([1], "dead_or_silent", "likely")
        assert "dead or silent" in alert.summary


class TestEarlyFailure:
    """A failure whose culprit the model names is alerted at once; later evidence refines it by an update."""

    def test_a_killed_rank_is_named_at_once(self) -> None:
        """SIGKILL of rank 1: only rank 0's collateral error lands; the alert names rank 1 on that check, not SETTLE_S later."""
        watcher = Watcher(silent_after=60)
        _feed(watcher, _steps(1, 3, T0))
        shut = _doc(T0 + 4, 0, "uncaught HorovodInternalError in main thread: Horovod has been shut down. This was caused by an "
                    "exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
                    "finished execution.", level="critical", **{"event.action": "uncaught_exception", "error.type": "HorovodInternalError"})
        watcher.add(shut, T0 + 4)
        (alert,) = watcher.check(T0 + 4.05)
        assert (alert.kind, alert.status, alert.ranks, alert.confidence) == ("failure", "firing", [1], "likely"), alert

    def test_the_culprit_s_own_traceback_refines_the_alert(self) -> None:
        """Rank 0's collateral first (rank 1, likely), then rank 1's own exception: an update, certain, with the cause."""
        watcher = Watcher(silent_after=60)
        _feed(watcher, _steps(1, 3, T0))
        watcher.add(_doc(T0 + 4, 0, "Horovod has been shut down. This was caused by an exception on one of the ranks.", level="error"), T0 + 4)
        (first,) = watcher.check(T0 + 4.05)
        crash = _doc(T0 + 3.9, 1, "uncaught exception", step=4, level="critical",
                     **{"event.action": "uncaught_exception", "error.type": "ValueError", "error.message": "bad batch"})
        watcher.add(crash, T0 + 4.5)
        (update,) = watcher.check(T0 + 4.5)
        assert (first.ranks, first.confidence) == ([1], "likely")
        assert (update.status, update.ranks, update.confidence, update.details["refined"]) == ("update", [1], "certain", True)
        assert "ValueError" in update.summary and update.episode == first.episode
        assert watcher.check(T0 + 9) == []


class TestSlowStart:
    """A wait before the first step is a slow start, not a hang, until it lasts STARTUP_STALL_S (watchdog reports only)."""

    def test_a_slow_start_is_no_stall_alert(self) -> None:
        """Before the first step rank 0 waits 12 s in broadcast_parameters for rank 1 still importing (a loaded machine):
        no alert; the same wait alerted once it has lasted STARTUP_STALL_S."""
        from hvdlog.watch.detectors import STARTUP_STALL_S

        def waiting(at: float) -> dict[str, Any]:
            report = {"event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": at - T0,
                      "horovod.stall.operation": "broadcast_parameters > synchronize"}
            return _doc(at, 0, "no progress", level="warning", **report)

        watcher = Watcher(silent_after=60)
        for at in range(3, 13, 3):
            watcher.add(waiting(T0 + at), T0 + at)
            assert watcher.check(T0 + at + 0.5) == []
        watcher.add(_doc(T0 + 13, 0, "progress resumed", **{"event.action": "stall_resolved", "horovod.stall.source": "watchdog"}), T0 + 13)
        assert [a for a in _feed(watcher, _steps(1, 3, T0 + 14)) if a.kind == "stall"] == []
        stuck = Watcher(silent_after=60)
        alerts = [a for at in range(3, int(STARTUP_STALL_S) + 8, 3) for a in _feed(stuck, [waiting(T0 + at)]) if a.kind == "stall"]
        assert [a.status for a in alerts] == ["firing"] and _seconds(alerts[0].time) >= T0 + STARTUP_STALL_S - 3

    def test_horovod_s_inspector_is_not_held_as_a_slow_start(self) -> None:
        """The real Open MPI capture of Horovod's stall inspector (no step on its lines): alerted on its first warning,
        not STARTUP_STALL_S later (the inspector itself speaks only after a minute of stall)."""
        from pathlib import Path

        from hvdlog.query.files import FileSource
        from hvdlog.query.spec import Filter

        capture = Path(__file__).resolve().parents[1] / "corpus" / "horovod.core" / "mpi-stall-console.log"
        docs = [doc for doc in FileSource([capture], timezone="UTC", warn=lambda message: None).search(Filter()) if "@timestamp" in doc]
        warnings = [doc for doc in docs if (doc.get("horovod") or {}).get("stall", {}).get("source") == "inspector"
                    or doc.get("horovod.stall.source") == "inspector"]
        assert warnings, "the capture holds the inspector's warnings"
        alerts = [a for a in _feed(Watcher(silent_after=600), docs) if a.kind == "stall"]
        assert alerts and alerts[0].status == "firing" and alerts[0].ranks == [1], alerts
        assert _seconds(alerts[0].time) - _seconds(warnings[0]["@timestamp"]) < 1.0

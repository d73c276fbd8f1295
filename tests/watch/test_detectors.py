"""The watch detectors on plain documents (times given, so every case is exact), and delivery to real targets.

Delivery goes to a real HTTP receiver on loopback and to real shell commands; only the
backoff's sleeps are recorded instead of slept, to check the cap without waiting a minute.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.watch_harness import Receiver, wait_for

from hvdlog.watch.delivery import MAX_BACKOFF_S, Command, Dispatcher, Webhook, discover_link, safe_url
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
        """The culprit's exception fires once; the other rank's shutdown error later is an update naming it collateral."""
        watcher = Watcher(silent_after=60)
        docs = _steps(1, 2, T0)
        crash = _doc(T0 + 3, 1, "uncaught exception", step=3, level="critical",
                     **{"event.action": "uncaught_exception", "error.type": "ValueError", "error.message": "bad batch"})
        watcher.add(crash, T0 + 3)
        assert watcher.check(T0 + 3.5) == []  # waits for the rest of the chain
        (first,) = watcher.check(T0 + 6)
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

    def test_default_silence_is_three_median_steps_at_least_a_minute(self) -> None:
        """3x the median step time, never below 60 s."""
        watcher = Watcher()
        _feed(watcher, _steps(1, 5, T0, every=30.0))
        assert watcher.silence_threshold(watcher.jobs["j"]) == pytest.approx(90.0, abs=0.1)
        fast = Watcher()
        _feed(fast, _steps(1, 5, T0, every=1.0))
        assert fast.silence_threshold(fast.jobs["j"]) == 60.0


ALERT = {"kind": "failure", "status": "firing", "job": "j1", "ranks": [1], "summary": "job j1: first failure on rank 1: boom",
         "reasoning": "ValueError on rank 1", "confidence": "certain", "time": "2026-12-01T00:00:00.000Z", "hosts": ["n1"],
         "step": 3, "episode": "failure:j1", "details": {}}


class TestDelivery:
    def test_down_then_up_spooled_then_delivered_once(self, tmp_path: Path) -> None:
        """A receiver that refuses connections: the alert is spooled (and said on stderr); once it is up, delivered exactly once."""
        receiver = Receiver(up=False)
        warnings: list[str] = []
        spool = tmp_path / "job" / "hvdlog-watch.spool"
        dispatcher = Dispatcher([Webhook(receiver.url)], lambda alert: spool, warnings.append, tries=2, retry_every=0.3)
        dispatcher.start()
        try:
            dispatcher.submit(ALERT)
            wait_for(spool.exists, 30, "the spool file")
            assert receiver.bodies == [] and "spooled to" in warnings[0] and "s3cr3t" not in warnings[0]
            assert json.loads(spool.read_text())["alert"] == ALERT
            receiver.start()
            wait_for(lambda: receiver.bodies, 30, "the spooled alert")
            wait_for(lambda: not spool.exists(), 10, "the spool to empty")
            time.sleep(1.0)  # three more retry rounds: nothing is sent twice
            assert receiver.bodies == [ALERT] and any("delivered 1 spooled" in w for w in warnings)
        finally:
            dispatcher.close()
            receiver.stop()

    def test_backoff_doubles_and_is_capped(self, tmp_path: Path) -> None:
        """A command that keeps failing: waits 0.5, 1, 2, 4, 8, then 10 s (the cap) between tries, then spooled."""
        slept: list[float] = []
        dispatcher = Dispatcher([Command("exit 3")], lambda alert: tmp_path / "spool", lambda _m: None, tries=8, sleep=slept.append)
        dispatcher._deliver(dispatcher.targets[next(iter(dispatcher.targets))], ALERT)
        assert slept == [0.5, 1, 2, 4, 8, MAX_BACKOFF_S, MAX_BACKOFF_S] and (tmp_path / "spool").exists()

    def test_stopping_spools_what_is_still_queued(self, tmp_path: Path) -> None:
        """The watcher stops while a slow target holds the queue: what was not sent yet is spooled, not dropped."""
        spool = tmp_path / "spool"
        dispatcher = Dispatcher([Command("sleep 3")], lambda alert: spool, lambda _m: None, tries=1)
        dispatcher.start()
        for index in range(3):
            dispatcher.submit({**ALERT, "episode": f"e{index}"})
        time.sleep(0.5)  # the first is being sent
        dispatcher.close(timeout=0.5)
        assert [json.loads(line)["alert"]["episode"] for line in spool.read_text().splitlines()] == ["e1", "e2"]

    def test_exec_gets_the_alert_on_stdin(self, tmp_path: Path) -> None:
        """--exec runs a shell command with the alert's JSON on stdin."""
        out = tmp_path / "got.json"
        Command(f"cat > {out}").send(ALERT)
        assert json.loads(out.read_text()) == ALERT

    def test_slack_format(self) -> None:
        """--webhook-format slack posts one mrkdwn text with the summary, the reasoning and the Kibana link."""
        receiver = Receiver()
        try:
            Webhook(receiver.url, "slack").send({**ALERT, "kibana_url": "https://kibana:5601/app/discover#/x"})
        finally:
            receiver.stop()
        (body,) = receiver.bodies
        assert set(body) == {"text"} and ALERT["summary"] in body["text"] and "ValueError on rank 1" in body["text"]
        assert "<https://kibana:5601/app/discover#/x|Open in Kibana Discover>" in body["text"]

    @pytest.mark.parametrize(("url", "shown"), [
        ("https://hooks.slack.com/services/T000/B000/XXXXsecret", "https://hooks.slack.com/…"),
        ("http://user:pw@127.0.0.1:8080/alert?token=abc", "http://127.0.0.1:8080/…"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ])
    def test_urls_are_shown_without_secrets(self, url: str, shown: str) -> None:
        """Paths, queries and credentials of a webhook URL are never printed."""
        assert safe_url(url) == shown and Webhook(url).label == f"webhook {shown}"

    def test_discover_link_filters_job_and_ranks(self) -> None:
        """The Kibana link opens Discover on the data view with a KQL filter on the job and the ranks."""
        link = discover_link("https://elastic:hunter2@kibana:5601/", {**ALERT, "ranks": [1, 3]})
        assert "hunter2" not in link
        assert link.startswith("https://kibana:5601/app/discover#/?_g=(time:(from:'2026-11-30T23:30:00.000Z',to:'2026-12-01T00:30:00.000Z'))")
        assert "job:%22j1%22%20and%20rank:(1%20or%203)" in link and "dataViewId:'hvdlog-logs'" in link

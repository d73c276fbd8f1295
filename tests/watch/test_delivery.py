"""Delivery of watch alerts to real targets: a real HTTP receiver on loopback and real shell commands.

Only the backoff's sleeps are recorded instead of slept, to check the cap without waiting a
minute. The watcher as a whole, against receivers that misbehave and spools under real faults,
is tests/cli/test_cli_watch_delivery.py.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import pytest
from support.watch_harness import Receiver, wait_for

from hvdlog.watch.delivery import MAX_BACKOFF_S, Command, Dispatcher, Webhook, discover_link, safe_url
from hvdlog.watch.spool import Spool

ALERT = {"kind": "failure", "status": "firing", "job": "j1", "ranks": [1], "summary": "job j1: first failure on rank 1: boom",
         "reasoning": "ValueError on rank 1", "confidence": "certain", "time": "2026-12-01T00:00:00.000Z", "hosts": ["n1"],
         "step": 3, "episode": "failure:j1", "details": {}}


def _spool(tmp_path: Path, warnings: list[str] | None = None) -> Spool:
    spool = Spool(tmp_path / "spool", (warnings if warnings is not None else []).append)
    spool.open()
    return spool


def _entries(spool: Spool) -> list[dict[str, object]]:
    path = spool.path_of("j1")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class TestDelivery:
    def test_down_then_up_spooled_then_delivered_once(self, tmp_path: Path) -> None:
        """A receiver that refuses connections: the alert is spooled (and said on stderr); once it is up, delivered exactly once."""
        receiver = Receiver(up=False)
        warnings: list[str] = []
        spool = _spool(tmp_path, warnings)
        dispatcher = Dispatcher([Webhook(receiver.url)], spool, warnings.append, tries=2, retry_every=0.3)
        dispatcher.start()
        try:
            dispatcher.submit(ALERT)
            wait_for(spool.path_of("j1").exists, 30, "the spool file")
            assert receiver.bodies == [] and "spooled to" in warnings[0] and "s3cr3t" not in warnings[0]
            assert [entry["alert"] for entry in _entries(spool)] == [ALERT]
            receiver.start()
            wait_for(lambda: receiver.bodies, 30, "the spooled alert")
            wait_for(lambda: not spool.path_of("j1").exists(), 10, "the spool to empty")
            time.sleep(1.0)  # three more retry rounds: nothing is sent twice
            assert receiver.bodies == [ALERT] and any("delivered 1 spooled" in w for w in warnings)
        finally:
            dispatcher.close()
            receiver.stop()

    def test_backoff_doubles_and_is_capped(self, tmp_path: Path) -> None:
        """A command that keeps failing: waits 0.5, 1, 2, 4, 8, then 10 s (the cap) between tries, then spooled."""
        slept: list[float] = []
        spool = _spool(tmp_path)
        dispatcher = Dispatcher([Command("exit 3")], spool, lambda _m: None, tries=8, sleep=slept.append)
        dispatcher.workers[0].deliver(ALERT)
        assert slept == [0.5, 1, 2, 4, 8, MAX_BACKOFF_S, MAX_BACKOFF_S] and len(_entries(spool)) == 1

    def test_stopping_spools_the_alert_in_flight_and_the_queued_ones(self, tmp_path: Path) -> None:
        """The watcher stops while a slow target holds its queue: the alert being sent and those not sent yet are spooled."""
        spool = _spool(tmp_path)
        dispatcher = Dispatcher([Command("sleep 3")], spool, lambda _m: None, tries=1)
        dispatcher.start()
        for index in range(3):
            dispatcher.submit({**ALERT, "episode": f"e{index}"})
        wait_for(lambda: dispatcher.workers[0].current is not None, 10, "the first alert in flight")
        dispatcher.close(timeout=0.5)
        assert [entry["alert"]["episode"] for entry in _entries(spool)] == ["e0", "e1", "e2"]  # type: ignore[index]

    def test_a_target_that_raises_anything_never_stops_the_others(self, tmp_path: Path) -> None:
        """A target whose send raises a KeyError (a bug): the alert is spooled with the reason, the other target gets it."""

        class Broken:
            label, key = "broken", "broken:1"

            def send(self, alert: dict[str, object]) -> None:
                raise KeyError("status")

        out = tmp_path / "got"
        warnings: list[str] = []
        spool = _spool(tmp_path, warnings)
        dispatcher = Dispatcher([Broken(), Command(f"cat >> {out}; echo >> {out}")], spool, warnings.append, tries=1)
        dispatcher.start()
        dispatcher.submit(ALERT)
        dispatcher.submit({**ALERT, "episode": "second"})
        dispatcher.close()
        assert [json.loads(line)["episode"] for line in out.read_text().splitlines()] == ["failure:j1", "second"]
        assert len(_entries(spool)) == 2 and sum("KeyError" in w for w in warnings) == 2 and dispatcher.lost == 0

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

    def test_slack_text_from_the_logs_is_escaped(self) -> None:
        """Medium 9: `<!channel>`, `<url|label>`, `&` from a log line reach Slack as text, never as a ping or a link."""
        receiver = Receiver()
        logged = "boom <!channel> see <https://evil.example/x|the fix> & <@U123>"
        try:
            Webhook(receiver.url, "slack").send({**ALERT, "summary": logged, "reasoning": logged, "kibana_url": "https://kibana:5601/x"})
        finally:
            receiver.stop()
        (body,) = receiver.bodies
        text = body["text"]
        assert "&lt;!channel&gt;" in text and "&lt;https://evil.example/x|the fix&gt; &amp; &lt;@U123&gt;" in text
        assert text.count("<") == 1 and "<https://kibana:5601/x|Open in Kibana Discover>" in text  # our own link only

    def test_webhook_goes_through_the_environments_proxy(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """http_proxy is honoured as urllib honoured it: the POST goes to the proxy with the absolute URL."""
        proxy = Receiver()
        for name in ("no_proxy", "NO_PROXY", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
        try:
            Webhook("http://hooks.example.invalid/services/s3cr3t").send(ALERT)
        finally:
            proxy.stop()
        assert proxy.bodies == [ALERT] and proxy.paths == ["http://hooks.example.invalid/services/s3cr3t"]

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

    def test_a_job_name_cannot_rewrite_the_kql(self) -> None:
        """Low 23: the job name stays one quoted KQL string (`x" or rank:* or job:"y` rewrote the query)."""
        link = discover_link("https://kibana:5601", {**ALERT, "job": 'x" or rank:* or job:"y'})
        state = urllib.parse.unquote(link.split("&_a=", 1)[1])
        assert "query:'job:\"x\\\" or rank:* or job:\\\"y\" and rank:(1)'" in state, state


class TestSpool:
    def test_a_spool_others_may_write_is_refused(self, tmp_path: Path) -> None:
        """A spool directory others may write (a planted entry's way in), or a key others may read, is refused in one sentence."""
        from hvdlog.watch.spool import SpoolError

        shared = tmp_path / "shared"
        shared.mkdir(mode=0o700)
        shared.chmod(0o777)
        with pytest.raises(SpoolError, match="writable by others"):
            Spool(shared, lambda _m: None).open()
        spool = _spool(tmp_path)
        (spool.dir / "hvdlog-watch.key").chmod(0o644)
        with pytest.raises(SpoolError, match="readable by others"):
            Spool(spool.dir, lambda _m: None).open()

    def test_entries_are_signed_with_the_watchers_key(self, tmp_path: Path) -> None:
        """An entry is delivered only when its HMAC verifies: an edited alert, or another watcher's key, makes it skipped and counted."""
        spool = _spool(tmp_path)
        path = spool.append("webhook:1", ALERT)
        ((_, _, alert),) = spool.pending("webhook:1")
        assert alert == ALERT and spool.pending("webhook:2") == []
        path.write_text(path.read_text().replace("boom", "forged"))
        assert spool.pending("webhook:1") == [] and spool.skipped == 1
        other = Spool(tmp_path / "other", lambda _m: None)
        other.open()
        other.append("webhook:1", ALERT)
        (spool.dir / path.name).write_text(other.path_of("j1").read_text())
        assert spool.pending("webhook:1") == []

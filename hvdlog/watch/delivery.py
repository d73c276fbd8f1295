"""Where ``hvdlog watch``'s alerts go: webhooks and commands, with retries and a spool so none is lost silently.

A target is a webhook (a JSON POST; ``slack`` format for Slack-compatible incoming webhooks)
or a command (the alert's JSON on its stdin; exit 0 means delivered). Each alert is tried
``tries`` times per target with a doubling backoff capped at :data:`MAX_BACKOFF_S`; what still
fails is appended to a spool file (JSON lines: the target's key, never its URL, and the alert)
and said on stderr. The spool is retried every ``retry_every`` seconds and at start; what gets
through is removed from it, so a spooled alert is delivered once. URLs are shown as
``scheme://host:port/…``: the path and query of a webhook (Slack's carry the secret) and any
user:password are never printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shlex
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, Protocol

from hvdlog.types import Warn

__all__ = ["MAX_BACKOFF_S", "Command", "DeliveryError", "Dispatcher", "Target", "Webhook", "discover_link", "safe_url", "slack_message"]

#: The longest wait between two tries of one delivery.
MAX_BACKOFF_S: Final = 10.0
_FIRST_BACKOFF_S: Final = 0.5


class DeliveryError(RuntimeError):
    """One try failed; the message says why (without secrets)."""


class Target(Protocol):
    """A place alerts go."""

    #: Safe to print; ``key`` names the target in the spool.
    label: str
    key: str

    def send(self, alert: dict[str, Any]) -> None:
        """Deliver one alert or raise :class:`DeliveryError`."""


def safe_url(url: str) -> str:
    """``https://user:pw@hooks.example/services/T/B/secret?x=1`` -> ``https://hooks.example/…``."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable URL>"
    hidden = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{host}{port}{hidden}"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _rison(text: str) -> str:
    """A string as Kibana's URL state (rison) writes it: quoted, ``'`` and ``!`` escaped with ``!``."""
    return "'" + text.replace("!", "!!").replace("'", "!'") + "'"


def discover_link(kibana_url: str, alert: dict[str, Any], data_view: str = "hvdlog-logs", minutes: int = 30) -> str:
    """Kibana Discover on the alert's job and ranks, from ``minutes`` before the alert to ``minutes`` after it."""
    parts = urllib.parse.urlsplit(kibana_url)
    if parts.username is not None or parts.password is not None:  # a link is pasted around: never with credentials
        kibana_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, parts.query, parts.fragment))
    clauses = [f'job:"{alert["job"]}"'] if alert.get("job") else []
    if alert.get("ranks"):
        clauses.append("rank:(" + " or ".join(str(rank) for rank in alert["ranks"]) + ")")
    kql = " and ".join(clauses)
    time_range = f"(time:(from:now-{minutes}m,to:now))"
    if isinstance(alert.get("time"), str):
        with contextlib.suppress(ValueError):
            at = datetime.fromisoformat(alert["time"].replace("Z", "+00:00"))
            span = [(at + timedelta(minutes=sign * minutes)).strftime("%Y-%m-%dT%H:%M:%S.000Z") for sign in (-1, 1)]
            time_range = f"(time:(from:{_rison(span[0])},to:{_rison(span[1])}))"
    state = f"(dataSource:(dataViewId:{_rison(data_view)},type:dataView),query:(language:kuery,query:{_rison(kql)}))"
    safe = "():,!'"
    return f"{kibana_url.rstrip('/')}/app/discover#/?_g={urllib.parse.quote(time_range, safe=safe)}&_a={urllib.parse.quote(state, safe=safe)}"


def slack_message(alert: dict[str, Any]) -> dict[str, Any]:
    """A Slack-compatible incoming-webhook body: one ``text`` in Slack's mrkdwn."""
    marks = {"firing": ":rotating_light:", "update": ":warning:", "resolved": ":white_check_mark:"}
    lines = [f"{marks.get(alert['status'], ':information_source:')} *{alert['kind']}* ({alert['status']}) {alert['summary']}"]
    if alert.get("reasoning"):
        lines.append(f"_why_: {alert['reasoning']}" + (f" ({alert['confidence']})" if alert.get("confidence") else ""))
    if alert.get("kibana_url"):
        lines.append(f"<{alert['kibana_url']}|Open in Kibana Discover>")
    return {"text": "\n".join(lines)}


class Webhook:
    """A JSON POST to ``url``; any 2xx answer is delivered."""

    def __init__(self, url: str, fmt: str = "json", timeout: float = 10.0) -> None:
        self.url, self.fmt, self.timeout = url, fmt, timeout
        self.label = f"webhook {safe_url(url)}"
        self.key = "webhook:" + _key(url)

    def send(self, alert: dict[str, Any]) -> None:
        body = json.dumps(slack_message(alert) if self.fmt == "slack" else alert).encode()
        if urllib.parse.urlsplit(self.url).scheme not in ("http", "https"):
            raise DeliveryError("not an http(s) URL")
        request = urllib.request.Request(self.url, data=body, method="POST", headers={"content-type": "application/json"})  # noqa: S310 - http(s) only, checked above
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 - the operator's own URL
                response.read()
        except urllib.error.HTTPError as exc:
            raise DeliveryError(f"HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DeliveryError(f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason) from None


class Command:
    """A shell command that gets the alert's JSON on stdin; exit 0 is delivered."""

    def __init__(self, command: str, timeout: float = 60.0) -> None:
        self.command, self.timeout = command, timeout
        program = shlex.split(command)[0] if command.strip() else "?"
        self.label = f"command {os.path.basename(program)}"  # arguments may hold tokens: never shown
        self.key = "exec:" + _key(command)

    def send(self, alert: dict[str, Any]) -> None:
        try:
            result = subprocess.run(  # noqa: S602 - the operator's own command line, as documented
                self.command, shell=True, input=json.dumps(alert).encode(), capture_output=True, timeout=self.timeout, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DeliveryError(f"{type(exc).__name__}") from None
        if result.returncode != 0:
            raise DeliveryError(f"exit status {result.returncode}")


class Dispatcher(threading.Thread):
    """Delivers in the background so a slow receiver never delays detection; spools what fails."""

    def __init__(self, targets: list[Target], spool_of: Callable[[dict[str, Any]], Path], warn: Warn,
                 tries: int = 4, retry_every: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(name="hvdlog-watch-delivery", daemon=True)
        self.targets = {target.key: target for target in targets}
        self.spool_of, self.warn, self.tries, self.retry_every, self.sleep = spool_of, warn, tries, retry_every, sleep
        self.spools: set[Path] = set()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._idle = threading.Event()
        self.delivered = 0
        self.spooled = 0

    def submit(self, alert: dict[str, Any]) -> None:
        """Queue one alert for every target."""
        self._idle.clear()
        self._queue.put(alert)

    def add_spool(self, path: Path) -> None:
        """A spool file (left by an earlier run, say) to retry from."""
        self.spools.add(path)

    def close(self, timeout: float = 60.0) -> None:
        """Deliver what is queued (and retry the spools once), then stop; what is still queued after
        ``timeout`` goes to the spool unsent, so stopping the watcher loses nothing either."""
        self._queue.put(None)
        self.join(timeout)
        while self.is_alive():
            try:
                alert = self._queue.get_nowait()
            except queue.Empty:
                return
            if alert is None:
                continue
            for target in self.targets.values():
                self._spool(target, alert, "the watcher stopped before it was sent")

    def wait_idle(self, timeout: float) -> bool:
        """True once everything submitted so far was delivered or spooled."""
        return self._idle.wait(timeout)

    def run(self) -> None:
        last_flush = 0.0
        while True:
            try:
                alert = self._queue.get(timeout=self.retry_every)
            except queue.Empty:
                alert = False  # type: ignore[assignment]
            if alert is None:
                self._flush()
                return
            if alert:
                for target in self.targets.values():
                    self._deliver(target, alert)
            if time.monotonic() - last_flush >= self.retry_every:
                last_flush = time.monotonic()
                self._flush()
            if self._queue.empty():
                self._idle.set()

    def _deliver(self, target: Target, alert: dict[str, Any]) -> None:
        delay = _FIRST_BACKOFF_S
        for attempt in range(1, self.tries + 1):
            try:
                target.send(alert)
                self.delivered += 1
                return
            except DeliveryError as exc:
                reason = str(exc)
            if attempt < self.tries:
                self.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF_S)
        self._spool(target, alert, reason)

    def _spool(self, target: Target, alert: dict[str, Any], reason: str) -> None:
        path = self.spool_of(alert)
        line = json.dumps({"target": target.key, "alert": alert}) + "\n"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError as exc:
            self.warn(f"{alert['kind']} alert for job {alert['job']} could not be delivered to {target.label} ({reason}) "
                      f"nor spooled to {path} ({exc.strerror}): {alert['summary']}")
            return
        self.spools.add(path)
        self.spooled += 1
        self.warn(f"{alert['kind']} alert for job {alert['job']} not delivered to {target.label} after {self.tries} tries "
                  f"({reason}); spooled to {path}, retried every {self.retry_every:g} s")

    def _flush(self) -> None:
        """One try for every spooled alert whose target is configured; keep the rest."""
        for path in sorted(self.spools):
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
            kept, sent = [], 0
            for line in lines:
                entry = _entry(line)
                target = self.targets.get(entry["target"]) if entry else None
                if target is None or entry is None:
                    kept.append(line)
                    continue
                try:
                    target.send(entry["alert"])
                    sent += 1
                    self.delivered += 1
                except DeliveryError:
                    kept.append(line)
            if sent:
                _rewrite(path, kept)
                self.warn(f"delivered {sent} spooled alert(s) from {path}" + (f"; {len(kept)} still spooled" if kept else ""))


def _entry(line: str) -> dict[str, Any] | None:
    with contextlib.suppress(ValueError):
        entry = json.loads(line)
        if isinstance(entry, dict) and isinstance(entry.get("alert"), dict) and isinstance(entry.get("target"), str):
            return entry
    return None


def _rewrite(path: Path, lines: list[str]) -> None:
    """Replace the spool atomically (a crash mid-write keeps the old one); an empty spool is removed."""
    if not lines:
        with contextlib.suppress(OSError):
            path.unlink()
        return
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(temporary, path)

"""The places ``hvdlog watch``'s alerts go: a webhook (a JSON POST) or a command (the JSON on stdin).

Every way a try can fail ends as :class:`DeliveryError` with one sentence and no secret, and
every try is bounded: a webhook by a connect, a read and a total timeout and by how much of the
answer it reads (:data:`MAX_ANSWER_BYTES`); a command by its timeout, waiting for the command's
own exit, never for a child that kept its output open. A redirect is not followed: a POST is
never re-sent elsewhere, nor turned into a GET; the answer counts as a failure that names it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from typing import Any, Final, Protocol

from hvdlog.watch.messages import slack_message

__all__ = ["CONNECT_TIMEOUT_S", "MAX_ANSWER_BYTES", "READ_TIMEOUT_S", "TOTAL_TIMEOUT_S", "Command", "DeliveryError", "Target", "Webhook", "safe_url"]

#: Seconds to open a connection to a webhook.
CONNECT_TIMEOUT_S: Final = 10.0
#: Seconds a webhook may stay silent while it answers.
READ_TIMEOUT_S: Final = 10.0
#: Seconds one try of a webhook may take in all (a receiver dripping one byte at a time is cut here).
TOTAL_TIMEOUT_S: Final = 30.0
#: How much of a webhook's answer is read; the rest is never fetched (a 2xx status is all that counts).
MAX_ANSWER_BYTES: Final = 64 * 1024


class DeliveryError(RuntimeError):
    """One try failed; the message says why (without secrets)."""


class Target(Protocol):
    """A place alerts go."""

    #: Safe to print; ``key`` names the target (a hash, never the URL or the command).
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


def _why(exc: BaseException) -> str:
    """An exception as a short reason: its type and its first 100 characters."""
    text = " ".join(str(exc).split())[:100]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Webhook:
    """A JSON POST to ``url``; a 2xx answer is delivered, anything else (a redirect too) is a failure."""

    def __init__(self, url: str, fmt: str = "json", timeout: float = TOTAL_TIMEOUT_S) -> None:
        self.url, self.fmt, self.timeout = url, fmt, timeout
        self.label = f"webhook {safe_url(url)}"
        self.key = "webhook:" + _key(url)

    def send(self, alert: dict[str, Any]) -> None:
        body = json.dumps(slack_message(alert) if self.fmt == "slack" else alert).encode()
        try:
            parts = urllib.parse.urlsplit(self.url)
            host, port = parts.hostname, parts.port
        except ValueError:
            raise DeliveryError("the URL cannot be parsed") from None
        if parts.scheme not in ("http", "https") or not host:
            raise DeliveryError("not an http(s) URL")
        headers = {"content-type": "application/json", "user-agent": "hvdlog-watch"}
        if parts.username is not None:
            credentials = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            headers["authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        connection, path = _connection(parts.scheme, host, port), (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if not isinstance(connection, http.client.HTTPSConnection) and connection.host != host:  # through an http proxy
            path = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], path, "", ""))
        expired = threading.Event()
        timer = threading.Timer(self.timeout, _cut, (connection, expired))
        timer.daemon = True
        timer.start()
        try:
            connection.connect()
            if connection.sock is not None:
                connection.sock.settimeout(READ_TIMEOUT_S)
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            response.read(MAX_ANSWER_BYTES)
            status, location = response.status, response.getheader("location")
        except (http.client.HTTPException, OSError, ValueError) as exc:
            if expired.is_set():
                raise DeliveryError(f"no complete answer within {self.timeout:g} s") from None
            raise DeliveryError(_why(exc)) from None
        finally:
            timer.cancel()
            connection.close()
        if expired.is_set():  # cut mid-answer: what was read may look whole ("HTTP/1.1 200 OK" without its end)
            raise DeliveryError(f"no complete answer within {self.timeout:g} s")
        if 300 <= status < 400:
            to = f" to {safe_url(urllib.parse.urljoin(self.url, location))}" if location else ""
            raise DeliveryError(f"HTTP {status}: a redirect{to}, not followed (an alert is never re-sent elsewhere); give the final URL")
        if not 200 <= status < 300:
            raise DeliveryError(f"HTTP {status}")


def _connection(scheme: str, host: str, port: int | None) -> http.client.HTTPConnection:
    """A connection to ``host``, or through the proxy the environment names (``https_proxy``, ``no_proxy``), as urllib would."""
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(host):
        return kind(host, port, timeout=CONNECT_TIMEOUT_S)
    via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if scheme == "https":  # a CONNECT tunnel: the proxy never sees the path (the secret)
        connection = kind(via.hostname or "", via.port or 80, timeout=CONNECT_TIMEOUT_S)
        connection.set_tunnel(host, port)
        return connection
    return http.client.HTTPConnection(via.hostname or "", via.port or 80, timeout=CONNECT_TIMEOUT_S)


def _cut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """The total timeout: shut the socket so the sending thread's blocked read ends now."""
    expired.set()
    if connection.sock is not None:
        with contextlib.suppress(OSError):
            connection.sock.shutdown(socket.SHUT_RDWR)


class Command:
    """A shell command that gets the alert's JSON on stdin; its exit status 0 is delivered.

    It runs in a session of its own: a try waits for the command's own exit (not for the end of
    its output, which a child left running may hold), and a command still running after
    ``timeout`` is killed with everything it started.
    """

    def __init__(self, command: str, timeout: float = 60.0) -> None:
        self.command, self.timeout = command, timeout
        try:
            program = shlex.split(command)[0] if command.strip() else "?"
        except ValueError:
            program = command.split()[0] if command.split() else "?"
        self.label = f"command {os.path.basename(program)}"  # arguments may hold tokens: never shown
        self.key = "exec:" + _key(command)

    def send(self, alert: dict[str, Any]) -> None:
        try:
            process = subprocess.Popen(  # noqa: S602 - the operator's own command line, as documented
                self.command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
        except OSError as exc:
            raise DeliveryError(_why(exc)) from None
        try:
            process.communicate(json.dumps(alert).encode(), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise DeliveryError(f"still running after {self.timeout:g} s: killed") from None
        if process.returncode != 0:
            raise DeliveryError(f"exit status {process.returncode}")

"""The two Kibana calls ``hvdlog install`` needs: wait for "available", then import saved objects.

Kibana answers 503 or refuses connections while it starts or migrates, so waiting means
polling ``GET /api/status`` until its overall level is ``available``, up to a timeout.
Write calls need the ``kbn-xsrf`` header; the import is a multipart upload whose file
name must end in ``.ndjson``. urllib3 is already installed with the Elasticsearch client.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any, Final

from hvdlog.elastic.connection import ElasticsearchError, plain_http_warning, split_url
from hvdlog.elastic.install import SetupError
from hvdlog.elastic.kibana_versions import KIBANA_8

__all__ = ["IMPORT_PATH", "REFUSED_GRACE_S", "STATUS_PATH", "KibanaClient"]

STATUS_PATH: Final = "/api/status"
IMPORT_PATH: Final = "/api/saved_objects/_import?overwrite=true"
_POLL_S: Final = 2.0
#: Seconds of "connection refused" after which waiting for Kibana stops: a starting Kibana binds its port early.
REFUSED_GRACE_S: Final = 30.0


class KibanaClient:
    """A minimal Kibana 8/9 HTTP client; credentials go in a header and are never shown."""

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        api_key: str | None = None,
        ca_certs: str | None = None,
        request_timeout: float = 30.0,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        import urllib3

        try:
            clean, url_user, url_password = split_url(url, "Kibana")
        except ElasticsearchError as exc:
            raise SetupError(str(exc)) from None
        if not (username or api_key) and url_user:
            username, password = url_user, url_password
        #: Without credentials, so it can be shown in any message.
        self.url = clean.rstrip("/")
        secret = "an API key" if api_key else "a password" if username else None
        if warn is not None and secret is not None and (text := plain_http_warning(self.url, secret)) is not None:
            warn(text)
        self.headers = {"kbn-xsrf": "hvdlog", "accept": "application/json"}
        if api_key:
            self.headers["authorization"] = f"ApiKey {api_key}"
        elif username:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self.headers["authorization"] = f"Basic {token}"
        #: The saved-object shape for this Kibana, known once :meth:`wait_available` has read its version.
        self.target = KIBANA_8
        self.http = urllib3.PoolManager(
            ca_certs=ca_certs, timeout=urllib3.Timeout(total=request_timeout), retries=urllib3.Retry(0, redirect=3)
        )

    def _send(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        """One request; connection failures raise urllib3's HTTPError, HTTP errors come back as status."""
        headers = kwargs.pop("headers", self.headers)
        response = self.http.request(method, self.url + path, headers=headers, **kwargs)
        try:
            body = json.loads(response.data or b"null")
        except ValueError:
            body = response.data.decode(errors="replace")[:200]
        if response.status == 401:
            raise SetupError(
                f"Kibana at {self.url} rejected the credentials (401): check --kibana-username/--kibana-password"
                " or --kibana-api-key (or HVDLOG_KIBANA_*; the Elasticsearch ones are used when these are unset)."
            )
        if response.status == 403:
            raise SetupError(f"Kibana at {self.url} refused {method} {path.split('?')[0]} (403): the user needs write access to saved objects.")
        return response.status, body

    def wait_available(self, timeout_s: float, on_wait: Callable[[str], None] | None = None) -> str:
        """Poll the status API until Kibana is available; return its version, refuse one no shape is for."""
        import urllib3

        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        refused_since: float | None = None
        while True:
            refused = False
            try:
                status, body = self._send("GET", STATUS_PATH)
                levels = body.get("status", {}) if isinstance(body, dict) else {}
                level = levels.get("overall", {}).get("level")
                saved_objects = levels.get("core", {}).get("savedObjects", {}).get("level")
                # A plugin can keep Kibana "degraded" for good; the import only needs saved objects.
                if status == 200 and "available" in (level, saved_objects):
                    return self._check_version(body)
                last = f"HTTP {status}, level {level or 'unknown'}"
            except urllib3.exceptions.HTTPError as exc:
                cause = getattr(exc, "reason", None) or exc  # MaxRetryError wraps the real one
                last = f"{type(cause).__name__}: {cause}"
                refused = "refused" in str(cause).lower()
            # Nothing listening is not a Kibana still starting (that one accepts and answers 503): give up early.
            refused_since = (refused_since or time.monotonic()) if refused else None
            if refused_since is not None and time.monotonic() - refused_since >= REFUSED_GRACE_S:
                raise SetupError(
                    f"nothing listens at {self.url}: the connection was refused for {REFUSED_GRACE_S:.0f} s;"
                    " is Kibana running, and are the host and port right?"
                )
            if time.monotonic() >= deadline:
                raise SetupError(
                    f"Kibana at {self.url} was not available within {timeout_s:.0f} s ({last}):"
                    " is it running, and are the scheme, host and port right? (--kibana-timeout waits longer)"
                )
            if on_wait is not None:
                on_wait(last)
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))

    def _check_version(self, status_body: dict[str, Any]) -> str:
        """Pick the saved-object shape this Kibana imports (:attr:`target`), or refuse its version in one sentence."""
        from hvdlog.elastic.kibana_versions import target_for

        version = str(status_body.get("version", {}).get("number", ""))
        try:
            self.target = target_for(version)
        except ValueError as exc:
            raise SetupError(f"{exc} (Kibana at {self.url}).") from None
        return version

    def send_json(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """One JSON request (the alerting API); returns (status, parsed body)."""
        import urllib3

        try:
            return self._send(method, path, body=json.dumps(body).encode(), headers={**self.headers, "content-type": "application/json"})
        except urllib3.exceptions.HTTPError as exc:
            raise SetupError(f"Kibana at {self.url} stopped answering ({exc}).") from exc

    def import_objects(self, ndjson: str, filename: str) -> int:
        """Import (overwriting by id, so re-runs replace in place); return how many objects Kibana took."""
        import urllib3

        try:
            status, body = self._send("POST", IMPORT_PATH, fields={"file": (filename, ndjson.encode(), "application/ndjson")})
        except urllib3.exceptions.HTTPError as exc:
            raise SetupError(f"Kibana at {self.url} stopped answering during the import ({exc}).") from exc
        if status != 200 or not isinstance(body, dict):
            raise SetupError(f"Kibana at {self.url} refused the saved-object import (HTTP {status}: {body}).")
        if not body.get("success"):
            problems = "; ".join(f"{e.get('type')} {e.get('id')}: {e.get('error', {}).get('type')}" for e in body.get("errors", []))
            raise SetupError(f"Kibana imported {body.get('successCount', 0)} objects but failed on: {problems or body}.")
        return int(body.get("successCount", 0))

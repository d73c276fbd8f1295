"""``hvdlog install``: idempotent against the real Elasticsearch, clear errors, and the Kibana requests it sends.

Kibana cannot run here. Its path is tested two ways: against a closed port (the real
"unreachable" failure), and against a small local HTTP server that only records what
``hvdlog install`` sends and answers as the Kibana 8.x/9.x status and import APIs document; so
Kibana itself is not exercised, only our side of the conversation.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hvdlog.elastic import templates
from hvdlog.elastic.install import ElasticsearchInstaller
from hvdlog.elastic.kibana_versions import KIBANA_8, KIBANA_9
from hvdlog.elastic.rules import RULES
from hvdlog.fields import DATASETS

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "setuptest"
SECRET = "s3cret-Pa55word"  # noqa: S105 - the test cluster's password


def _hvdlog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed console script; no HVDLOG_* variables leak in from the caller."""
    exe = Path(sys.executable).with_name("hvdlog")
    base = {k: v for k, v in os.environ.items() if not k.startswith("HVDLOG_") or k in ("HVDLOG_ES_HOME", "HVDLOG_CACHE")}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env={**base, **(env or {})}, timeout=120, check=False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _step_lines(stderr: str) -> list[str]:
    return [line.strip() for line in stderr.splitlines() if line.strip()[:1] in "+~=!"]


def _stored(es: Any) -> dict[str, Any]:
    """Everything setup writes, as the cluster stores it."""
    return {
        "components": es.cluster.get_component_template(name="hvdlog-*").body,
        "index_template": es.indices.get_index_template(name=templates.INDEX_TEMPLATE).body,
    }


@pytest.mark.elasticsearch
class TestAgainstElasticsearch:
    def test_second_run_changes_nothing(self, es: Any, es_url: str) -> None:
        """Run twice: the second run reports only unchanged/skipped steps and the cluster state does not move.

        The first run also shows the no-ILM warning (exit code still 0) and never prints the password.
        """
        env = {"HVDLOG_ES_USERNAME": "elastic", "HVDLOG_ES_PASSWORD": SECRET}
        first = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, env=env)
        assert first.returncode == 0, first.stderr
        assert f"! ILM policy {templates.ILM_POLICY}: skipped - this Elasticsearch has no ILM API" in first.stderr
        assert f"! component template {templates.COMPONENT_LIFECYCLE}: skipped" in first.stderr
        assert SECRET not in first.stdout + first.stderr
        before, version = _stored(es), es.cluster.state(metric="version").body["version"]
        second = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE)
        assert second.returncode == 0, second.stderr
        steps = _step_lines(second.stderr)
        assert len(steps) == 5 + len(DATASETS), second.stderr  # policy, 3 components, template, a stream per dataset
        assert all(": unchanged" in line or ": skipped" in line for line in steps), second.stderr
        assert sum(": unchanged" in line for line in steps) == 3
        assert _stored(es) == before
        assert es.cluster.state(metric="version").body["version"] == version

    def test_second_install_sends_no_write(self, es: Any, caplog: pytest.LogCaptureFixture) -> None:
        """Compared before written: a repeat install only reads (the client logs every request it sends)."""
        installer = ElasticsearchInstaller(es, "test")
        list(installer.install(NAMESPACE))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="elastic_transport.transport"):
            steps = list(installer.install(NAMESPACE))
        requests = [record.getMessage().split(" ")[0] for record in caplog.records if record.name == "elastic_transport.transport"]
        assert requests and set(requests) == {"GET"}, requests
        assert {step.outcome for step in steps} <= {"unchanged", "skipped"}

    def test_changed_replicas_update_only_settings(self, es: Any, es_url: str) -> None:
        """--replicas 1 updates the settings component alone; the default run puts 0 back."""
        # Other tests share this server and may have installed templates of their own: start from ours.
        baseline = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE)
        assert baseline.returncode == 0, baseline.stderr
        try:
            result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--replicas", "1")
            assert result.returncode == 0, result.stderr
            updated = [line for line in _step_lines(result.stderr) if ": updated" in line]
            assert updated == [f"~ component template {templates.COMPONENT_SETTINGS}: updated"], result.stderr
            body = es.cluster.get_component_template(name=templates.COMPONENT_SETTINGS).body
            assert body["component_templates"][0]["component_template"]["template"]["settings"]["index"]["number_of_replicas"] == "1"
        finally:
            restored = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE)
        assert restored.returncode == 0 and f"{templates.COMPONENT_SETTINGS}: updated" in restored.stderr, restored.stderr


class TestErrors:
    def test_unreachable_elasticsearch(self) -> None:
        """A closed port: one sentence naming the URL, exit code 2, no traceback."""
        url = f"http://127.0.0.1:{_closed_port()}"
        result = _hvdlog("install", "--es", url)
        assert result.returncode == 2
        assert f"error: cannot reach Elasticsearch at {url}: is it running" in result.stderr
        assert "Traceback" not in result.stderr

    @pytest.mark.elasticsearch
    def test_unreachable_kibana(self, es_url: str) -> None:
        """Elasticsearch is done, Kibana's port is closed: exit 2 after the timeout, saying so."""
        url = f"http://127.0.0.1:{_closed_port()}"
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", url, "--kibana-timeout", "1")
        assert result.returncode == 2
        assert f"error: Kibana at {url} was not available within 1 s" in result.stderr
        assert "as available" not in result.stderr  # issue #40: "cannot reach Kibana at ... as available"
        assert f"waiting for Kibana at {url} to be available (up to 1 s)" in result.stderr  # said before the wait
        assert "Traceback" not in result.stderr

    def test_refused_kibana_ends_before_the_timeout(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Nothing listens at Kibana's port: the wait ends after the refusal grace, not the timeout.

        The grace is cut from 30 s to 3 s for the test (the logic does not depend on its length); the
        timeout stays 40 times longer, so a wait that ignored refusals fails on the message and the time."""
        from hvdlog.elastic import kibana_api
        from hvdlog.elastic.install import SetupError

        grace = 3.0
        monkeypatch.setattr(kibana_api, "REFUSED_GRACE_S", grace)
        url = f"http://127.0.0.1:{_closed_port()}"
        started = time.monotonic()
        with pytest.raises(SetupError, match=r"nothing listens at .*connection was refused for 3 s"):
            kibana_api.KibanaClient(url, username="u", password="p" * 12).wait_available(120)
        assert grace <= time.monotonic() - started < grace + 60

    def test_kibana_timeout_has_a_variable(self) -> None:
        """Every install option reads HVDLOG_<NAME>, --kibana-timeout too."""
        assert "HVDLOG_KIBANA_TIMEOUT" in _hvdlog("install", "--help").stdout

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (["--es-username", "elastic", "--es-password", "changeme"], "is a well-known password"),
            (["--es-username", "elastic"], "is empty"),
            (["--es-username", "elastic", "--es-password", "short-pw"], "is shorter than 12 characters"),
            (["--namespace", "Bad-Name"], "namespace 'Bad-Name' is not valid"),
            (["--replicas", "-1"], "--replicas"),
            (["--retention-days", "0"], "--retention-days"),
        ],
    )
    def test_bad_options(self, args: list[str], message: str) -> None:
        """Bad options fail before any request, with exit code 2 and a message naming the problem (in-process, for speed)."""
        from click.testing import CliRunner

        from hvdlog.cli.main import cli

        result = CliRunner().invoke(cli, ["install", "--es", f"http://127.0.0.1:{_closed_port()}", *args], env={"HVDLOG_ES_URL": None})
        assert result.exit_code == 2 and message in result.output, result.output
        assert "cannot reach" not in result.output


# --- the Kibana side, against a recorder ------------------------------------------------


class _Recorder(BaseHTTPRequestHandler):
    """Answers like Kibana's status and import APIs and records each request."""

    server: _RecordingServer

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path, dict(self.headers), b""))
        self._reply(*self.server.statuses.pop(0) if len(self.server.statuses) > 1 else self.server.statuses[0])

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.requests.append(("POST", self.path, dict(self.headers), body))
        self._reply(200, self.server.import_reply)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


class _RecordingServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Recorder)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        available = {"version": {"number": "8.19.0"}, "status": {"overall": {"level": "available"}}}
        self.statuses: list[tuple[int, dict[str, Any]]] = [(503, {"status": {"overall": {"level": "unavailable"}}}), (200, available)]
        self.import_reply: dict[str, Any] = {"success": True, "successCount": 10, "errors": []}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(name="kibana")
def fixture_kibana() -> Iterator[_RecordingServer]:
    server = _RecordingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _multipart_file(headers: dict[str, str], body: bytes) -> tuple[str | None, bytes]:
    content_type = next(v for k, v in headers.items() if k.lower() == "content-type")
    message = BytesParser(policy=email_policy).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    (part,) = list(message.iter_parts())
    assert part.get_param("name", header="content-disposition") == "file"
    return part.get_filename(), part.get_payload(decode=True)


@pytest.mark.elasticsearch
class TestKibanaRequests:
    def test_waits_then_imports_committed_objects(self, es_url: str, kibana: _RecordingServer) -> None:
        """Polls status until available, then POSTs the committed NDJSON as a .ndjson file with kbn-xsrf and auth."""
        env = {"HVDLOG_KIBANA_USERNAME": "kib", "HVDLOG_KIBANA_PASSWORD": SECRET}
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url, "--kibana-timeout", "30", env=env)
        assert result.returncode == 0, result.stderr
        assert "10 saved objects imported" in result.stderr and SECRET not in result.stdout + result.stderr
        # the saved objects, then the alerting rules (hvdlog/elastic/rules.py), each created by its stable id
        assert [(method, path) for method, path, _, _ in kibana.requests] == [
            ("GET", "/api/status"), ("GET", "/api/status"), ("POST", "/api/saved_objects/_import?overwrite=true"),
            *(("POST", f"/api/alerting/rule/{rule.id}") for rule in RULES),
        ]
        expected_auth = "Basic " + base64.b64encode(f"kib:{SECRET}".encode()).decode()
        for _, _, headers, _ in kibana.requests:
            lowered = {k.lower(): v for k, v in headers.items()}
            assert lowered["authorization"] == expected_auth and lowered["kbn-xsrf"]
        imported = kibana.requests[2]
        filename, content = _multipart_file(imported[2], imported[3])
        assert filename == "hvdlog-8.ndjson"  # the status says 8.19.0
        assert content == (REPO / KIBANA_8.file).read_bytes()

    def test_api_key_and_es_credentials_fallback(self, es_url: str, kibana: _RecordingServer) -> None:
        """Without Kibana credentials the Elasticsearch ones are used; an API key goes as `ApiKey`."""
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url, env={"HVDLOG_ES_API_KEY": "a2V5OnZhbHVl"})
        assert result.returncode == 0, result.stderr
        assert {h.get("Authorization") or h.get("authorization") for _, _, h, _ in kibana.requests} == {"ApiKey a2V5OnZhbHVl"}

    @pytest.mark.parametrize(
        ("status", "message"),
        [
            ((401, {"statusCode": 401}), "rejected the credentials (401)"),
            ((200, {"version": {"number": "7.17.0"}, "status": {"overall": {"level": "available"}}}),
             "Kibana 7.17.0 is not supported: hvdlog's saved objects import into Kibana 8.19 to 9.x"),
            ((200, {"version": {"number": "8.18.4"}, "status": {"overall": {"level": "available"}}}),
             "Kibana 8.18.4 is not supported: hvdlog's saved objects import into Kibana 8.19 to 9.x"),
            ((200, {"version": {"number": "10.0.0"}, "status": {"overall": {"level": "available"}}}),
             "Kibana 10.0.0 is not supported"),
        ],
        ids=["unauthorized", "wrong-version", "before-8.19", "next-major"],
    )
    def test_status_errors(self, es_url: str, kibana: _RecordingServer, status: tuple[int, dict[str, Any]], message: str) -> None:
        """401 and a non-8 Kibana stop setup with exit code 2 and one sentence, before any import."""
        kibana.statuses = [status]
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert all(method == "GET" for method, *_ in kibana.requests)

    @pytest.mark.parametrize(
        ("version", "target"),
        [("8.19.0", KIBANA_8), ("9.1.3", KIBANA_8), ("9.2.0", KIBANA_9), ("9.5.1", KIBANA_9), ("9.2.0-SNAPSHOT", KIBANA_9)],
    )
    def test_shape_by_kibana_version(self, es_url: str, kibana: _RecordingServer, version: str, target: Any) -> None:
        """The import sends the committed file of the shape the status API's version imports (9.0/9.1 know no 9.2 stamp)."""
        kibana.statuses = [(200, {"version": {"number": version}, "status": {"overall": {"level": "available"}}})]
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url)
        assert result.returncode == 0, result.stderr
        assert f"Kibana {version} at" in result.stderr and target.file in result.stderr
        posted = [(headers, body) for method, path, headers, body in kibana.requests if path.startswith("/api/saved_objects/_import")]
        assert len(posted) == 1
        filename, content = _multipart_file(*posted[0])
        assert filename == target.file.rsplit("/", 1)[-1] and content == (REPO / target.file).read_bytes()

    def test_degraded_kibana_with_saved_objects_available(self, es_url: str, kibana: _RecordingServer) -> None:
        """A Kibana kept "degraded" by some plugin, whose saved-objects service is available, gets the import."""
        degraded = {"level": "degraded"}
        kibana.statuses = [(200, {"version": {"number": "8.19.0"}, "status": {"overall": degraded, "core": {"savedObjects": {"level": "available"}}}})]
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url)
        assert result.returncode == 0, result.stderr
        assert [(method, path) for method, path, *_ in kibana.requests][:2] == [("GET", "/api/status"), ("POST", "/api/saved_objects/_import?overwrite=true")]
        assert len(kibana.requests) == 2 + len(RULES)  # then the alerting rules

    def test_import_errors_fail(self, es_url: str, kibana: _RecordingServer) -> None:
        """An import that reports per-object errors (HTTP 200, success false) is a failure naming the objects."""
        kibana.import_reply = {
            "success": False, "successCount": 9,
            "errors": [{"type": "dashboard", "id": "hvdlog-horovod-training", "error": {"type": "missing_references"}}],
        }
        result = _hvdlog("install", "--es", es_url, "--namespace", NAMESPACE, "--kibana", kibana.url)
        assert result.returncode == 2
        assert "failed on: dashboard hvdlog-horovod-training: missing_references" in result.stderr

"""An ``https://`` URL pointed at a plain-HTTP server (issue 40, M14): the answer is the scheme, not a CA."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from hvdlog.cli.main import cli


class _Plain(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(name="plain_port")
def fixture_plain_port() -> Iterator[int]:
    """A real plain-HTTP server on loopback."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_https_to_a_plain_http_server_says_use_http(plain_port: int) -> None:
    """One sentence that names the fix (http://), and no advice about a CA."""
    result = CliRunner().invoke(cli, ["grep", "--es", f"https://127.0.0.1:{plain_port}", "x"])
    assert result.exit_code == 2
    assert "the server speaks plain HTTP: use http://" in result.output
    assert "--es-ca" not in result.output

"""An unreachable ``--es``: one warning naming the URL once, then the error (issue #40: each line
named the URL twice, three times with urllib3's connection repr, and ``report`` added a
second warning for its timeline documents)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", ["report", "stalls", "stragglers", "first-failure", "grep"])
def test_one_warning_naming_the_url_once(command: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    args = [command, "--es", url, "--job", "x"] + (["boom"] if command == "grep" else [])
    result = subprocess.run([sys.executable, "-m", "hvdlog", *args], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert lines == [
        (f"hvdlog: warning: cannot reach Elasticsearch at {url}: is it running, and are the scheme, host and port right?"
         " (Failed to establish a new connection: [Errno 111] Connection refused)"),
        "hvdlog: error: no source could be read",
    ], lines
    assert result.stdout == ""

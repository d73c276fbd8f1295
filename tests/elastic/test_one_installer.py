"""`hvdlog install` and the compose `setup` service (setup/setup.sh) install the same things, with the same password rules.

Two installers exist because the setup service runs in the Elasticsearch image (bash and
curl, no Python) and also makes the roles and users; what both install (ILM policy,
component and index templates, data streams) must not drift. The proof is real: setup.sh
runs against the session's Elasticsearch, then `hvdlog install` with the same settings finds
every object it would write already there, identical ("unchanged"), and the names agree.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hvdlog.elastic.install import MIN_PASSWORD_LENGTH, WELL_KNOWN_PASSWORDS, password_problem

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "setup" / "setup.sh"
GOOD = "a-long-enough-secret-42"
CANDIDATES = ["", "   ", "changeme", "ChangeMe", " change me ", "Elastic", "hvdlog", "short-pw", "x" * (MIN_PASSWORD_LENGTH - 1),
              "x" * MIN_PASSWORD_LENGTH, GOOD, "passw0rd-but-longer"]


def _setup(*steps: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "ELASTIC_PASSWORD": GOOD, "KIBANA_SYSTEM_PASSWORD": GOOD,
            "LOGSTASH_WRITER_PASSWORD": GOOD, "HVDLOG_READER_PASSWORD": GOOD}
    return subprocess.run(["bash", str(SETUP), *steps], capture_output=True, text=True, env={**base, **env}, timeout=300, check=False)


def test_the_same_well_known_list() -> None:
    """setup.sh's WELL_KNOWN line and hvdlog's list are one set."""
    found = re.search(r'^WELL_KNOWN=" (.*) "$', SETUP.read_text(), re.MULTILINE)
    assert found, "setup.sh has no WELL_KNOWN line"
    assert set(found[1].split()) == WELL_KNOWN_PASSWORDS


@pytest.mark.parametrize("candidate", CANDIDATES, ids=repr)
def test_the_same_password_rule(candidate: str) -> None:
    """A password setup.sh refuses, hvdlog install refuses, and the other way round."""
    refused_by_setup = _setup("passwords", ELASTIC_PASSWORD=candidate).returncode != 0
    assert refused_by_setup == (password_problem("ELASTIC_PASSWORD", candidate) is not None), candidate


def _install(es_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hvdlog", "install", "--es", es_url, *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300, check=False)


@pytest.mark.elasticsearch
def test_setup_service_and_install_write_the_same_objects(es_url: str, tmp_path: Path) -> None:
    """setup.sh's `elasticsearch` step, then `hvdlog install` with the same settings: nothing to create or update.

    The settings are not the defaults (1 replica, 9 days), so an object left by another test with the
    defaults would show as "updated". What one skips (ILM, data streams on a build without them) the other skips.
    """
    assets = tmp_path / "assets"
    assets.mkdir()
    for name in ("elasticsearch", "kibana"):
        (assets / name).symlink_to(REPO / name)
    (assets / "roles").symlink_to(REPO / "setup" / "roles")
    ca = tmp_path / "ca.crt"
    ca.write_text("unused over http\n")
    settings = {"HVDLOG_NAMESPACE": "oneinstaller", "HVDLOG_REPLICAS": "1", "HVDLOG_RETENTION_DAYS": "9"}
    try:
        setup = _setup("elasticsearch", ELASTICSEARCH_HOSTS=es_url, ELASTICSEARCH_CA=str(ca), HVDLOG_ASSETS=str(assets), **settings)
        assert setup.returncode == 0, setup.stderr
        install = _install(es_url, "--namespace", "oneinstaller", "--replicas", "1", "--retention-days", "9")
    finally:
        assert _install(es_url).returncode == 0  # the defaults back, for the session's other tests
    assert install.returncode == 0, install.stderr
    outcomes = dict(re.findall(r"^  . (.+?): (created|updated|unchanged|skipped)", install.stderr, re.MULTILINE))
    assert "unchanged" in outcomes.values() and set(outcomes.values()) <= {"unchanged", "skipped"}, install.stderr
    lines = re.findall(r"^==> ((?:ILM policy|component template|index template|data stream) \S+)(.*)$", setup.stderr, re.MULTILINE)
    by_setup = {name: "skipped" in rest for name, rest in lines}
    if "has no ILM API" in setup.stderr:
        by_setup.update({name: True for name in outcomes if name.startswith("ILM policy")})
    assert by_setup == {name: outcome == "skipped" for name, outcome in outcomes.items()}, (setup.stderr, install.stderr)

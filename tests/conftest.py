"""Session fixtures: a real Elasticsearch on loopback, shared by every test that asks for it."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
# Horovod prints local time without a zone: pin it so golden files are stable.
os.environ["TZ"] = "UTC"
# The watcher keeps its key and default spool under $XDG_STATE_HOME: one directory per test process
# (each `make check` worker is one), so no test reads a spool another wrote, nor the developer's own.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="hvdlog-test-state-")
atexit.register(shutil.rmtree, os.environ["XDG_STATE_HOME"], True)

from support.elastic_run import ElasticRun, run_example  # noqa: E402
from support.elasticsearch import ElasticsearchServer, default_es_home, requested_majors  # noqa: E402

#: Fixtures that start or use the real Elasticsearch: a test asking for one is marked `elasticsearch`.
ES_FIXTURES = frozenset({"es_major", "es_server", "es_url", "es"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses the real Elasticsearch, so `-m "not elasticsearch"` leaves it out."""
    for item in items:
        if ES_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.elasticsearch)


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--regenerate-goldens` rewrites tests/corpus/*/*-expected.json (review the diff)."""
    parser.addoption("--regenerate-goldens", action="store_true", help="rewrite the parsing corpus' golden files")


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    """CI and timeouts send SIGTERM: turn it into KeyboardInterrupt so fixtures tear down."""
    raise KeyboardInterrupt(f"signal {signum}")


signal.signal(signal.SIGTERM, _sigterm_as_interrupt)


@pytest.fixture(name="es_major", scope="session", params=requested_majors(), ids=lambda major: f"es{major}")
def fixture_es_major(request: pytest.FixtureRequest) -> str:
    """The Elasticsearch major ("8", "9") a test runs against: every server test runs on each.

    Session-scoped, so pytest runs all tests of one major before the next: one server of each
    major per session, never both at once.
    """
    return str(request.param)


@pytest.fixture(name="es_server", scope="session")
def fixture_es_server(es_major: str) -> Iterator[ElasticsearchServer]:
    """A real single-node Elasticsearch of ``es_major``; a failure to start fails the test, never skips it."""
    if os.environ.get("HVDLOG_TIER") == "check":
        pytest.fail("this test needs Elasticsearch, which `make check` leaves out: mark it @pytest.mark.elasticsearch")
    with ElasticsearchServer(default_es_home(es_major)) as server:
        yield server


@pytest.fixture(name="es_url", scope="session")
def fixture_es_url(es_server: ElasticsearchServer) -> str:
    """Base URL of the session's Elasticsearch."""
    return es_server.url


@pytest.fixture(name="es")
def fixture_es(es_url: str):
    """An official elasticsearch-py 8.x client bound to the session's server (it talks to 9.x too)."""
    from elasticsearch import Elasticsearch

    client = Elasticsearch(es_url, request_timeout=30)
    yield client
    client.close()


@pytest.fixture(name="elastic_example", scope="session")
def fixture_elastic_example(tmp_path_factory: pytest.TempPathFactory) -> ElasticRun:
    """README's elastic example run once per session (a real elastic job: minutes on 2 shared cores),
    for every test that reads it (tests/runtime/test_resets.py, tests/analyses/test_agreement.py)."""
    return run_example(tmp_path_factory.mktemp("elastic-example"))

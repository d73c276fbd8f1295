"""Start and stop a real Elasticsearch server on loopback for tests and benchmarks.

The server is the official Elasticsearch distribution that ``scripts/fetch-elasticsearch.sh``
puts in the cache (``HVDLOG_ES_HOME`` for 8.19, ``HVDLOG_ES9_HOME`` for 9.x, which runs on
the JDK 21+ ``scripts/find-jdk21.sh`` finds). Elasticsearch refuses to run as root, so as root we
drop to ``nobody`` with ``setpriv``. The launcher gets SIGKILL when its parent dies
(``--pdeathsig``), and the server JVM exits when its launcher dies (it watches the
launcher's pipe), so no process outlives the test session even on a hard interrupt.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["MAJORS", "ElasticsearchServer", "ElasticsearchStartError", "default_es_home", "es_major", "requested_majors"]

#: How long a cold JVM on two cores may take to answer; measured ~25 s here.
STARTUP_TIMEOUT_S = 300.0  # a loaded 2-core machine took 171 s to start it (several test sessions at once)


class ElasticsearchStartError(RuntimeError):
    """The server could not be started; the message says what to check."""


#: The Elasticsearch majors the tests run against: 8.19 (the long-lived 8.x line existing
#: clusters run) and the current 9.x. ``HVDLOG_ES_MAJORS=8`` narrows a developer's run.
MAJORS: tuple[str, ...] = ("8", "9")

#: Per major: the variable naming its distribution (bootstrap.sh exports both).
_HOME_VARIABLES = {"8": "HVDLOG_ES_HOME", "9": "HVDLOG_ES9_HOME"}


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in path.name.removeprefix("elasticsearch-").split(".") if part.isdigit())


def default_es_home(major: str = "8") -> Path:
    """Where the setup script installs the distribution of ``major`` (``HVDLOG_ES_HOME``/``HVDLOG_ES9_HOME`` override)."""
    if (variable := _HOME_VARIABLES.get(major)) and (env := os.environ.get(variable)):
        return Path(env)
    cache = Path(os.environ.get("HVDLOG_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hvdlog")
    homes = sorted(cache.glob(f"elasticsearch-{major}.*"), key=_version_key)
    if not homes:
        raise ElasticsearchStartError(
            f"no Elasticsearch {major}.x distribution under {cache}: run `make test` (or scripts/fetch-elasticsearch.sh) first"
        )
    return homes[-1]


def es_major(es_home: Path) -> int:
    """The major of the distribution at ``es_home``, read from its server jar's name."""
    for jar in (es_home / "lib").glob("elasticsearch-[0-9]*.jar"):
        version = jar.stem.removeprefix("elasticsearch-").split(".")[0]
        if version.isdigit():
            return int(version)
    raise ElasticsearchStartError(f"{es_home} has no lib/elasticsearch-<version>.jar: is it an Elasticsearch distribution?")


def requested_majors() -> list[str]:
    """The majors this session tests: all of :data:`MAJORS` unless ``HVDLOG_ES_MAJORS`` narrows them."""
    wanted = [part.strip() for part in os.environ.get("HVDLOG_ES_MAJORS", ",".join(MAJORS)).split(",") if part.strip()]
    unknown = [major for major in wanted if major not in MAJORS]
    if unknown:
        raise ElasticsearchStartError(f"HVDLOG_ES_MAJORS names {unknown}; the tests know Elasticsearch {', '.join(MAJORS)}")
    return wanted


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _jdk_feature(home: Path) -> int:
    """A JDK's feature release (17, 21, 25) from its ``release`` file, 0 when unknown."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("JAVA_VERSION="):
            head = line.split("=", 1)[1].strip('"').split(".")[0]
            return int(head) if head.isdigit() else 0
    return 0


def _java_home(major: int = 8) -> str:
    """A JDK for Elasticsearch ``major``: 8 runs on Java 17+, 9 refuses anything before 21.

    8: ``ES_JAVA_HOME``/``JAVA_HOME``, else the JDK of ``java`` on PATH. 9: ``HVDLOG_ES9_JAVA_HOME``
    (what scripts/find-jdk21.sh printed), else the newest JDK 21+ under /usr/lib/jvm.
    """
    if major < 9:
        if home := os.environ.get("ES_JAVA_HOME") or os.environ.get("JAVA_HOME"):
            return home
        java = shutil.which("java")
        if not java:
            raise ElasticsearchStartError("no `java` on PATH: install a JDK 17+ (Debian: openjdk-17-jre-headless)")
        return str(Path(os.path.realpath(java)).parent.parent)
    candidates = [Path(env)] if (env := os.environ.get("HVDLOG_ES9_JAVA_HOME")) else sorted(Path("/usr/lib/jvm").glob("*"))
    usable = [home for home in candidates if (home / "bin" / "java").exists() and _jdk_feature(home) >= 21]
    if not usable:
        raise ElasticsearchStartError(
            f"Elasticsearch {major} needs a JDK 21+ and none was found: run scripts/find-jdk21.sh and set HVDLOG_ES9_JAVA_HOME to what it prints"
        )
    return str(max(usable, key=_jdk_feature))


class ElasticsearchServer:
    """One single-node Elasticsearch on 127.0.0.1, in a throw-away directory.

    Use as a context manager; ``url`` is valid between ``start()`` and ``stop()``.
    ``data_dir``: keep the indices there instead (not deleted on stop, reused by the next
    server given the same directory), e.g. a benchmark's corpus that takes minutes to index.
    """

    def __init__(self, es_home: Path | None = None, heap: str = "512m", data_dir: Path | None = None) -> None:
        self.es_home = es_home or default_es_home()
        self.heap = heap
        self.data_dir = data_dir
        self.port = 0
        self.workdir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def major(self) -> int:
        """The distribution's major (8, 9): what the tests compare behaviour across."""
        return es_major(self.es_home)

    @property
    def url(self) -> str:
        """Base URL of the HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ElasticsearchServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Launch the server and wait until the cluster is green (or fail with a reason)."""
        if not (self.es_home / "bin" / "elasticsearch").exists():
            raise ElasticsearchStartError(f"{self.es_home} is not an Elasticsearch distribution")
        self.workdir = Path(tempfile.mkdtemp(prefix="hvdlog-es-"))
        os.chmod(self.workdir, 0o755)  # noqa: S103 - the server runs as `nobody` when we are root and must traverse it
        home = self._readable_home()
        conf = self.workdir / "config"
        shutil.copytree(home / "config", conf)
        for sub in ("data", "logs", "tmp"):
            (self.workdir / sub).mkdir()
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        settings = self._settings()
        cmd = [str(home / "bin" / "elasticsearch"), "--quiet"]
        for key, value in settings.items():
            cmd += ["-E", f"{key}={value}"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "ES_JAVA_HOME": _java_home(self.major),
            "ES_PATH_CONF": str(conf),
            "ES_TMPDIR": str(self.workdir / "tmp"),
            "ES_JAVA_OPTS": f"-Xms{self.heap} -Xmx{self.heap}",
            "LANG": "C.UTF-8",
        }
        self._prepare(home, conf, env)
        if os.geteuid() == 0:
            shutil.chown(self.workdir, "nobody")
            for path in self.workdir.rglob("*"):
                shutil.chown(path, "nobody")
            if self.data_dir is not None:
                for path in (self.data_dir, *self.data_dir.rglob("*")):
                    shutil.chown(path, "nobody")
            cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--pdeathsig=SIGKILL", *cmd]
        self.log_path = self.workdir / "console.log"
        with open(self.log_path, "wb") as console:
            self.process = subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self._wait_green()
        except BaseException:
            self.stop()
            raise

    def _settings(self) -> dict[str, str]:
        """The node's settings (``-E``); subclasses add to them (security, TLS)."""
        assert self.workdir is not None
        return {
            "cluster.name": "hvdlog-test",
            "node.name": "hvdlog-test-0",
            "discovery.type": "single-node",
            "network.host": "127.0.0.1",
            "http.port": str(self.port),
            "transport.port": str(_free_port()),
            "path.data": str(self.data_dir if self.data_dir is not None else self.workdir / "data"),
            "path.logs": str(self.workdir / "logs"),
            "xpack.security.enabled": "false",
            # Tests fill small disks fast; do not let the watermark turn indices read-only.
            "cluster.routing.allocation.disk.threshold_enabled": "false",
            "action.destructive_requires_name": "false",
        }

    def _prepare(self, home: Path, conf: Path, env: dict[str, str]) -> None:
        """Hook run before the server starts (as the caller's user): keystores, certificates."""

    def _urlopen(self, url: str):
        """Open a URL of this server; subclasses add TLS and credentials."""
        return urllib.request.urlopen(url, timeout=5)  # noqa: S310 - an http URL of the loopback server this harness started

    def _readable_home(self) -> Path:
        """As root, ``nobody`` cannot traverse e.g. /root/.cache: hard-link the tree into our dir."""
        if os.geteuid() != 0:
            return self.es_home
        assert self.workdir is not None
        target = self.workdir / "es-home"
        try:
            shutil.copytree(self.es_home, target, copy_function=os.link, symlinks=True)
        except OSError:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(self.es_home, target, symlinks=True)
        return target

    def _wait_green(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        health = f"{self.url}/_cluster/health?wait_for_status=green&timeout=2s"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ElasticsearchStartError(
                    f"Elasticsearch exited with code {self.process.returncode} while starting:\n{self._tail()}"
                )
            try:
                with self._urlopen(health) as response:
                    if json.load(response).get("status") == "green":
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            time.sleep(0.5)
        raise ElasticsearchStartError(
            f"Elasticsearch did not report green within {STARTUP_TIMEOUT_S:.0f} s on {self.url}:\n{self._tail()}"
        )

    def _tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self.log_path, *(self.workdir.glob("logs/*.log") if self.workdir else [])):
            if path.exists():
                text += "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return text or "(no output)"

    def stop(self) -> None:
        """Stop the whole process group (launcher and server JVM) and delete the directory."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
        self.process = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

"""elk-compose.yml and shipper/filebeat-compose.yml, as docker compose itself would load them.

The files are loaded by compose-go (tests/support/composecheck, built by
scripts/install-composecheck.sh), the library docker compose uses: same interpolation,
profiles and validation. The tests then check what the deployment promises: security and
TLS on, healthchecks, persistent volumes, start order, heap limits, every mounted file in
the repository, and that the certificates, Logstash's beats input and Filebeat's output
agree (a real mutual-TLS handshake between a real Filebeat and the certificates the setup
creates).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.tools


REPO = Path(__file__).resolve().parents[2]
ELK = REPO / "elk-compose.yml"
SHIPPER_COMPOSE = REPO / "shipper" / "filebeat-compose.yml"
FILEBEAT_YML = REPO / "shipper" / "filebeat.yml"

#: Values a filled-in .env would have (nothing here is a real secret).
FILLED_ENV = {
    "ELASTIC_PASSWORD": "test-elastic-0f3a9c2e",
    "KIBANA_SYSTEM_PASSWORD": "test-kibana-7d1b4e8a",
    "LOGSTASH_WRITER_PASSWORD": "test-writer-5c6d2f1b",
    "HVDLOG_READER_PASSWORD": "test-reader-9e8f7a6b",
    "KIBANA_SECURITY_KEY": "a" * 32,
    "KIBANA_SAVED_OBJECTS_KEY": "b" * 32,
    "KIBANA_REPORTING_KEY": "c" * 32,
}
PASSWORDS = ("ELASTIC_PASSWORD", "KIBANA_SYSTEM_PASSWORD", "LOGSTASH_WRITER_PASSWORD", "HVDLOG_READER_PASSWORD")


def _tool(variable: str, script: str) -> str:
    """A binary the setup script installs; missing means a clear failure, never a skip."""
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{variable} is not set to an executable: run `make test` (or `bash scripts/{script}`) first")
    return path


SETUP_SH = REPO / "setup" / "setup.sh"
#: Our users and their roles, as setup/setup.sh puts them.
USERS = {"hvdlog_logstash": ("LOGSTASH_WRITER_PASSWORD", ["hvdlog_logstash_writer"]), "hvdlog_reader": ("HVDLOG_READER_PASSWORD", ["hvdlog_reader"])}


def load_roles() -> dict[str, dict]:
    """setup/roles/*.json by role name, the bodies setup.sh PUTs."""
    return {path.stem: json.loads(path.read_text()) for path in sorted((REPO / "setup" / "roles").glob("*.json"))}


def _open_dir(prefix: str) -> Path:
    """A directory the services' uid 1000 can traverse (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture(name="assets", scope="module")
def fixture_assets() -> Iterator[Path]:
    """/assets of the setup service, laid out as compose mounts it: setup/roles, elasticsearch/, kibana/.
    Copies, not links: the checkout may sit under a directory uid 1000 cannot traverse."""
    root = _open_dir("hvdlog-assets-")
    for name, source in (("roles", REPO / "setup" / "roles"), ("elasticsearch", REPO / "elasticsearch"), ("kibana", REPO / "kibana")):
        shutil.copytree(source, root / name)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@functools.cache
def _setup_script() -> Path:
    """setup/setup.sh as the service sees it (compose mounts setup/ at /setup), copied once to a
    directory uid 1000 can traverse wherever the checkout is (a clone under a 0700 directory too)."""
    root = _open_dir("hvdlog-setup-")
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    shutil.copytree(REPO / "setup", root / "setup")
    return root / "setup" / "setup.sh"


def run_setup(*steps: str, env: dict[str, str], assets: Path | None = None) -> subprocess.CompletedProcess[str]:
    """setup/setup.sh as the setup service runs it: bash + curl, as uid 1000 group 0 (the
    service's `user`), with nothing of the environment but what compose passes."""
    command = ["bash", str(_setup_script()), *steps]
    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=1000", "--regid=0", "--clear-groups", *command]
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", **({"HVDLOG_ASSETS": str(assets)} if assets else {}), **env}
    return subprocess.run(command, env=full, capture_output=True, text=True, timeout=300, check=False)


def _env_file(tmp_path: Path, values: dict[str, str], name: str = "test.env") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
    return path


def _compose(*files: Path, env_files: tuple[Path, ...] = (), check: bool = True) -> subprocess.CompletedProcess[str]:
    # Like docker compose: the project directory is the first file's folder.
    command = [_tool("HVDLOG_COMPOSECHECK", "install-composecheck.sh"), "-workdir", str(files[0].parent)]
    for env_file in env_files:
        command += ["-env-file", str(env_file)]
    result = subprocess.run([*command, *map(str, files)], capture_output=True, text=True, timeout=60, check=False)
    if check and result.returncode != 0:
        pytest.fail(f"compose-go refused {[f.name for f in files]}:\n{result.stderr}")
    return result


def _load(*files: Path, env_files: tuple[Path, ...] = ()) -> dict[str, Any]:
    return json.loads(_compose(*files, env_files=env_files).stdout)


def _bytes(size: str) -> int:
    """`2g`, `512m` (JVM and compose notation) in bytes."""
    match = re.fullmatch(r"(\d+)([kmgKMG]?)[bB]?", str(size))
    assert match, f"not a size: {size}"
    return int(match[1]) * 1024 ** " kmg".index(match[2].lower() or " ")


def visible_certs(stack: dict[str, Any], service: str, certs: Path) -> dict[str, str]:
    """Container path -> file of the certs volume (relative), for every file ``service`` can
    reach through its mounts of that volume (compose's ``volume.subpath`` honoured)."""
    seen: dict[str, str] = {}
    for mount in stack["services"][service].get("volumes", []):
        if mount["type"] != "volume" or mount["source"] != "certs":
            continue
        subpath = (mount.get("volume") or {}).get("subpath", "")
        root = certs / subpath
        for path in root.rglob("*"):
            if path.is_file():
                seen[f"{mount['target'].rstrip('/')}/{path.relative_to(root).as_posix()}"] = path.relative_to(certs).as_posix()
    return seen


@pytest.fixture(name="example_env", scope="module")
def fixture_example_env() -> Path:
    """The committed template every operator starts from."""
    return REPO / ".env.example"


@pytest.fixture(name="stack")
def fixture_stack(tmp_path: Path, example_env: Path) -> dict[str, Any]:
    """elk-compose.yml resolved with .env.example plus the passwords an operator fills in."""
    return _load(ELK, env_files=(example_env, _env_file(tmp_path, FILLED_ENV)))


@pytest.fixture(name="certs", scope="module")
def fixture_certs() -> Iterator[Path]:
    """Real certificates from setup/certs.sh (elasticsearch-certutil of the test ES), as the
    `certs` service makes them: CAs, servers, PKCS#8 Logstash key, a client certificate for node1."""
    from test_certs import run_certs

    out = _open_dir("hvdlog-certs-") / "certs"
    run_certs(out, FILEBEAT_NODES="node1", HEAD_NODE_DNS="head1.cluster.example", HEAD_NODE_IPS="10.1.2.3")
    yield out
    shutil.rmtree(out.parent, ignore_errors=True)


class TestStack:
    """elk-compose.yml with a filled-in .env."""

    def test_services(self, stack: dict[str, Any]) -> None:
        """The bundled profile runs certs, Elasticsearch, setup, Logstash, Kibana and its objects, on the tested 9.x."""
        services = stack["services"]
        assert set(services) == {"certs", "elasticsearch", "setup", "logstash", "kibana", "kibana-objects"}
        for name in ("certs", "elasticsearch", "logstash", "kibana"):
            assert re.fullmatch(r"docker\.elastic\.co/\w+/\w+:9\.\d+\.\d+", services[name]["image"]), services[name]["image"]

    def test_healthchecks(self, stack: dict[str, Any]) -> None:
        """Every long-running service has a healthcheck that tests something real."""
        for name in ("elasticsearch", "logstash", "kibana"):
            check = stack["services"][name].get("healthcheck")
            assert check and check["test"][0] == "CMD-SHELL", name
            assert "curl" in check["test"][1] and check.get("retries", 0) >= 10, name
        es_check = stack["services"]["elasticsearch"]["healthcheck"]["test"][1]
        assert "https://" in es_check and "--cacert" in es_check, "the ES healthcheck must go through TLS"

    def test_start_order(self, stack: dict[str, Any]) -> None:
        """Certificates first, then ES; Logstash only after setup installed templates and users,
        and not after Kibana; the Kibana objects once Kibana is healthy."""
        services = stack["services"]
        assert services["elasticsearch"]["depends_on"]["certs"]["condition"] == "service_completed_successfully"
        assert services["setup"]["depends_on"]["elasticsearch"]["condition"] == "service_healthy"
        assert set(services["logstash"]["depends_on"]) == {"setup"}
        assert services["logstash"]["depends_on"]["setup"]["condition"] == "service_completed_successfully"
        assert services["kibana"]["depends_on"]["elasticsearch"]["condition"] == "service_healthy"
        objects = services["kibana-objects"]["depends_on"]
        assert objects["kibana"]["condition"] == "service_healthy" and objects["setup"]["condition"] == "service_completed_successfully"
        assert "KIBANA_URL" not in services["setup"]["environment"] and services["kibana-objects"]["environment"]["KIBANA_URL"]
        for one_off in ("certs", "setup", "kibana-objects"):
            assert "restart" not in services[one_off], f"{one_off} must not restart"

    def test_security_and_tls(self, stack: dict[str, Any]) -> None:
        """Security, HTTP and transport TLS on, one node, and certificates from the certs volume."""
        env = stack["services"]["elasticsearch"]["environment"]
        assert env["xpack.security.enabled"] == "true"
        assert env["xpack.security.http.ssl.enabled"] == "true"
        assert env["xpack.security.transport.ssl.enabled"] == "true"
        assert env["discovery.type"] == "single-node"
        assert env["ELASTIC_PASSWORD"] == FILLED_ENV["ELASTIC_PASSWORD"]
        kibana = stack["services"]["kibana"]["environment"]
        assert kibana["ELASTICSEARCH_USERNAME"] == "kibana_system"
        for key in ("XPACK_SECURITY_ENCRYPTIONKEY", "XPACK_ENCRYPTEDSAVEDOBJECTS_ENCRYPTIONKEY", "XPACK_REPORTING_ENCRYPTIONKEY"):
            assert len(kibana[key]) >= 32, key
        assert stack["services"]["logstash"]["environment"]["LOGSTASH_WRITER_USER"] == "hvdlog_logstash"

    def test_heap_at_most_half_of_memory(self, stack: dict[str, Any]) -> None:
        """JVM heaps leave half the container's memory to the OS (page cache, off-heap)."""
        for name, variable in (("elasticsearch", "ES_JAVA_OPTS"), ("logstash", "LS_JAVA_OPTS")):
            service = stack["services"][name]
            xmx = re.search(r"-Xmx(\S+)", service["environment"][variable])
            assert xmx, f"{name}: no -Xmx"
            assert _bytes(xmx[1]) * 2 <= int(service["mem_limit"]), f"{name}: heap {xmx[1]} > half of {service['mem_limit']}"

    def test_persistent_volumes(self, stack: dict[str, Any]) -> None:
        """ES data, Logstash queues (PQ + DLQ under path.data), Kibana data and certs are named volumes."""
        expected = {
            "elasticsearch": "/usr/share/elasticsearch/data",
            "logstash": "/usr/share/logstash/data",
            "kibana": "/usr/share/kibana/data",
            "certs": "/certs",
            "setup": "/certs/ca",
        }
        for service, target in expected.items():
            volumes = {v["target"]: v for v in stack["services"][service]["volumes"]}
            assert volumes[target]["type"] == "volume", f"{service}:{target} must be a named volume"
            assert volumes[target]["source"] in stack["volumes"]

    def test_mounted_files_exist(self, stack: dict[str, Any]) -> None:
        """Every bind mount is a file or folder of this repository, config mounted read-only."""
        binds = [(name, v) for name, service in stack["services"].items() for v in service.get("volumes", []) if v["type"] == "bind"]
        assert len(binds) >= 6
        missing = [f"{name}: {v['source']}" for name, v in binds if not Path(v["source"]).exists()]
        assert not missing, "mounted paths missing from the repository:\n" + "\n".join(missing)
        outside = [v["source"] for _, v in binds if not Path(v["source"]).resolve().is_relative_to(REPO)]
        assert not outside, f"bind mounts outside the repository: {outside}"
        writable = [f"{name}: {v['target']}" for name, v in binds if not v.get("read_only")]
        assert not writable, f"bind mounts must be read-only: {writable}"

    def test_logstash_mounts(self, stack: dict[str, Any]) -> None:
        """Logstash gets our pipelines.yml, pipeline folder, grok patterns and logstash.yml."""
        targets = {v["target"]: Path(v["source"]) for v in stack["services"]["logstash"]["volumes"] if v["type"] == "bind"}
        assert targets["/usr/share/logstash/config/pipelines.yml"] == REPO / "logstash" / "pipelines.yml"
        assert targets["/usr/share/logstash/config/logstash.yml"] == REPO / "logstash" / "config" / "logstash.yml"
        assert targets["/usr/share/logstash/pipeline"] == REPO / "logstash" / "pipeline"
        assert targets["/usr/share/logstash/patterns"] == REPO / "hvdlog" / "parse" / "assets" / "patterns"
        assert targets["/usr/share/hvdlog/messages.json"] == REPO / "hvdlog" / "parse" / "assets" / "messages.json"

    def test_logstash_reads_only_mounted_files(self, stack: dict[str, Any]) -> None:
        """Every /usr/share/... file a pipeline or its ruby scripts name is inside a mount."""
        targets = [v["target"] for v in stack["services"]["logstash"]["volumes"]]
        named = set()
        for path in (REPO / "logstash" / "pipeline").rglob("*"):  # the ruby filter's step files too
            if path.is_file():
                named |= set(re.findall(r"/usr/share/[\w./-]+", path.read_text()))
        assert named, "the pipelines name no file under /usr/share"
        image_own = ("/usr/share/logstash/data", "/usr/share/logstash/config")
        unmounted = sorted(
            name for name in named
            if not name.startswith(image_own) and not any(name == t or name.startswith(t.rstrip("/") + "/") for t in targets)
        )
        assert not unmounted, f"files the pipelines read but compose does not mount: {unmounted}"


class TestEnvironment:
    """.env.example and the ways an operator changes the stack through it."""

    def test_example_has_no_usable_password(self, example_env: Path, tmp_path: Path) -> None:
        """Compose refuses to start with .env.example as is, naming every empty secret."""
        values = dict(line.split("=", 1) for line in example_env.read_text().splitlines() if line and not line.startswith("#"))
        for name in (*PASSWORDS, "KIBANA_SECURITY_KEY", "KIBANA_SAVED_OBJECTS_KEY", "KIBANA_REPORTING_KEY"):
            assert values[name] == "", f"{name} must be empty in .env.example"
        result = _compose(ELK, env_files=(example_env,), check=False)
        assert result.returncode != 0
        for name in PASSWORDS:
            assert f"set {name} in .env" in result.stderr, name

    def test_setup_refuses_weak_passwords(self) -> None:
        """setup/setup.sh refuses empty, well-known and short passwords, naming each, before any request."""
        accepted = run_setup("passwords", env=FILLED_ENV)
        assert accepted.returncode == 0, accepted.stderr
        weak = {**FILLED_ENV, "ELASTIC_PASSWORD": "changeme", "KIBANA_SYSTEM_PASSWORD": "", "HVDLOG_READER_PASSWORD": "short1"}
        refused = run_setup(env=weak)  # every step: it must stop at the first one
        assert refused.returncode == 2
        assert "ELASTIC_PASSWORD is a well-known password" in refused.stderr
        assert "KIBANA_SYSTEM_PASSWORD is empty" in refused.stderr
        assert "HVDLOG_READER_PASSWORD is shorter" in refused.stderr
        assert "waiting for Elasticsearch" not in refused.stderr
        for well_known in ("elastic", "password", "Changeme"):
            result = run_setup("passwords", env={**FILLED_ENV, "LOGSTASH_WRITER_PASSWORD": well_known})
            assert result.returncode == 2 and "LOGSTASH_WRITER_PASSWORD is a well-known password" in result.stderr, well_known
        bad_namespace = run_setup("passwords", env={**FILLED_ENV, "HVDLOG_NAMESPACE": "Prod-1"})
        assert bad_namespace.returncode == 2 and "HVDLOG_NAMESPACE" in bad_namespace.stderr

    @pytest.mark.parametrize(
        ("version", "expected"),
        [("8.19.3", "hvdlog-8.ndjson"), ("9.1.0", "hvdlog-8.ndjson"), ("9.2.0", "hvdlog-9.ndjson"), ("9.5.1", "hvdlog-9.ndjson"),
         ("8.17.0", None), ("10.0.0", None)],
    )
    def test_setup_imports_the_shape_kibana_takes(self, assets: Path, version: str, expected: str | None) -> None:
        """setup.sh's kibana step reads the version from /api/status and posts the file kibana/shapes.txt picks
        for it, the same one `hvdlog install` picks (target_for); a version no shape is for stops it. The server
        only records what setup.sh sends: Kibana itself cannot run here."""
        from hvdlog.elastic.kibana_versions import target_for

        with _KibanaRecorder(version) as kibana:
            result = run_setup("kibana", env={**FILLED_ENV, "KIBANA_URL": kibana.url, "SETUP_WAIT_SECONDS": "20"}, assets=assets)
        if expected is None:
            assert result.returncode == 2 and f"Kibana {version} at" in result.stderr and "not supported" in result.stderr, result.stderr
            assert kibana.posted == []
            return
        assert result.returncode == 0, result.stderr
        assert expected == Path(target_for(version).file).name
        assert kibana.posted == [(expected, (REPO / "kibana" / expected).read_bytes())]

    def test_setup_steps(self) -> None:
        """An unknown step is refused; the Kibana step needs KIBANA_URL."""
        result = run_setup("bogus", env=FILLED_ENV)
        assert result.returncode == 2 and "unknown step 'bogus'" in result.stderr
        result = run_setup("kibana", env={**FILLED_ENV, "KIBANA_URL": ""})
        assert result.returncode != 0 and "KIBANA_URL is empty" in result.stderr

    def test_setup_needs_no_registry_and_runs_unprivileged(self, stack: dict[str, Any]) -> None:
        """setup and kibana-objects run bash + curl in the Elasticsearch image (no pip, no Python,
        no package registry at `up`), as uid 1000, with the committed assets and the CA
        certificate read-only, and without the repository (or .env) mounted."""
        es_image = stack["services"]["elasticsearch"]["image"]
        for name in ("setup", "kibana-objects"):
            service = stack["services"][name]
            assert service["image"] == es_image, name
            assert service["user"] == "1000:0", name
            assert service["entrypoint"] == ["bash", "/setup/setup.sh"], name
            text = json.dumps(service)
            assert "pip" not in text and "PIP_INDEX_URL" not in text and "python" not in text, name
            mounts = {v["target"]: v for v in service["volumes"]}
            assert all(v.get("read_only") for v in mounts.values()), f"{name}: every mount read-only"
            assert not any(Path(v["source"]) == REPO for v in mounts.values() if v["type"] == "bind"), f"{name} mounts the checkout (and .env)"
            certs = [v for v in mounts.values() if v["type"] == "volume"]
            assert [(v["target"], v["volume"]["subpath"]) for v in certs] == [("/certs/ca", "ca")], name
            assert Path(mounts["/assets/elasticsearch"]["source"]) == REPO / "elasticsearch"
            assert Path(mounts["/assets/kibana"]["source"]) == REPO / "kibana"
            assert Path(mounts["/assets/roles"]["source"]) == REPO / "setup" / "roles"
        assert stack["services"]["kibana-objects"]["command"] == ["kibana"]

    def test_env_is_ignored_by_git(self) -> None:
        """.env holds every password: git ignores it (asked of git itself, not read from the file)."""
        for path in (".env", "shipper/.env"):
            result = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", path], check=False)
            assert result.returncode == 0, f"{path} is not ignored by git"
        assert subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", ".env.example"], check=False).returncode == 1

    def test_cert_settings_reach_certs(self, tmp_path: Path, example_env: Path) -> None:
        """CERT_DAYS and FILEBEAT_NODES in .env reach the certs service."""
        stack = _load(ELK, env_files=(example_env, _env_file(tmp_path, {**FILLED_ENV, "CERT_DAYS": "400", "FILEBEAT_NODES": "n1,n2"})))
        env = stack["services"]["certs"]["environment"]
        assert env["CERT_DAYS"] == "400" and env["FILEBEAT_NODES"] == "n1,n2"

    def test_kibana_on_loopback_unless_opted_in(self, stack: dict[str, Any], tmp_path: Path, example_env: Path) -> None:
        """Kibana's port is published on 127.0.0.1 by default; KIBANA_BIND opens it."""
        assert [p["host_ip"] for p in stack["services"]["kibana"]["ports"]] == ["127.0.0.1"]
        assert [p["host_ip"] for p in stack["services"]["elasticsearch"]["ports"]] == ["127.0.0.1"]
        opened = _load(ELK, env_files=(example_env, _env_file(tmp_path, {**FILLED_ENV, "KIBANA_BIND": "0.0.0.0"})))  # noqa: S104 - the opt-in under test
        assert [p["host_ip"] for p in opened["services"]["kibana"]["ports"]] == ["0.0.0.0"]  # noqa: S104 - expected value, not a bind
        # With no .env value at all, the compose file's own default is loopback too.
        no_default = _load(ELK, env_files=(_env_file(tmp_path, {**FILLED_ENV, "ELASTIC_VERSION": "8.19.21", "COMPOSE_PROFILES": "elasticsearch"}, "bare.env"),))
        assert [p["host_ip"] for p in no_default["services"]["kibana"]["ports"]] == ["127.0.0.1"]

    def test_external_cluster_by_environment_only(self, tmp_path: Path, example_env: Path) -> None:
        """No profile and two variables point setup, Logstash and Kibana at another cluster."""
        external = {**FILLED_ENV, "COMPOSE_PROFILES": "", "ELASTICSEARCH_HOSTS": "https://es.example:9200", "ELASTICSEARCH_CA": "/external-ca/ca.crt"}
        stack = _load(ELK, env_files=(example_env, _env_file(tmp_path, external)))
        services = stack["services"]
        assert "elasticsearch" not in services
        assert set(services) == {"certs", "setup", "logstash", "kibana", "kibana-objects"}
        for name in ("setup", "logstash", "kibana"):
            env = services[name]["environment"]
            assert env["ELASTICSEARCH_HOSTS"] == "https://es.example:9200", name
            # compose keeps the optional dependency in the model and skips it at run time.
            dependency = services[name].get("depends_on", {}).get("elasticsearch")
            assert dependency is None or dependency["required"] is False, name
            mounts = {v["target"] for v in services[name]["volumes"]}
            assert "/external-ca" in mounts, f"{name} cannot read the external CA"
        assert services["kibana"]["environment"]["ELASTICSEARCH_SSL_CERTIFICATEAUTHORITIES"] == "/external-ca/ca.crt"
        assert services["setup"]["environment"]["ELASTICSEARCH_CA"] == "/external-ca/ca.crt"

    def test_roles_are_least_privilege(self) -> None:
        """The writer may only create documents in our data streams; the reader only read them."""
        roles = load_roles()
        writer, reader = roles["hvdlog_logstash_writer"], roles["hvdlog_reader"]
        assert [i["names"] for i in writer["indices"]] == [["logs-horovod.*-*"]]
        assert set(writer["indices"][0]["privileges"]) <= {"create_doc", "auto_configure", "create_index", "view_index_metadata"}
        assert set(writer["cluster"]) <= {"monitor"}
        assert [i["names"] for i in reader["indices"]] == [["logs-horovod.*-*"]]
        assert set(reader["indices"][0]["privileges"]) <= {"read", "view_index_metadata"}
        assert all(p.endswith(".read") for app in reader["applications"] for p in app["privileges"])
        assert {role for _, user_roles in USERS.values() for role in user_roles} == set(roles)
        # ...and they are the users setup.sh puts, with those roles.
        script = SETUP_SH.read_text()
        for user, (variable, user_roles) in USERS.items():
            assert f'put_user {user} "${variable}" {user_roles[0]}' in script


class TestShipperCompose:
    """shipper/filebeat-compose.yml: Filebeat as a container on one compute node."""

    def test_loads_and_mounts(self, tmp_path: Path) -> None:
        """It needs the node name and Logstash hosts, mounts filebeat.yml and keeps its registry."""
        env = {"NODE_NAME": "node7", "LOGSTASH_HOSTS": "head1:5044,head2:5044", "HVDLOG_ROOT": "/scratch/hvdlog", "HVDLOG_TLS_DIR": "/etc/hvdlog/tls"}
        project = _load(SHIPPER_COMPOSE, env_files=(_env_file(tmp_path, env),))
        filebeat = project["services"]["filebeat"]
        assert re.fullmatch(r"docker\.elastic\.co/beats/filebeat:9\.\d+\.\d+", filebeat["image"])
        assert filebeat["healthcheck"]["test"][0] == "CMD-SHELL"
        mounts = {v["target"]: v for v in filebeat["volumes"]}
        config = mounts["/usr/share/filebeat/filebeat.yml"]
        assert Path(config["source"]) == FILEBEAT_YML and config.get("read_only")
        assert mounts["/usr/share/filebeat/data"]["type"] == "volume", "registry and disk queue must persist"
        # The per-rank root is mounted at the same path, so the paths Filebeat reports
        # (log.file.path) and the dissect tokenizer agree with the node's real paths.
        assert mounts["/scratch/hvdlog"]["source"] == "/scratch/hvdlog" and mounts["/scratch/hvdlog"].get("read_only")
        assert filebeat["environment"]["LOGSTASH_HOSTS"] == "head1:5044,head2:5044"
        assert filebeat["environment"]["NODE_NAME"] == "node7"

    def test_requires_node_name(self, tmp_path: Path) -> None:
        """Without NODE_NAME the file does not load: Filebeat would ship nothing."""
        result = _compose(SHIPPER_COMPOSE, env_files=(_env_file(tmp_path, {"LOGSTASH_HOSTS": "head1:5044"}),), check=False)
        assert result.returncode != 0 and "NODE_NAME" in result.stderr


class TestTlsAgreement:
    """Certificates from the certs service, Logstash's beats input and Filebeat's output agree."""

    def test_beats_port(self, stack: dict[str, Any]) -> None:
        """Logstash publishes the port its beats input listens on (5044, Filebeat's default)."""
        logstash = stack["services"]["logstash"]
        port = int(logstash["environment"]["BEATS_PORT"])
        assert any(int(p["target"]) == port for p in logstash["ports"])
        assert port == 5044

    def test_logstash_beats_input_uses_compose_tls(self, stack: dict[str, Any]) -> None:
        """The beats input in logstash/pipeline, with compose's environment, listens on the
        published port with TLS on, the certs volume's files and client certificates required."""
        confs = sorted((REPO / "logstash" / "pipeline").glob("*.conf"))
        beats = [(c, m) for c in confs if (m := re.search(r"\bbeats\s*\{(.*?)\n\s*\}", c.read_text(), re.S))]
        assert len(beats) == 1, f"expected one beats input in logstash/pipeline/*.conf, found {[c.name for c, _ in beats]}"
        env = stack["services"]["logstash"]["environment"]

        def resolved(value: str) -> str:
            """Logstash's `${VAR:default}`, with the container's environment."""
            return re.sub(r"\$\{(\w+)(?::([^}]*))?\}", lambda m: env.get(m[1], m[2] or ""), value)

        settings = {key: resolved(value) for key, value in re.findall(r'(\w+)\s*=>\s*\[?\s*"?([^"\]\n]*)"?', beats[0][1][1])}
        assert int(settings["port"]) == int(env["BEATS_PORT"])
        assert settings.get("ssl_enabled", settings.get("ssl")) == "true"
        assert settings["ssl_certificate"] == env["BEATS_SSL_CERTIFICATE"]
        assert settings["ssl_key"] == env["BEATS_SSL_KEY"] and settings["ssl_key"].endswith("pkcs8.key")
        assert settings["ssl_certificate_authorities"] == env["BEATS_SSL_CA"]
        assert settings["ssl_client_authentication"] == "required"

    def test_logstash_paths_are_mounted(self, stack: dict[str, Any]) -> None:
        """Every container path logstash/ refers to lies under a mount compose gives Logstash."""
        mounts = [v["target"] for v in stack["services"]["logstash"]["volumes"]]
        texts = [p.read_text() for p in (REPO / "logstash").rglob("*") if p.is_file() and p.suffix in (".conf", ".yml")]
        paths = {m for text in texts for m in re.findall(r"(/(?:usr/share/logstash|certs|external-ca)/[\w./-]+)", text)}
        assert paths, "logstash/ refers to no container path"
        unmounted = sorted(p for p in paths if not any(p == m or p.startswith(m.rstrip("/") + "/") for m in mounts))
        assert not unmounted, f"paths Logstash would not find: {unmounted}"
        files = {p for p in paths if p.startswith("/usr/share/logstash/") and not p.endswith("/")}
        binds = {v["target"]: Path(v["source"]) for v in stack["services"]["logstash"]["volumes"] if v["type"] == "bind"}
        for path in files:
            for target, source in binds.items():
                if path.startswith(target + "/"):
                    assert (source / path.removeprefix(target + "/")).exists(), f"{path} is not in the repository"

    def test_logstash_settings_reach_logstash(self, stack: dict[str, Any]) -> None:
        """Every `${VAR}` logstash/ reads is in Logstash's environment, so .env can set it."""
        texts = [p.read_text() for p in (REPO / "logstash").rglob("*") if p.is_file() and p.suffix in (".conf", ".yml")]
        variables = {v for text in texts for v in re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text)}
        assert {"LOGSTASH_WRITER_PASSWORD", "ELASTICSEARCH_HOSTS"} <= variables
        missing = sorted(variables - set(stack["services"]["logstash"]["environment"]))
        assert not missing, f"logstash/ reads variables compose does not pass: {missing}"

    def test_certificate_paths(self, stack: dict[str, Any], certs: Path) -> None:
        """Every certificate path compose hands a service is a file certs.sh created, seen
        through that service's own mounts of the certs volume."""
        for service, keys in (
            ("logstash", ("BEATS_SSL_CERTIFICATE", "BEATS_SSL_KEY", "BEATS_SSL_CA", "ELASTICSEARCH_CA")),
            ("kibana", ("SERVER_SSL_CERTIFICATE", "SERVER_SSL_KEY", "ELASTICSEARCH_SSL_CERTIFICATEAUTHORITIES")),
            ("setup", ("ELASTICSEARCH_CA",)),
            ("kibana-objects", ("KIBANA_CA",)),
        ):
            seen = visible_certs(stack, service, certs)
            for key in keys:
                path = stack["services"][service]["environment"][key]
                assert path in seen, f"{service} {key}={path}: not a file certs.sh made, or not mounted for {service}"
        es = stack["services"]["elasticsearch"]["environment"]
        seen = visible_certs(stack, "elasticsearch", certs)
        for key in ("xpack.security.http.ssl.key", "xpack.security.http.ssl.certificate", "xpack.security.http.ssl.certificate_authorities"):
            assert f"/usr/share/elasticsearch/config/{es[key]}" in seen, key
        assert (certs / "logstash" / "logstash.pkcs8.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
        # Readable by the services (uid 1000), the CA keys by root only, nothing by others.
        modes = {p.relative_to(certs).as_posix(): p.stat() for p in certs.rglob("*") if p.is_file()}
        for name, stat in modes.items():
            assert stat.st_mode & 0o007 == 0, f"{name} is readable by others"
            if os.geteuid() == 0:
                assert stat.st_uid == (0 if name.split("/")[0].endswith("ca-key") else 1000), name

    def test_each_service_reads_only_its_own_key(self, stack: dict[str, Any], certs: Path) -> None:
        """Through its mounts of the certs volume (subpaths, read-only) each service sees its own
        key and no other; the CA keys only the certs one-off sees."""
        own = {
            "elasticsearch": {"elasticsearch/elasticsearch.key"},
            "kibana": {"kibana/kibana.key"},
            "logstash": {"logstash/logstash.key", "logstash/logstash.pkcs8.key"},
            "setup": set(),
            "kibana-objects": set(),
        }
        for service, keys in own.items():
            seen = visible_certs(stack, service, certs)
            assert {source for source in seen.values() if source.endswith(".key")} == keys, service
            mounts = [v for v in stack["services"][service]["volumes"] if v.get("source") == "certs"]
            assert mounts and all(v.get("read_only") for v in mounts), f"{service}: certs must be read-only"
        everything = visible_certs(stack, "certs", certs)
        assert {"ca-key/ca.key", "filebeat-ca-key/ca.key"} <= set(everything.values())
        assert set(stack["services"]) - set(own) == {"certs"}, "a new service needs its line here"

    def test_logstash_trusts_only_the_filebeat_ca(self, stack: dict[str, Any], certs: Path) -> None:
        """The beats input's client CA is the Filebeat CA, which signed no server certificate."""
        seen = visible_certs(stack, "logstash", certs)
        client_ca = seen[stack["services"]["logstash"]["environment"]["BEATS_SSL_CA"]]
        assert client_ca == "filebeat-ca/ca.crt"

    def test_server_names(self, certs: Path) -> None:
        """The Logstash certificate carries the head node's names (HEAD_NODE_DNS/IPS) for Filebeat."""
        text = subprocess.run(
            ["openssl", "x509", "-in", str(certs / "logstash" / "logstash.crt"), "-noout", "-ext", "subjectAltName"],
            capture_output=True, text=True, check=True,
        ).stdout
        for name in ("DNS:logstash", "DNS:head1.cluster.example", "IP Address:10.1.2.3", "DNS:localhost"):
            assert name in text

    def test_real_filebeat_handshake(self, certs: Path, tmp_path: Path) -> None:
        """A real Filebeat, with shipper/filebeat.yml, the node's folder from the certs volume and
        two Logstash hosts in LOGSTASH_HOSTS (load balancing), completes mutual TLS with both:
        servers use Logstash's certificate and PKCS#8 key and accept client certificates of
        the Filebeat CA only, as the beats input is configured."""
        peers, result = _filebeat_test_output(certs, certs / "filebeat" / "node1", tmp_path, servers=2)
        good = [peer for peer in peers if "subject" in peer]
        ports = {peer["port"] for peer in good}
        assert len(ports) == 2, f"Filebeat did not reach both Logstash hosts: {peers}\n{result.stdout}{result.stderr}"
        subject = dict(item for rdn in good[0]["subject"] for item in rdn)
        assert subject["commonName"] == "node1", "the node's name is in its certificate"
        tested = {block.split("...", 1)[0] for block in result.stdout.split("logstash: ")[1:] if "handshake... OK" in block}
        assert tested == {f"localhost:{port}" for port in ports}, result.stdout

    def test_other_certificates_are_refused(self, certs: Path, tmp_path: Path) -> None:
        """A certificate of the stack CA (here Kibana's) is not a Filebeat certificate: refused."""
        impostor = tmp_path / "impostor"
        impostor.mkdir()
        shutil.copy(certs / "ca" / "ca.crt", impostor / "ca.crt")
        shutil.copy(certs / "kibana" / "kibana.crt", impostor / "filebeat.crt")
        shutil.copy(certs / "kibana" / "kibana.key", impostor / "filebeat.key")
        peers, _result = _filebeat_test_output(certs, impostor, tmp_path, servers=1)
        # Under TLS 1.3 the client reports its side of the handshake before the server has
        # checked its certificate, so the server's verdict is the one that counts.
        assert peers and not any("subject" in peer for peer in peers), peers
        assert any("certificate verify failed" in peer.get("error", "") for peer in peers), peers


def _filebeat_test_output(certs: Path, tls_dir: Path, tmp_path: Path, servers: int) -> tuple[list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    """`filebeat test output` with shipper/filebeat.yml against ``servers`` TLS servers that
    present Logstash's certificate and require a client certificate of the Filebeat CA."""
    filebeat = _tool("HVDLOG_FILEBEAT", "install-filebeat.sh")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "logstash" / "logstash.crt", certs / "logstash" / "logstash.pkcs8.key")
    context.load_verify_locations(certs / "filebeat-ca" / "ca.crt")
    context.verify_mode = ssl.CERT_REQUIRED
    peers: list[dict[str, Any]] = []
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(servers)]

    def serve(server: socket.socket) -> None:
        port = server.getsockname()[1]

        def handshake(conn: socket.socket) -> None:
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    peers.append({**tls.getpeercert(), "port": port})
            except (OSError, ssl.SSLError) as error:
                peers.append({"error": str(error), "port": port})

        # `filebeat test output` first dials a plain connection and keeps it open, then
        # dials again for the handshake: serve each connection on its own.
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.settimeout(30)
            threading.Thread(target=handshake, args=(conn,), daemon=True).start()

    try:
        for server in sockets:
            server.settimeout(30)
            threading.Thread(target=serve, args=(server,), daemon=True).start()
        hosts = ",".join(f"localhost:{server.getsockname()[1]}" for server in sockets)
        env = {**os.environ, "NODE_NAME": "node1", "HVDLOG_ROOT": str(tmp_path), "LOGSTASH_HOSTS": hosts, "HVDLOG_TLS_DIR": str(tls_dir)}
        result = subprocess.run(
            [filebeat, "test", "output", "-c", str(FILEBEAT_YML), "--path.data", str(tmp_path / "data"),
             "--path.home", str(tmp_path), "--strict.perms=false"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )
    finally:
        for server in sockets:
            server.close()
    return peers, result


@pytest.fixture(name="secured_es", scope="module")
def fixture_secured_es(certs: Path) -> Iterator[Any]:
    """A real Elasticsearch with security and TLS on, the certs the certs service made, and
    setup/roles/*.json with the setup's users (file realm: see the harness's docstring)."""
    from support.secured_elasticsearch import SecuredElasticsearchServer

    users = {user: (FILLED_ENV[variable], roles) for user, (variable, roles) in USERS.items()}
    with SecuredElasticsearchServer(certs, FILLED_ENV["ELASTIC_PASSWORD"], load_roles(), users) as server:
        yield server


def _setup_env(secured_es: Any, certs: Path, **extra: str) -> dict[str, str]:
    """What compose passes the setup service, pointed at the test server."""
    return {**FILLED_ENV, "ELASTICSEARCH_HOSTS": secured_es.url, "ELASTICSEARCH_CA": str(certs / "ca" / "ca.crt"), "SETUP_WAIT_SECONDS": "60", **extra}


@pytest.fixture(name="provisioned", scope="module")
def fixture_provisioned(secured_es: Any, certs: Path, assets: Path) -> dict[str, str]:
    """The setup service's steps that this server supports, run for real by setup/setup.sh as
    uid 1000: passwords, wait for ES as elastic over TLS, then the Elasticsearch objects
    from the committed JSON (twice: it must be idempotent)."""
    env = _setup_env(secured_es, certs)
    for _ in range(2):
        result = run_setup("passwords", "wait", "elasticsearch", env=env, assets=assets)
        assert result.returncode == 0, result.stderr
    return env


def _client(url: str, certs: Path, user: str, password: str) -> Any:
    from elasticsearch import Elasticsearch

    return Elasticsearch(url, basic_auth=(user, password), ca_certs=str(certs / "ca" / "ca.crt"), request_timeout=30)


@pytest.mark.elasticsearch
class TestSetupService:
    """setup/setup.sh against a real secured Elasticsearch."""

    def test_writer_is_least_privilege(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """hvdlog_logstash creates documents in logs-horovod.* data streams, and nothing else."""
        from elasticsearch import AuthorizationException

        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        doc = {"@timestamp": "2026-11-29T15:47:55.123Z", "message": "train step", "rank": 1, "step": 3, "log": {"level": "info"}}
        created = writer.index(index="logs-horovod.app-default", document=doc, op_type="create", refresh=True)
        assert created["result"] == "created"
        for forbidden in (
            lambda: writer.index(index="logs-other-default", document=doc, op_type="create"),
            lambda: writer.index(index="secrets", document=doc),
            lambda: writer.search(index="logs-horovod.app-default"),
            lambda: writer.indices.delete(index="logs-horovod.app-default"),
        ):
            with pytest.raises(AuthorizationException):
                forbidden()
        writer.close()

    def test_reader_reads_only(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """hvdlog_reader finds what Logstash wrote and can change nothing."""
        from elasticsearch import AuthorizationException

        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        document = {"@timestamp": "2026-11-29T16:00:00Z", "message": "for the reader", "rank": 2}
        writer.index(index="logs-horovod.app-default", document=document, op_type="create", refresh=True)
        reader = _client(secured_es.url, certs, "hvdlog_reader", FILLED_ENV["HVDLOG_READER_PASSWORD"])
        hits = reader.search(index="logs-horovod.*-*", query={"term": {"rank": 2}})["hits"]["hits"]
        assert [h["_source"]["message"] for h in hits] == ["for the reader"]
        with pytest.raises(AuthorizationException):
            reader.index(index="logs-horovod.app-default", document={"@timestamp": "2026-11-29T16:00:00Z"}, op_type="create")
        with pytest.raises(AuthorizationException):
            reader.search(index=".security")
        reader.close()
        writer.close()

    def test_grep_over_https_as_reader(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """`hvdlog grep --es https://... --es-ca` reads as hvdlog_reader; without the CA it says to pass one."""
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        document = {"@timestamp": "2026-11-29T16:01:00Z", "message": "grep over tls", "rank": 5, "log": {"level": "error"}}
        writer.index(index="logs-horovod.app-default", document=document, op_type="create", refresh=True)
        writer.close()
        env = {**os.environ, "HVDLOG_ES_USERNAME": "hvdlog_reader", "HVDLOG_ES_PASSWORD": FILLED_ENV["HVDLOG_READER_PASSWORD"]}
        hvdlog = str(Path(sys.executable).with_name("hvdlog"))
        command = [hvdlog, "grep", "--json", "--rank", "5", "grep over tls", "--es", secured_es.url]
        found = subprocess.run([*command, "--es-ca", str(certs / "ca" / "ca.crt")], capture_output=True, text=True, env=env, check=False)
        assert found.returncode == 0, found.stderr
        assert [json.loads(line)["message"] for line in found.stdout.splitlines()] == ["grep over tls"]
        refused = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        assert refused.returncode == 2 and "pass the cluster's CA with --es-ca" in refused.stderr, refused.stderr

    def test_templates_and_privilege_names(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """The setup service (setup/setup.sh) ran as elastic over TLS (rank mapped as integer), and every privilege
        our roles name is one this Elasticsearch knows."""
        admin = _client(secured_es.url, certs, "elastic", FILLED_ENV["ELASTIC_PASSWORD"])
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        writer.index(index="logs-horovod.app-default", document={"@timestamp": "2026-11-29T16:00:00Z", "rank": 0}, op_type="create")
        mapping = admin.indices.get_mapping(index="logs-horovod.app-default")
        assert next(iter(mapping.values()))["mappings"]["properties"]["rank"]["type"] == "integer"
        builtin = admin.security.get_builtin_privileges()
        for name, role in load_roles().items():
            assert set(role["cluster"]) <= set(builtin["cluster"]), name
            for entry in role["indices"]:
                assert set(entry["privileges"]) <= set(builtin["index"]), name
        writer.close()
        admin.close()

    def test_wrong_elastic_password(self, provisioned: dict[str, str], assets: Path) -> None:
        """A changed ELASTIC_PASSWORD fails with the one sentence that explains the first-start rule."""
        result = run_setup("wait", env={**provisioned, "ELASTIC_PASSWORD": "another-password-123"}, assets=assets)
        assert result.returncode == 2 and "only applies on the first start" in result.stderr, result.stderr

    def test_weak_password_refused_before_any_request(self, certs: Path, assets: Path) -> None:
        """Weak passwords stop the setup before it contacts anything (the URL is unreachable)."""
        env = {**FILLED_ENV, "ELASTIC_PASSWORD": "changeme", "ELASTICSEARCH_HOSTS": "https://127.0.0.1:9", "ELASTICSEARCH_CA": str(certs / "ca" / "ca.crt")}
        result = run_setup(env=env, assets=assets)
        assert result.returncode == 2 and "well-known" in result.stderr and "waiting" not in result.stderr

    def test_waiting_shows_progress(self, certs: Path, assets: Path) -> None:
        """While Elasticsearch does not answer, setup says so every 10 s, then gives up with a reason."""
        env = {**FILLED_ENV, "ELASTICSEARCH_HOSTS": "https://127.0.0.1:9", "ELASTICSEARCH_CA": str(certs / "ca" / "ca.crt"), "SETUP_WAIT_SECONDS": "4"}
        result = run_setup("wait", env=env, assets=assets)
        assert result.returncode == 2
        assert re.search(r"waiting for Elasticsearch at https://127\.0\.0\.1:9 \(\d+ s", result.stderr), result.stderr  # 0 or 1 s in, by load
        assert "did not answer within 4 s" in result.stderr

    def test_committed_assets_with_env_values(self, provisioned: dict[str, str], secured_es: Any, certs: Path, assets: Path) -> None:
        """The objects setup.sh puts from the committed JSON, with HVDLOG_REPLICAS / namespace from
        .env, are exactly what hvdlog's generator defines for those values."""
        from hvdlog.elastic import templates
        from hvdlog.elastic.install import _canonical
        from hvdlog.fields import DATASETS

        result = run_setup("elasticsearch", env={**provisioned, "HVDLOG_REPLICAS": "2", "HVDLOG_NAMESPACE": "prod"}, assets=assets)
        try:
            assert result.returncode == 0, result.stderr
            admin = _client(secured_es.url, certs, "elastic", FILLED_ENV["ELASTIC_PASSWORD"])
            has_ilm = "no ILM API" not in result.stderr
            for name, body in templates.component_templates(2).items():
                if name == templates.COMPONENT_LIFECYCLE and not has_ilm:
                    continue
                stored = admin.cluster.get_component_template(name=name)["component_templates"][0]["component_template"]
                assert _canonical(stored) == _canonical(body), name
            stored = admin.indices.get_index_template(name=templates.INDEX_TEMPLATE)["index_templates"][0]["index_template"]
            assert _canonical(stored) == _canonical(templates.index_template())
            for dataset in DATASETS:
                assert f"data stream logs-{dataset}-prod" in result.stderr
            admin.close()
        finally:
            restored = run_setup("elasticsearch", env=provisioned, assets=assets)
            assert restored.returncode == 0, restored.stderr

    def test_kibana_system_untouched_on_a_cluster_it_did_not_create(self, provisioned: dict[str, str], assets: Path) -> None:
        """On any cluster but the bundled node, setup does not change kibana_system's password
        (an existing Kibana may use it) and says how to let it; told to (yes), it tries."""
        result = run_setup("kibana_system", env=provisioned, assets=assets)
        assert result.returncode == 0, result.stderr
        assert "leaves it unchanged on a cluster it did not create" in result.stderr
        assert "SET_KIBANA_SYSTEM_PASSWORD=yes" in result.stderr and "password of kibana_system" not in result.stderr
        told = run_setup("kibana_system", env={**provisioned, "SET_KIBANA_SYSTEM_PASSWORD": "yes"}, assets=assets)
        assert "leaves it unchanged" not in told.stderr
        # This server's native realm cannot store passwords (harness docstring): the attempt
        # itself is what shows; on a full distribution it succeeds.
        assert "password of kibana_system" in told.stderr or "setting the kibana_system password failed" in told.stderr, told.stderr


# --- routing and rejected events ----------------------------------------------------------------

PIPELINE_DIR = REPO / "logstash" / "pipeline"
DEAD_LETTER_RB = PIPELINE_DIR / "dead_letter.rb"
RUN_FILTER = REPO / "tests" / "support" / "ruby" / "run_filter.rb"
#: Logstash's `${VAR:default}` references.
_LS_VARIABLE = re.compile(r"\$\{(\w+)(?::([^}]*))?\}")


def es_outputs() -> dict[str, list[dict[str, str]]]:
    """Conf file name -> the settings of each of its elasticsearch outputs, as written."""
    outputs: dict[str, list[dict[str, str]]] = {}
    for conf in sorted(PIPELINE_DIR.glob("*.conf")):
        text = conf.read_text()
        section = text[text.index("\noutput {"):] if "\noutput {" in text else ""
        for block in re.findall(r"\belasticsearch\s*\{(.*?)\n\s*\}", section, re.S):
            settings = dict(re.findall(r'^\s*(\w+)\s*=>\s*"?([^"\n]*?)"?\s*$', block, re.M))
            outputs.setdefault(conf.name, []).append(settings)
    return outputs


def output_target(settings: dict[str, str], env: dict[str, str]) -> str:
    """The data stream an output writes to with auto-routing off: logs-<dataset>-<namespace>."""
    def resolve(value: str) -> str:
        return _LS_VARIABLE.sub(lambda m: env.get(m[1], m[2] or ""), value)

    return f"{resolve(settings['data_stream_type'])}-{resolve(settings['data_stream_dataset'])}-{resolve(settings['data_stream_namespace'])}"


class TestRoutingConfig:
    """Every elasticsearch output picks its data stream itself, from a fixed set."""

    def test_outputs_have_fixed_streams(self) -> None:
        from hvdlog.fields import DATASETS

        outputs = es_outputs()
        assert set(outputs) == {"horovod-app.conf", "horovod-native.conf", "horovod-timeline.conf", "fallback.conf", "dead-letter.conf"}
        datasets = set()
        for conf, settings_list in outputs.items():
            for settings in settings_list:
                assert settings["data_stream"] == "true", conf
                assert settings["data_stream_auto_routing"] == "false", f"{conf}: an event's data_stream.* would choose the stream"
                assert settings.get("data_stream_sync_fields", "true") == "true", conf
                assert settings["data_stream_type"] == "logs", conf
                assert settings["data_stream_namespace"] == "${HVDLOG_NAMESPACE:default}", conf
                assert "%{" not in settings["data_stream_dataset"], f"{conf}: the dataset must not come from the event"
                datasets.add(settings["data_stream_dataset"])
        assert datasets == set(DATASETS)
        assert [s["data_stream_dataset"] for s in outputs["dead-letter.conf"]] == ["horovod.rejected"]

    def test_filters_drop_the_events_data_stream(self) -> None:
        """The pipelines that carry user or shipper fields drop `data_stream` and never set it."""
        for name in ("horovod-app.conf", "horovod-native.conf", "horovod-timeline.conf", "fallback.conf"):
            text = (PIPELINE_DIR / name).read_text()
            removes = re.findall(r"remove_field\s*=>\s*\[(.*)\]\s*$", text, re.M)
            assert any('"data_stream"' in r for r in removes), name
            assert "[data_stream]" not in text, f"{name} sets data_stream fields"

    def test_namespace_from_a_fixed_value(self, stack: dict[str, Any]) -> None:
        """The namespace is one value from .env, checked by setup before anything runs."""
        assert stack["services"]["logstash"]["environment"]["HVDLOG_NAMESPACE"] == stack["services"]["setup"]["environment"]["HVDLOG_NAMESPACE"]


#: Documents Elasticsearch 8 refuses in our data streams (issue 13), by what is wrong.
REJECTED = {
    "object in rank": {"rank": {"value": 3}, "job": "j1", "message": "m"},
    "object in job": {"rank": 3, "job": {"name": "j1"}, "message": "m"},
    "object in message": {"rank": 3, "job": "j1", "message": {"text": "m"}},
    "object in tags": {"rank": 3, "job": "j1", "message": "m", "tags": {"a": "b"}},
    "scalar in log": {"rank": 3, "job": "j1", "message": "m", "log": "warning"},
    "scalar in horovod": {"rank": 3, "job": "j1", "message": "m", "horovod": 5},
    "bad @timestamp": {"rank": 3, "job": "j1", "message": "m", "@timestamp": "yesterday at noon"},
}
ENTRY_TIME = "2026-11-30T14:00:00.000Z"


def _jruby() -> list[str]:
    from corpus.tools_required import installed, jdk_tool

    return [jdk_tool("java"), "-jar", installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh"), "--dev"]


def dead_letter_events(rejections: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """What the dead-letter pipeline makes of refused documents: each (document, bulk item)
    becomes the event the dead_letter_queue input reads (reason formatted as
    logstash-output-elasticsearch's handle_dlq_response does, with Ruby's own Hash#inspect),
    then goes through logstash/pipeline/dead_letter.rb in JRuby."""
    formatter = (
        'require "json"; $stdin.each_line { |l| d = JSON.parse(l); '
        'puts JSON.generate({"reason" => "Could not index event to Elasticsearch. status: #{d["status"]}, '
        'action: #{d["action"]}, response: #{d["response"]}"}) }'
    )
    lines = "".join(
        json.dumps(
            {"status": item["status"], "action": ["create", {"_id": None, "_index": item["_index"], "routing": None}, document], "response": {"create": item}}
        )
        + "\n"
        for document, item in rejections
    )
    formatted = subprocess.run([*_jruby(), "-e", formatter], input=lines, capture_output=True, text=True, timeout=300, check=False)
    assert formatted.returncode == 0, formatted.stderr
    events = []
    for (document, _), line in zip(rejections, formatted.stdout.splitlines(), strict=True):  # one line out per line in
        metadata = {"dead_letter_queue": {"reason": json.loads(line)["reason"], "plugin_type": "elasticsearch",
                                          "plugin_id": "app_to_elasticsearch", "entry_time": ENTRY_TIME},
                    "hvd": {"pipeline": "horovod-app"}}
        events.append({**document, "@metadata": metadata})
    result = subprocess.run(
        [*_jruby(), str(RUN_FILTER), str(DEAD_LETTER_RB), json.dumps({"max_original_bytes": 32768})],
        input="".join(json.dumps(event) + "\n" for event in events), capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stderr
    out = []
    for line in result.stdout.splitlines():
        [event] = json.loads(line)["events"]
        event.pop("@metadata", None)  # never sent to Elasticsearch
        out.append(event)
    return out


@pytest.mark.elasticsearch
class TestRoutingAndRejections:
    """The pipelines' routing and dead-letter pieces against the real secured server, as the writer."""

    def test_hostile_routing_fields_land_in_our_stream(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """An app event carrying data_stream.* values of its own (another dataset, type and
        namespace, or a scalar) is written where horovod-app.conf's output says, by the writer,
        and no other stream appears; with auto-routing it would have hit a 403 and stalled."""
        from elasticsearch import AuthorizationException

        [app_output] = es_outputs()["horovod-app.conf"]
        target = output_target(app_output, {"HVDLOG_NAMESPACE": "default"})
        assert target == "logs-horovod.app-default"
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        admin = _client(secured_es.url, certs, "elastic", FILLED_ENV["ELASTIC_PASSWORD"])
        hostile = [
            {"type": "metrics", "dataset": "evil", "namespace": "elsewhere"},
            {"dataset": "horovod.core", "namespace": "x" * 90},
            "logs-evil-default",
        ]
        evil = hostile[0]
        with pytest.raises(AuthorizationException):
            # Where auto-routing would send the first one: the writer may not write there, so
            # Logstash would retry it forever and stall every node's shipping.
            writer.index(index=f"{evil['type']}-{evil['dataset']}-{evil['namespace']}", document={"@timestamp": "2026-11-30T10:00:00Z"}, op_type="create")
        for number, data_stream in enumerate(hostile):
            event = {"@timestamp": "2026-11-30T10:00:00Z", "message": f"hostile {number}", "rank": 7, "data_stream": data_stream}
            # The pipeline: the filter drops `data_stream`, the output sets its own (sync_fields).
            document = {key: value for key, value in event.items() if key != "data_stream"}
            document["data_stream"] = {"type": "logs", "dataset": app_output["data_stream_dataset"], "namespace": "default"}
            writer.index(index=target, document=document, op_type="create", refresh=True)
        hits = admin.search(index="logs-*,metrics-*", query={"prefix": {"message": "hostile"}}, size=10)["hits"]["hits"]
        assert len(hits) == len(hostile)
        assert all(hit["_index"].startswith(".ds-logs-horovod.app-default-") for hit in hits), [hit["_index"] for hit in hits]
        # Data streams and indices, by the core resolve API (this test build has no data stream API).
        resolved = admin.indices.resolve_index(name="*", expand_wildcards="all")
        names = {entry["name"] for kind in ("indices", "data_streams") for entry in resolved[kind]}
        assert not any("evil" in name or "elsewhere" in name or "xxxx" in name for name in names), names
        writer.close()
        admin.close()

    def test_rejected_documents_become_searchable_events(self, provisioned: dict[str, str], secured_es: Any, certs: Path) -> None:
        """Each document Elasticsearch really refuses (400, as the writer) goes through the
        dead-letter pieces and is stored in logs-horovod.rejected-default, where `hvdlog grep
        --es` (as the reader) finds it with Elasticsearch's reason and the original event."""
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        operations: list[Any] = []
        for number, (_, body) in enumerate(REJECTED.items()):
            operations += [{"create": {"_index": "logs-horovod.app-default", "_id": f"rejected-{number}"}}, {"@timestamp": "2026-11-30T11:00:00Z", **body}]
        items = writer.bulk(operations=operations, refresh=True)["items"]
        rejections = []
        for (what, body), item in zip(REJECTED.items(), items, strict=True):
            result = item["create"]
            assert result["status"] == 400, f"Elasticsearch accepted a document with {what}: {result}"
            rejections.append(({"@timestamp": "2026-11-30T11:00:00Z", **body}, result))
        events = dead_letter_events(rejections)
        for (what, _), event, (_, item) in zip(REJECTED.items(), events, rejections, strict=True):
            assert event["event"]["dataset"] == "horovod.rejected" and event["error"]["type"] == item["error"]["type"], what
            assert event["error"]["message"] == item["error"]["reason"], what
            assert json.loads(event["event"]["original"])["message"] == REJECTED[what]["message"], what
        [dead_letter_output] = es_outputs()["dead-letter.conf"]
        target = output_target(dead_letter_output, {"HVDLOG_NAMESPACE": "default"})
        stored = writer.bulk(operations=[x for event in events for x in ({"create": {"_index": target}}, event)], refresh=True)
        assert not stored["errors"], [i for i in stored["items"] if i["create"].get("error")]
        writer.close()
        env = {**os.environ, "HVDLOG_ES_USERNAME": "hvdlog_reader", "HVDLOG_ES_PASSWORD": FILLED_ENV["HVDLOG_READER_PASSWORD"]}
        hvdlog = str(Path(sys.executable).with_name("hvdlog"))
        found = subprocess.run(
            [hvdlog, "grep", "--json", "Elasticsearch rejected", "--es", secured_es.url, "--es-ca", str(certs / "ca" / "ca.crt")],
            capture_output=True, text=True, env=env, check=False,
        )
        assert found.returncode == 0, found.stderr
        documents = [json.loads(line) for line in found.stdout.splitlines()]
        reasons = {doc["error"]["message"] for doc in documents}
        assert {item["error"]["reason"] for _, item in rejections} <= reasons
        assert all(doc["event"]["dataset"] == "horovod.rejected" for doc in documents)

    def test_rejected_sample_is_current(self, provisioned: dict[str, str], secured_es: Any, certs: Path, request: pytest.FixtureRequest) -> None:
        """docs/fields.md's sample rejected event (tests/corpus/horovod.rejected) is what the
        pieces make today of a real rejection (an object in `rank`)."""
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        body = {"@timestamp": "2026-11-30T11:00:00Z", **REJECTED["object in rank"]}
        item = writer.bulk(operations=[{"create": {"_index": "logs-horovod.app-default", "_id": "sample"}}, body])["items"][0]["create"]
        writer.close()
        [event] = dead_letter_events([(body, item)])
        golden = REPO / "tests" / "corpus" / "horovod.rejected" / "dead-letter-expected.json"
        if request.config.getoption("--regenerate-goldens"):
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(json.dumps([event], indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        assert json.loads(golden.read_text()) == [event], f"stale {golden}: rewrite it with this event:\n{json.dumps([event], indent=2)}"


def _tested_versions() -> dict[str, str]:
    """The Elasticsearch versions the test servers run (scripts/lib.sh): 8.19 and the 9.x default."""
    text = (REPO / "scripts" / "lib.sh").read_text()
    found = dict(re.findall(r'^(ELASTICSEARCH9?_VERSION)="([0-9.]+)"', text, re.MULTILINE))
    return {"8": found["ELASTICSEARCH_VERSION"], "9": found["ELASTICSEARCH9_VERSION"]}


def _elastic_images(project: dict[str, Any]) -> dict[str, str]:
    return {name: service["image"] for name, service in project["services"].items() if service.get("image", "").startswith("docker.elastic.co/")}


#: Settings Logstash 9.x registers (elastic/logstash logstash-core/lib/logstash/environment.rb, plus
#: path.queue and path.dead_letter_queue registered after it; path.settings and path.logs come from the runner).
LOGSTASH_9_SETTINGS = frozenset({
    "allow_superuser", "node.name", "path.config", "path.data", "config.string", "config.test_and_exit",
    "config.reload.automatic", "config.reload.interval", "ssl.reload.automatic", "config.support_escapes",
    "config.field_reference.escape_style", "metric.collect", "pipeline.id", "pipeline.system", "pipeline.workers",
    "pipeline.batch.size", "pipeline.batch.delay", "pipeline.unsafe_shutdown", "pipeline.reloadable",
    "pipeline.plugin_classloaders", "pipeline.separate_logs", "pipeline.ordered", "pipeline.ecs_compatibility",
    "path.plugins", "log.level", "log.format", "api.enabled", "api.http.host", "api.http.port", "api.environment",
    "api.auth.type", "api.ssl.enabled", "queue.type", "queue.drain", "queue.page_capacity", "queue.max_bytes",
    "queue.max_events", "queue.checkpoint.acks", "queue.checkpoint.writes", "queue.checkpoint.retry",
    "dead_letter_queue.enable", "dead_letter_queue.max_bytes", "dead_letter_queue.flush_interval",
    "dead_letter_queue.storage_policy", "dead_letter_queue.retain.age", "path.queue", "path.dead_letter_queue",
    "path.settings", "path.logs", "monitoring.cluster_uuid",
})


class _KibanaRecorder:
    """Answers GET /api/status with a version and records each saved-object import (file name, bytes):
    what setup.sh sends, nothing of Kibana's own behaviour."""

    def __init__(self, version: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        recorder = self
        self.posted: list[tuple[str | None, bytes]] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._reply({"version": {"number": version}, "status": {"overall": {"level": "available"}}})

            def do_POST(self) -> None:
                from email.parser import BytesParser
                from email.policy import default

                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = BytesParser(policy=default).parsebytes(f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
                (part,) = list(message.iter_parts())
                recorder.posted.append((part.get_filename(), part.get_payload(decode=True)))
                self._reply({"success": True, "successCount": 1})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _KibanaRecorder:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class TestBothMajors:
    """The compose files at both Elastic majors, and the 9.x breaking changes in our configs."""

    @pytest.mark.parametrize("major", ["8", "9"])
    def test_stack_loads_at_each_major(self, tmp_path: Path, example_env: Path, major: str) -> None:
        """ELASTIC_VERSION tags every Elastic image; both tested versions give a valid project."""
        version = _tested_versions()[major]
        project = _load(ELK, env_files=(example_env, _env_file(tmp_path, {**FILLED_ENV, "ELASTIC_VERSION": version})))
        images = _elastic_images(project)
        assert set(images) == {"certs", "elasticsearch", "setup", "logstash", "kibana", "kibana-objects"}
        assert {image.rsplit(":", 1)[1] for image in images.values()} == {version}
        shipper = _load(SHIPPER_COMPOSE, env_files=(_env_file(tmp_path, {
            "NODE_NAME": "n1", "LOGSTASH_HOSTS": "head1:5044", "ELASTIC_VERSION": version}, "shipper.env"),))
        assert shipper["services"]["filebeat"]["image"].endswith(f":{version}")

    def test_default_is_the_tested_9x(self, tmp_path: Path, example_env: Path) -> None:
        """Without ELASTIC_VERSION (and in .env.example) the images are the 9.x the tests run."""
        version = _tested_versions()["9"]
        bare = _load(ELK, env_files=(_env_file(tmp_path, {**FILLED_ENV, "COMPOSE_PROFILES": "elasticsearch"}, "bare.env"),))
        assert {image.rsplit(":", 1)[1] for image in _elastic_images(bare).values()} == {version}
        example = _load(ELK, env_files=(example_env, _env_file(tmp_path, FILLED_ENV)))
        assert {image.rsplit(":", 1)[1] for image in _elastic_images(example).values()} == {version}
        shipper = _load(SHIPPER_COMPOSE, env_files=(_env_file(tmp_path, {"NODE_NAME": "n1", "LOGSTASH_HOSTS": "head1:5044"}, "shipper.env"),))
        assert shipper["services"]["filebeat"]["image"].endswith(f":{version}")

    def test_every_filestream_input_keeps_native_identity(self) -> None:
        """Filebeat 9 defaults to `fingerprint`; every input says `native` (a rotated or NFS file is not a new one)
        and turns the scanner's fingerprint off, which 9.x enables by default and which skips files under 1 KB
        (beats filebeat/input/filestream/fswatch.go: defaultFileScannerConfig, toFileDescriptor's errFileTooSmall)."""
        import yaml

        inputs = yaml.safe_load(FILEBEAT_YML.read_text())["filebeat.inputs"]
        assert len(inputs) >= 4
        for spec in inputs:
            assert spec["type"] == "filestream", spec["id"]
            assert "file_identity.native" in spec, spec["id"]
            assert not any(key.startswith("file_identity.") and key != "file_identity.native" for key in spec), spec["id"]
            assert spec.get("prospector.scanner.fingerprint.enabled") is False, spec["id"]

    def test_logstash_uses_only_settings_9x_keeps(self) -> None:
        """9.x drops `http.*` (now `api.http.*`) and the plugins' old SSL options (`ssl`, `cacert`, `ssl_verify_mode`...)."""
        import yaml

        settings = yaml.safe_load((REPO / "logstash" / "config" / "logstash.yml").read_text())
        assert not [key for key in settings if key.startswith("http.")]
        assert "api.http.host" in settings
        # Every key is one Logstash 9.x registers (logstash-core/lib/logstash/environment.rb, which
        # no longer has the `http.*` aliases), and each value is one of its allowed ones.
        assert set(settings) <= LOGSTASH_9_SETTINGS, set(settings) - LOGSTASH_9_SETTINGS
        assert settings["pipeline.ecs_compatibility"] in ("disabled", "v1", "v8")
        assert settings["queue.type"] in ("persisted", "memory")
        removed = re.compile(r"^\s*(ssl|cacert|ssl_certificate_verification|ssl_verify_mode|keystore|truststore|ssl_peer_metadata)\s*=>", re.MULTILINE)
        for conf in sorted((REPO / "logstash" / "pipeline").glob("*.conf")):
            assert not removed.findall(conf.read_text()), conf.name

"""elk-compose.yml and shipper/filebeat-compose.yml, as docker compose itself would load them.

The files are loaded by compose-go (tests/composecheck, built by
scripts/install-composecheck.sh), the library docker compose uses: same interpolation,
profiles and validation. The tests then check what the deployment promises: security and
TLS on, healthchecks, persistent volumes, start order, heap limits, every mounted file in
the repository, and that the certificates, Logstash's beats input and Filebeat's output
agree (a real mutual-TLS handshake between a real Filebeat and the certificates the setup
creates).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
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


def _provision_module() -> Any:
    """setup/provision.py, imported by path (setup/ is a folder of the stack, not a package)."""
    spec = importlib.util.spec_from_file_location("hvdlog_setup_provision", REPO / "setup" / "provision.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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


@pytest.fixture(name="example_env", scope="module")
def fixture_example_env() -> Path:
    """The committed template every operator starts from."""
    return REPO / ".env.example"


@pytest.fixture(name="stack")
def fixture_stack(tmp_path: Path, example_env: Path) -> dict[str, Any]:
    """elk-compose.yml resolved with .env.example plus the passwords an operator fills in."""
    return _load(ELK, env_files=(example_env, _env_file(tmp_path, FILLED_ENV)))


@pytest.fixture(name="certs", scope="module")
def fixture_certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real certificates from setup/certs.sh (elasticsearch-certutil of the test ES), as the
    `certs` service makes them, plus the PKCS#8 key setup/provision.py derives."""
    from harness.elasticsearch import _java_home, default_es_home

    out = tmp_path_factory.mktemp("certs")
    env = {
        **os.environ,
        "CERTS_DIR": str(out),
        "ES_HOME": str(default_es_home()),
        "ES_JAVA_HOME": _java_home(),
        "HEAD_NODE_DNS": "head1.cluster.example",
        "HEAD_NODE_IPS": "10.1.2.3",
    }
    result = subprocess.run(["bash", str(REPO / "setup" / "certs.sh")], env=env, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, f"setup/certs.sh failed:\n{result.stderr}"
    _provision_module().ensure_pkcs8(out)
    return out


class TestStack:
    """elk-compose.yml with a filled-in .env."""

    def test_services(self, stack: dict[str, Any]) -> None:
        """The bundled profile runs certs, Elasticsearch, setup, Logstash, Kibana and its objects, on 8.19."""
        services = stack["services"]
        assert set(services) == {"certs", "elasticsearch", "setup", "logstash", "kibana", "kibana-objects"}
        for name in ("certs", "elasticsearch", "logstash", "kibana"):
            assert re.fullmatch(r"docker\.elastic\.co/\w+/\w+:8\.19\.\d+", services[name]["image"]), services[name]["image"]

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
        """setup/provision.py refuses empty, well-known and short passwords, naming each."""
        check = _provision_module().check_passwords
        assert check(FILLED_ENV) == []
        problems = check({**FILLED_ENV, "ELASTIC_PASSWORD": "changeme", "KIBANA_SYSTEM_PASSWORD": "", "HVDLOG_READER_PASSWORD": "short1"})
        assert any("ELASTIC_PASSWORD is a well-known password" in p for p in problems)
        assert any("KIBANA_SYSTEM_PASSWORD is empty" in p for p in problems)
        assert any("HVDLOG_READER_PASSWORD is shorter" in p for p in problems)
        for well_known in ("elastic", "password", "Changeme"):
            assert check({**FILLED_ENV, "LOGSTASH_WRITER_PASSWORD": well_known}), well_known

    def test_setup_entry_point(self, capsys: pytest.CaptureFixture[str]) -> None:
        """provision.py takes no argument (setup) or --kibana-objects; the latter needs KIBANA_URL."""
        provision = _provision_module()
        assert provision.main(["--bogus"]) == 2
        assert "usage" in capsys.readouterr().err
        with pytest.raises(provision.ProvisionError, match="KIBANA_URL is empty"):
            provision.import_kibana_objects({**FILLED_ENV, "KIBANA_URL": ""})

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
        roles = _provision_module().load_roles()
        writer, reader = roles["hvdlog_logstash_writer"], roles["hvdlog_reader"]
        assert [i["names"] for i in writer["indices"]] == [["logs-horovod.*-*"]]
        assert set(writer["indices"][0]["privileges"]) <= {"create_doc", "auto_configure", "create_index", "view_index_metadata"}
        assert set(writer["cluster"]) <= {"monitor"}
        assert [i["names"] for i in reader["indices"]] == [["logs-horovod.*-*"]]
        assert set(reader["indices"][0]["privileges"]) <= {"read", "view_index_metadata"}
        assert all(p.endswith(".read") for app in reader["applications"] for p in app["privileges"])
        users = _provision_module().USERS
        assert {role for _, user_roles in users.values() for role in user_roles} == set(roles)


class TestShipperCompose:
    """shipper/filebeat-compose.yml: Filebeat as a container on one compute node."""

    def test_loads_and_mounts(self, tmp_path: Path) -> None:
        """It needs the node name and Logstash hosts, mounts filebeat.yml and keeps its registry."""
        env = {"NODE_NAME": "node7", "LOGSTASH_HOSTS": "head1:5044,head2:5044", "HVDLOG_ROOT": "/scratch/hvdlog", "HVDLOG_TLS_DIR": "/etc/hvdlog/tls"}
        project = _load(SHIPPER_COMPOSE, env_files=(_env_file(tmp_path, env),))
        filebeat = project["services"]["filebeat"]
        assert re.fullmatch(r"docker\.elastic\.co/beats/filebeat:8\.19\.\d+", filebeat["image"])
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
        """Every certificate path compose hands Logstash and Kibana is a file certs.sh created."""
        for service, keys in (
            ("logstash", ("BEATS_SSL_CERTIFICATE", "BEATS_SSL_KEY", "BEATS_SSL_CA")),
            ("kibana", ("SERVER_SSL_CERTIFICATE", "SERVER_SSL_KEY", "ELASTICSEARCH_SSL_CERTIFICATEAUTHORITIES")),
        ):
            for key in keys:
                path = stack["services"][service]["environment"][key]
                assert path.startswith("/certs/"), f"{service} {key}={path} is not in the certs volume"
                assert (certs / path.removeprefix("/certs/")).is_file(), f"{service} {key}: certs.sh made no {path}"
        es = stack["services"]["elasticsearch"]["environment"]
        for key in ("xpack.security.http.ssl.key", "xpack.security.http.ssl.certificate", "xpack.security.http.ssl.certificate_authorities"):
            assert (certs / es[key].removeprefix("certs/")).is_file(), key
        assert (certs / "logstash" / "logstash.pkcs8.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
        # Readable by the services (uid 1000), the CA key by root only, nothing by others.
        modes = {p.relative_to(certs).as_posix(): p.stat() for p in certs.rglob("*") if p.is_file()}
        assert modes["ca/ca.key"].st_mode & 0o077 == 0
        for name, stat in modes.items():
            assert stat.st_mode & 0o007 == 0, f"{name} is readable by others"
            if name != "ca/ca.key" and os.geteuid() == 0:
                assert stat.st_uid == 1000, f"{name} is not readable by the services' uid 1000"

    def test_server_names(self, certs: Path) -> None:
        """The Logstash certificate carries the head node's names (HEAD_NODE_DNS/IPS) for Filebeat."""
        text = subprocess.run(
            ["openssl", "x509", "-in", str(certs / "logstash" / "logstash.crt"), "-noout", "-ext", "subjectAltName"],
            capture_output=True, text=True, check=True,
        ).stdout
        for name in ("DNS:logstash", "DNS:head1.cluster.example", "IP Address:10.1.2.3", "DNS:localhost"):
            assert name in text

    def test_real_filebeat_handshake(self, certs: Path, tmp_path: Path) -> None:
        """A real Filebeat, with shipper/filebeat.yml and the certs it is given, completes mutual TLS
        with a server using Logstash's certificate and PKCS#8 key and requiring client certificates."""
        filebeat = _tool("HVDLOG_FILEBEAT", "install-filebeat.sh")
        tls_dir = tmp_path / "tls"
        tls_dir.mkdir()
        for name, source in (("ca.crt", "ca/ca.crt"), ("filebeat.crt", "filebeat/filebeat.crt"), ("filebeat.key", "filebeat/filebeat.key")):
            (tls_dir / name).write_bytes((certs / source).read_bytes())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certs / "logstash" / "logstash.crt", certs / "logstash" / "logstash.pkcs8.key")
        context.load_verify_locations(certs / "ca" / "ca.crt")
        context.verify_mode = ssl.CERT_REQUIRED
        peers: list[dict[str, Any]] = []
        with socket.create_server(("127.0.0.1", 0)) as server:
            server.settimeout(30)
            port = server.getsockname()[1]

            def handshake(conn: socket.socket) -> None:
                try:
                    with context.wrap_socket(conn, server_side=True) as tls:
                        peers.append(tls.getpeercert())
                except (OSError, ssl.SSLError) as error:
                    peers.append({"error": str(error)})

            def accept() -> None:
                # `filebeat test output` first dials a plain connection and keeps it open,
                # then dials again for the handshake: serve each connection on its own.
                while True:
                    try:
                        conn, _ = server.accept()
                    except OSError:
                        return
                    conn.settimeout(30)
                    threading.Thread(target=handshake, args=(conn,), daemon=True).start()

            thread = threading.Thread(target=accept, daemon=True)
            thread.start()
            env = {**os.environ, "NODE_NAME": "node1", "HVDLOG_ROOT": str(tmp_path), "LOGSTASH_HOSTS": f"localhost:{port}", "HVDLOG_TLS_DIR": str(tls_dir)}
            result = subprocess.run(
                [filebeat, "test", "output", "-c", str(FILEBEAT_YML), "--path.data", str(tmp_path / "data"),
                 "--path.home", str(tmp_path), "--strict.perms=false"],
                env=env, capture_output=True, text=True, timeout=60, check=False,
            )
        good = [peer for peer in peers if "subject" in peer]
        assert good, f"handshake failed: {peers}\n{result.stdout}{result.stderr}"
        subject = dict(item for rdn in good[0]["subject"] for item in rdn)
        assert subject["commonName"] == "filebeat"
        assert re.search(r"TLS\.\.\.\s*\n(.*\n)*?\s*handshake\.\.\. OK", result.stdout), result.stdout


@pytest.fixture(name="secured_es", scope="module")
def fixture_secured_es(certs: Path) -> Iterator[Any]:
    """A real Elasticsearch with security and TLS on, the certs the certs service made, and
    setup/roles/*.json with the setup's users (file realm: see the harness's docstring)."""
    from harness.secured_elasticsearch import SecuredElasticsearchServer

    provision = _provision_module()
    users = {user: (FILLED_ENV[variable], roles) for user, (variable, roles) in provision.USERS.items()}
    with SecuredElasticsearchServer(certs, FILLED_ENV["ELASTIC_PASSWORD"], provision.load_roles(), users) as server:
        yield server


@pytest.fixture(name="provisioned", scope="module")
def fixture_provisioned(secured_es: Any, certs: Path) -> dict[str, str]:
    """The setup service's steps that this server supports, run for real: wait for ES as
    elastic over TLS, then `hvdlog setup` (twice: it must be idempotent)."""
    env = {
        **os.environ,
        **FILLED_ENV,
        "CERTS_DIR": str(certs),
        "ELASTICSEARCH_HOSTS": secured_es.url,
        "ELASTICSEARCH_CA": str(certs / "ca" / "ca.crt"),
        "KIBANA_URL": "",
        "SETUP_WAIT_SECONDS": "60",
    }
    provision = _provision_module()
    url, _ = provision.connect(env)
    provision.run_hvdlog_setup(url, env)
    provision.run_hvdlog_setup(url, env)
    return env


def _client(url: str, certs: Path, user: str, password: str) -> Any:
    from elasticsearch import Elasticsearch

    return Elasticsearch(url, basic_auth=(user, password), ca_certs=str(certs / "ca" / "ca.crt"), request_timeout=30)


@pytest.mark.elasticsearch
class TestSetupService:
    """setup/provision.py against a real secured Elasticsearch."""

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
        writer.index(index="logs-horovod.app-default", document={"@timestamp": "2026-11-29T16:00:00Z", "message": "for the reader", "rank": 2}, op_type="create", refresh=True)
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
        """`hvdlog setup` ran as elastic over TLS (rank mapped as integer), and every privilege
        our roles name is one this Elasticsearch knows."""
        admin = _client(secured_es.url, certs, "elastic", FILLED_ENV["ELASTIC_PASSWORD"])
        writer = _client(secured_es.url, certs, "hvdlog_logstash", FILLED_ENV["LOGSTASH_WRITER_PASSWORD"])
        writer.index(index="logs-horovod.app-default", document={"@timestamp": "2026-11-29T16:00:00Z", "rank": 0}, op_type="create")
        mapping = admin.indices.get_mapping(index="logs-horovod.app-default")
        assert next(iter(mapping.values()))["mappings"]["properties"]["rank"]["type"] == "integer"
        builtin = admin.security.get_builtin_privileges()
        for name, role in _provision_module().load_roles().items():
            assert set(role["cluster"]) <= set(builtin["cluster"]), name
            for entry in role["indices"]:
                assert set(entry["privileges"]) <= set(builtin["index"]), name
        writer.close()
        admin.close()

    def test_wrong_elastic_password(self, provisioned: dict[str, str]) -> None:
        """A changed ELASTIC_PASSWORD fails with the one sentence that explains the first-start rule."""
        provision = _provision_module()
        with pytest.raises(provision.ProvisionError, match="only applies on the first start"):
            provision.connect({**provisioned, "ELASTIC_PASSWORD": "another-password-123"})

    def test_weak_password_refused_before_any_request(self, certs: Path) -> None:
        """Weak passwords stop the setup before it contacts anything (the URL is unreachable)."""
        provision = _provision_module()
        env = {**FILLED_ENV, "ELASTIC_PASSWORD": "changeme", "ELASTICSEARCH_HOSTS": "https://127.0.0.1:9", "ELASTICSEARCH_CA": str(certs / "ca" / "ca.crt")}
        with pytest.raises(provision.ProvisionError, match="well-known"):
            provision.provision(env)

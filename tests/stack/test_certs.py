"""setup/certs.sh, run for real (elasticsearch-certutil of the test distribution), on every
path an operator takes: a first run, a re-run, an own CA with or without its key, own
certificates, renewing one service, new head-node names, the old layout, CERT_DAYS, and
per-node Filebeat client certificates from one command.

What the rules promise (issue 17): a CA certificate is never replaced; a valid certificate
is never re-issued (except one certs.sh issued whose names changed); deleting a service's
folder re-issues exactly that service; the output says what happened.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.jvm


REPO = Path(__file__).resolve().parents[2]
CERTS_SH = REPO / "setup" / "certs.sh"
SERVERS = ("elasticsearch", "kibana", "logstash")


def run_certs(out: Path, *args: str, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    """setup/certs.sh with the test distribution's certutil, as the `certs` service runs it."""
    from support.elasticsearch import _java_home, default_es_home

    full_env = {**os.environ, "CERTS_DIR": str(out), "ES_HOME": str(default_es_home()), "ES_JAVA_HOME": _java_home(), **env}
    result = subprocess.run(["bash", str(CERTS_SH), *args], env=full_env, capture_output=True, text=True, timeout=300, check=False)
    if check:
        assert result.returncode == 0, f"certs.sh failed:\n{result.stderr}"
    return result


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def x509(path: Path, *options: str) -> str:
    return subprocess.run(["openssl", "x509", "-in", str(path), "-noout", *options], capture_output=True, text=True, check=True).stdout


def common_name(cert: Path) -> str:
    """The certificate's subject CN."""
    found = re.search(r"CN\s*=\s*([^,/\n]+)", x509(cert, "-subject", "-nameopt", "RFC2253"))
    assert found, cert
    return found[1].strip()


def verifies(cert: Path, ca: Path) -> bool:
    result = subprocess.run(["openssl", "verify", "-CAfile", str(ca), str(cert)], capture_output=True, text=True, check=False)
    return result.returncode == 0


def own_ca(directory: Path, name: str = "Site CA") -> tuple[Path, Path]:
    """An operator's own CA, made with openssl (not certutil): certificate and key."""
    directory.mkdir(parents=True, exist_ok=True)
    crt, key = directory / "site-ca.crt", directory / "site-ca.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
         "-days", "30", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=keyCertSign,cRLSign"],
        capture_output=True, check=True,
    )
    return crt, key


def own_server_cert(directory: Path, name: str, ca: tuple[Path, Path]) -> None:
    """An operator's own certificate for a service, signed by their CA."""
    directory.mkdir(parents=True, exist_ok=True)
    key, csr, crt = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.crt"
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"], capture_output=True, check=True,
    )
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial", "-out", str(crt), "-days", "30"],
        capture_output=True, check=True,
    )
    csr.unlink()


@pytest.fixture(name="fresh", scope="module")
def fixture_fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A first run into an empty volume: two nodes listed in FILEBEAT_NODES, CERT_DAYS=400."""
    out = tmp_path_factory.mktemp("fresh")
    result = run_certs(out, FILEBEAT_NODES="node1, gpu-02.cluster", CERT_DAYS="400", HEAD_NODE_DNS="head1.example")
    return out, result.stderr


def clone(fresh: Path, tmp_path: Path) -> Path:
    target = tmp_path / "certs"
    shutil.copytree(fresh, target)
    return target


class TestFirstRun:
    def test_layout(self, fresh: tuple[Path, str]) -> None:
        """Two CAs (keys in their own folders), three servers, a folder per node, PKCS#8 for Logstash."""
        out, _ = fresh
        files = set(snapshot(out))
        expected = {
            "ca/ca.crt", "ca-key/ca.key", "filebeat-ca/ca.crt", "filebeat-ca-key/ca.key",
            *(f"{name}/{name}.{ext}" for name in SERVERS for ext in ("crt", "key")),
            "logstash/logstash.pkcs8.key",
            *(f"filebeat/{node}/{f}" for node in ("node1", "gpu-02.cluster") for f in ("filebeat.crt", "filebeat.key", "ca.crt")),
        }
        assert expected <= files, expected - files
        assert not any(name.endswith(".key") for name in files if name.startswith("ca/")), "the CA key must not sit beside ca.crt"

    def test_says_what_it_did(self, fresh: tuple[Path, str]) -> None:
        _, stderr = fresh
        assert "created certificate authority ca/ca.crt" in stderr
        assert "created Filebeat client certificate authority filebeat-ca/ca.crt" in stderr
        for name in SERVERS:
            assert f"issued {name}/{name}.crt" in stderr
        assert "issued filebeat/node1/filebeat.crt for node node1 (CN=node1" in stderr

    def test_the_two_cas_have_their_own_subjects(self, fresh: tuple[Path, str]) -> None:
        """The stack CA and the Filebeat client CA are told apart by name, and each issues what it should."""
        out, _ = fresh
        assert common_name(out / "ca" / "ca.crt") == "hvdlog stack CA"
        assert common_name(out / "filebeat-ca" / "ca.crt") == "hvdlog Filebeat client CA"
        assert "hvdlog stack CA" in x509(out / "logstash" / "logstash.crt", "-issuer")
        client = next((out / "filebeat").glob("*/filebeat.crt"))
        assert "hvdlog Filebeat client CA" in x509(client, "-issuer")

    def test_cert_days(self, fresh: tuple[Path, str]) -> None:
        """CERT_DAYS sets the validity of the CAs and certificates."""
        out, _ = fresh
        for path in ("ca/ca.crt", "logstash/logstash.crt", "filebeat/node1/filebeat.crt"):
            end = x509(out / path, "-enddate").strip().split("=", 1)[1]
            expires = dt.datetime.strptime(end, "%b %d %H:%M:%S %Y %Z").replace(tzinfo=dt.timezone.utc)
            days = (expires - dt.datetime.now(dt.timezone.utc)).days
            assert 398 <= days <= 400, (path, days)

    def test_node_certificates(self, fresh: tuple[Path, str]) -> None:
        """Each node's certificate names the node and comes from the Filebeat CA, not the stack CA."""
        out, _ = fresh
        for node in ("node1", "gpu-02.cluster"):
            crt = out / "filebeat" / node / "filebeat.crt"
            assert common_name(crt) == node
            assert verifies(crt, out / "filebeat-ca" / "ca.crt")
            assert not verifies(crt, out / "ca" / "ca.crt")
            assert (out / "filebeat" / node / "ca.crt").read_bytes() == (out / "ca" / "ca.crt").read_bytes()
        # ...and no server certificate comes from the Filebeat CA (Logstash trusts only that one for clients).
        for name in SERVERS:
            assert verifies(out / name / f"{name}.crt", out / "ca" / "ca.crt")
            assert not verifies(out / name / f"{name}.crt", out / "filebeat-ca" / "ca.crt")

    def test_pkcs8_key_is_the_same_key(self, fresh: tuple[Path, str]) -> None:
        """The PKCS#8 file certs.sh writes in bash is the same RSA key, in the format the beats input reads."""
        out, _ = fresh
        pkcs8 = out / "logstash" / "logstash.pkcs8.key"
        assert pkcs8.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")
        modulus = [
            subprocess.run(["openssl", "rsa", "-in", str(key), "-noout", "-modulus"], capture_output=True, text=True, check=True).stdout
            for key in (out / "logstash" / "logstash.key", pkcs8)
        ]
        assert modulus[0] == modulus[1] and modulus[0].startswith("Modulus=")

    def test_modes(self, fresh: tuple[Path, str]) -> None:
        """Nothing readable by others; the CA keys root's alone (0600 in 0700 folders)."""
        out, _ = fresh
        for path in out.rglob("*"):
            assert path.stat().st_mode & 0o007 == 0, path
        for keydir in ("ca-key", "filebeat-ca-key"):
            assert (out / keydir).stat().st_mode & 0o777 == 0o700
            assert (out / keydir / "ca.key").stat().st_mode & 0o777 == 0o600
            if os.geteuid() == 0:
                assert (out / keydir / "ca.key").stat().st_uid == 0
        if os.geteuid() == 0:
            assert (out / "logstash" / "logstash.pkcs8.key").stat().st_uid == 1000


class TestKeepsWhatExists:
    def test_rerun_changes_nothing(self, fresh: tuple[Path, str], tmp_path: Path) -> None:
        out = clone(fresh[0], tmp_path)
        before = snapshot(out)
        result = run_certs(out, FILEBEAT_NODES="node1,gpu-02.cluster", HEAD_NODE_DNS="head1.example")
        assert snapshot(out) == before
        assert "nothing issued, everything kept" in result.stderr

    def test_renew_one_service(self, fresh: tuple[Path, str], tmp_path: Path) -> None:
        """Deleting logstash/ re-issues Logstash's certificate (and its PKCS#8 key) and nothing else."""
        out = clone(fresh[0], tmp_path)
        before = snapshot(out)
        shutil.rmtree(out / "logstash")
        result = run_certs(out, FILEBEAT_NODES="node1", HEAD_NODE_DNS="head1.example")
        after = snapshot(out)
        changed = {name for name in after if after[name] != before.get(name)}
        assert {"logstash/logstash.crt", "logstash/logstash.key", "logstash/logstash.pkcs8.key"} <= changed
        assert {name.split("/")[0] for name in changed} == {"logstash"}, changed
        assert "issued logstash/logstash.crt" in result.stderr and "issued logstash elasticsearch" not in result.stderr
        assert "issued logstash (CA" in result.stderr

    def test_new_head_names_reissue_ours_only(self, fresh: tuple[Path, str], tmp_path: Path) -> None:
        """A new HEAD_NODE_DNS re-issues the server certificates certs.sh issued; CAs and node certificates stay."""
        out = clone(fresh[0], tmp_path)
        before = snapshot(out)
        result = run_certs(out, HEAD_NODE_DNS="head2.example")
        after = snapshot(out)
        for name in SERVERS:
            assert after[f"{name}/{name}.crt"] != before[f"{name}/{name}.crt"]
            assert "DNS:head2.example" in x509(out / name / f"{name}.crt", "-ext", "subjectAltName")
        for kept in ("ca/ca.crt", "ca-key/ca.key", "filebeat-ca/ca.crt", "filebeat/node1/filebeat.crt"):
            assert after[kept] == before[kept], kept
        assert "HEAD_NODE_DNS / HEAD_NODE_IPS changed" in result.stderr

    def test_more_nodes_by_command(self, fresh: tuple[Path, str], tmp_path: Path) -> None:
        """`certs.sh filebeat n3 n4` adds those nodes' certificates and keeps the others."""
        out = clone(fresh[0], tmp_path)
        before = snapshot(out)
        result = run_certs(out, "filebeat", "n3", "n4", HEAD_NODE_DNS="head1.example")
        after = snapshot(out)
        for node in ("n3", "n4"):
            assert common_name(out / "filebeat" / node / "filebeat.crt") == node
        assert all(after[name] == data for name, data in before.items())
        assert "issued filebeat/n3 filebeat/n4" in result.stderr

    def test_bad_node_name(self, tmp_path: Path) -> None:
        result = run_certs(tmp_path / "c", "filebeat", "bad/name", check=False)
        assert result.returncode == 2 and "is not a node name" in result.stderr

    def test_old_layout_moves_the_ca_key(self, fresh: tuple[Path, str], tmp_path: Path) -> None:
        """A volume from before (ca/ca.key beside ca.crt) keeps its CA; the key moves out of the shared folder."""
        out = clone(fresh[0], tmp_path)
        key = (out / "ca-key" / "ca.key").read_bytes()
        shutil.move(out / "ca-key" / "ca.key", out / "ca" / "ca.key")
        result = run_certs(out, HEAD_NODE_DNS="head1.example")
        assert not (out / "ca" / "ca.key").exists() and (out / "ca-key" / "ca.key").read_bytes() == key
        assert "moved ca/ca.key to ca-key/ca.key" in result.stderr


class TestOwnCa:
    def test_own_ca_and_certificates_are_kept(self, tmp_path: Path) -> None:
        """An operator's CA (with key) and certificates, no instances file: nothing is re-issued."""
        site = own_ca(tmp_path / "site")
        out = tmp_path / "certs"
        (out / "ca").mkdir(parents=True)
        (out / "ca-key").mkdir()
        shutil.copy(site[0], out / "ca" / "ca.crt")
        shutil.copy(site[1], out / "ca-key" / "ca.key")
        for name in SERVERS:
            own_server_cert(out / name, name, site)
        before = snapshot(out)
        result = run_certs(out)
        after = snapshot(out)
        assert all(after[name] == data for name, data in before.items()), "an own file was replaced"
        for name in SERVERS:
            assert f"kept {name}/{name}.crt" in result.stderr
        # The beats input's PKCS#8 key is still derived from the operator's Logstash key (openssl
        # writes PKCS#8 already: copied as it is).
        assert (out / "logstash" / "logstash.pkcs8.key").read_bytes() == (out / "logstash" / "logstash.key").read_bytes()

    def test_ca_without_key_is_never_replaced(self, tmp_path: Path) -> None:
        """Only ca.crt present: kept byte for byte; a missing service certificate is a clear error."""
        site = own_ca(tmp_path / "site")
        out = tmp_path / "certs"
        (out / "ca").mkdir(parents=True)
        shutil.copy(site[0], out / "ca" / "ca.crt")
        result = run_certs(out, check=False)
        assert result.returncode == 2
        assert "ca-key/ca.key is missing" in result.stderr and "elasticsearch kibana logstash" in result.stderr
        assert (out / "ca" / "ca.crt").read_bytes() == site[0].read_bytes()
        assert not (out / "ca-key" / "ca.key").exists()
        # With the operator's own server certificates in place, the same CA serves.
        for name in SERVERS:
            own_server_cert(out / name, name, site)
        result = run_certs(out)
        assert (out / "ca" / "ca.crt").read_bytes() == site[0].read_bytes()
        assert "kept certificate authority ca/ca.crt (no ca-key/ca.key" in result.stderr

    def test_key_without_certificate_is_refused(self, tmp_path: Path) -> None:
        site = own_ca(tmp_path / "site")
        out = tmp_path / "certs"
        (out / "ca-key").mkdir(parents=True)
        shutil.copy(site[1], out / "ca-key" / "ca.key")
        result = run_certs(out, check=False)
        assert result.returncode == 2 and "ca-key/ca.key exists without ca/ca.crt" in result.stderr
        assert (out / "ca-key" / "ca.key").read_bytes() == site[1].read_bytes()

    def test_cert_days_validated(self, tmp_path: Path) -> None:
        result = run_certs(tmp_path / "c", check=False, CERT_DAYS="3y")
        assert result.returncode == 2 and "CERT_DAYS" in result.stderr

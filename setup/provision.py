"""One-off provisioning of the secured stack, run by the ``setup`` service of elk-compose.yml.

Why a script and not curl loops: every step must be safe to re-run, refuse weak passwords
before it touches anything, and fail with one sentence that says what to check. Steps:

1. refuse empty or well-known passwords (all of them, before any request);
2. write Logstash's key as PKCS#8 (the beats input refuses certutil's PKCS#1 keys);
3. wait for Elasticsearch, as ``elastic``;
4. put the roles in ``setup/roles/*.json`` and the users that hold them, and set the
   ``kibana_system`` password;
5. run ``hvdlog setup`` (templates, ILM, data streams) as ``elastic``.

With ``--kibana-objects`` (the ``kibana-objects`` service, once Kibana is healthy) it runs
``hvdlog setup --kibana`` instead, so a Kibana problem never holds up Logstash.

Standard library plus the ``elasticsearch`` client that hvdlog already depends on.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = [
    "PASSWORD_VARIABLES",
    "USERS",
    "WELL_KNOWN_PASSWORDS",
    "ProvisionError",
    "check_passwords",
    "connect",
    "ensure_pkcs8",
    "import_kibana_objects",
    "load_roles",
    "pkcs1_to_pkcs8",
    "provision",
    "put_security",
    "run_hvdlog_setup",
]

ROLES_DIR: Final = Path(__file__).resolve().parent / "roles"

#: Every password the stack needs, from .env; none may be empty or well known.
PASSWORD_VARIABLES: Final = (
    "ELASTIC_PASSWORD",
    "KIBANA_SYSTEM_PASSWORD",
    "LOGSTASH_WRITER_PASSWORD",
    "HVDLOG_READER_PASSWORD",
)

#: Our users: name -> (password variable, roles). Built-in users are only given passwords.
USERS: Final = {
    "hvdlog_logstash": ("LOGSTASH_WRITER_PASSWORD", ["hvdlog_logstash_writer"]),
    "hvdlog_reader": ("HVDLOG_READER_PASSWORD", ["hvdlog_reader"]),
}

#: Defaults that tutorials and images ship with, and other guessable values.
WELL_KNOWN_PASSWORDS: Final = frozenset(
    {
        "changeme", "change_me", "changeit", "elastic", "elasticsearch", "kibana", "kibana_system",
        "logstash", "logstash_internal", "password", "passw0rd", "secret", "admin", "root",
        "123456", "12345678", "123456789", "qwerty", "letmein", "hvdlog", "horovod", "test",
    }
)

MIN_PASSWORD_LENGTH: Final = 12

_PKCS1_PEM: Final = re.compile(r"-----BEGIN RSA PRIVATE KEY-----\s*(.+?)\s*-----END RSA PRIVATE KEY-----", re.S)
# AlgorithmIdentifier { rsaEncryption (1.2.840.113549.1.1.1), NULL } in DER.
_RSA_ALGORITHM: Final = bytes.fromhex("300d06092a864886f70d0101010500")


class ProvisionError(RuntimeError):
    """A step failed; the message is the one sentence the operator reads."""


def check_passwords(env: Mapping[str, str]) -> list[str]:
    """Every reason the passwords in ``env`` are not acceptable (empty list when they are)."""
    problems = []
    for name in PASSWORD_VARIABLES:
        value = env.get(name, "")
        if not value.strip():
            problems.append(f"{name} is empty: set it in .env")
        elif value.strip().lower() in WELL_KNOWN_PASSWORDS:
            problems.append(f"{name} is a well-known password ({value!r}): choose another in .env")
        elif len(value) < MIN_PASSWORD_LENGTH:
            problems.append(f"{name} is shorter than {MIN_PASSWORD_LENGTH} characters")
    return problems


def _der_length(length: int) -> bytes:
    """A DER length octet string (short form below 128, long form above)."""
    if length < 0x80:
        return bytes([length])
    body = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _der(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + _der_length(len(body)) + body


def pkcs1_to_pkcs8(pem: str) -> str:
    """Wrap a PEM PKCS#1 RSA key (certutil's output) into PKCS#8, as the beats input wants.

    PKCS#8 ``PrivateKeyInfo`` is ``SEQUENCE { 0, rsaEncryption, OCTET STRING(pkcs1) }``: a
    lossless re-wrapping, so no crypto library is needed in the setup container.
    """
    match = _PKCS1_PEM.search(pem)
    if not match:
        raise ProvisionError("the Logstash key is not a PEM `RSA PRIVATE KEY`: re-create it with setup/certs.sh")
    pkcs1 = base64.b64decode("".join(match.group(1).split()))
    info = _der(0x30, _der(0x02, b"\x00") + _RSA_ALGORITHM + _der(0x04, pkcs1))
    b64 = base64.b64encode(info).decode()
    lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n"


def ensure_pkcs8(certs: Path) -> None:
    """Write ``logstash/logstash.pkcs8.key`` beside certutil's key, once."""
    source, target = certs / "logstash" / "logstash.key", certs / "logstash" / "logstash.pkcs8.key"
    if target.exists():
        return
    if not source.exists():
        raise ProvisionError(f"{source} is missing: the `certs` service must run first")
    target.write_text(pkcs1_to_pkcs8(source.read_text()))
    target.chmod(0o640)
    # Same owner as certutil's key (uid 1000, the Logstash user), so Logstash can read it.
    owner = source.stat()
    try:
        os.chown(target, owner.st_uid, owner.st_gid)
    except PermissionError:
        pass  # not root: the file is already ours


def load_roles(directory: Path = ROLES_DIR) -> dict[str, dict]:
    """Role name (file stem) -> role body, from ``setup/roles/*.json``."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def _ssl_context(ca_file: str) -> ssl.SSLContext:
    if not Path(ca_file).exists():
        raise ProvisionError(f"the CA file {ca_file} does not exist: check ELASTICSEARCH_CA")
    return ssl.create_default_context(cafile=ca_file)


def _request(method: str, url: str, context: ssl.SSLContext, password: str, body: object = None) -> dict:
    """One JSON request as ``elastic``; errors become one sentence."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    token = base64.b64encode(f"elastic:{password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:300]
        if error.code == 401:
            raise ProvisionError(
                "Elasticsearch refused the elastic user (401): ELASTIC_PASSWORD only applies on the first start "
                "of an empty data volume; see docs/deploy.md, Troubleshooting"
            ) from error
        raise ProvisionError(f"{method} {url} failed with HTTP {error.code}: {detail}") from error


def wait_for_elasticsearch(url: str, context: ssl.SSLContext, password: str, timeout: float) -> None:
    """Poll ``_security/_authenticate`` until it answers, or say why it never did."""
    deadline, reason = time.monotonic() + timeout, "no answer yet"
    while time.monotonic() < deadline:
        try:
            _request("GET", f"{url}/_security/_authenticate", context, password)
            return
        except urllib.error.URLError as error:
            reason = str(error.reason)
        except (ConnectionError, TimeoutError) as error:
            reason = str(error)
        time.sleep(3)
    raise ProvisionError(f"Elasticsearch at {url} did not answer within {timeout:.0f} s ({reason}): is it running and healthy?")


def put_security(url: str, context: ssl.SSLContext, env: Mapping[str, str]) -> None:
    """Roles from setup/roles, our users, and the kibana_system password (all create-or-update)."""
    password = env["ELASTIC_PASSWORD"]
    for name, body in load_roles().items():
        _request("PUT", f"{url}/_security/role/{name}", context, password, body)
        print(f"==> role {name}", file=sys.stderr)
    for user, (variable, roles) in USERS.items():
        _request("PUT", f"{url}/_security/user/{user}", context, password, {"password": env[variable], "roles": roles})
        print(f"==> user {user} ({', '.join(roles)})", file=sys.stderr)
    _request("POST", f"{url}/_security/user/kibana_system/_password", context, password, {"password": env["KIBANA_SYSTEM_PASSWORD"]})
    print("==> password of kibana_system", file=sys.stderr)


def run_hvdlog_setup(url: str, env: Mapping[str, str]) -> None:
    """`hvdlog setup` as elastic: templates, ILM, data streams and (with KIBANA_URL) Kibana objects."""
    command = [
        "hvdlog", "setup", "--es", url,
        "--namespace", env.get("HVDLOG_NAMESPACE", "default"),
        "--replicas", env.get("HVDLOG_REPLICAS", "0"),
        "--retention-days", env.get("HVDLOG_RETENTION_DAYS", "14"),
    ]
    # Credentials travel in the environment, never on the command line (ps shows it).
    child_env = {
        **env,
        "HVDLOG_ES_USERNAME": "elastic",
        "HVDLOG_ES_PASSWORD": env["ELASTIC_PASSWORD"],
        "HVDLOG_ES_CA": env.get("ELASTICSEARCH_CA", "/certs/ca/ca.crt"),
    }
    if kibana := env.get("KIBANA_URL"):
        command += ["--kibana", kibana]
        # Kibana's certificate is always ours, while an external Elasticsearch has its own CA.
        child_env["HVDLOG_KIBANA_CA"] = env.get("KIBANA_CA", "/certs/ca/ca.crt")
    print(f"==> {' '.join(command)}", file=sys.stderr)
    if subprocess.run(command, env=child_env, check=False).returncode != 0:
        raise ProvisionError("`hvdlog setup` failed (its message is above): templates or Kibana objects are missing")


def connect(env: Mapping[str, str]) -> tuple[str, ssl.SSLContext]:
    """The Elasticsearch URL and TLS context from the environment, once it answers as elastic."""
    url = env.get("ELASTICSEARCH_HOSTS", "https://elasticsearch:9200").split(",")[0].strip().rstrip("/")
    context = _ssl_context(env.get("ELASTICSEARCH_CA", "/certs/ca/ca.crt"))
    wait_for_elasticsearch(url, context, env["ELASTIC_PASSWORD"], float(env.get("SETUP_WAIT_SECONDS", "300")))
    return url, context


def provision(env: Mapping[str, str]) -> None:
    """All the steps, in order; raises ProvisionError with the first thing to fix."""
    problems = check_passwords(env)
    if problems:
        raise ProvisionError("refusing to set up the stack:\n  " + "\n  ".join(problems))
    if certs := env.get("CERTS_DIR"):
        ensure_pkcs8(Path(certs))
    url, context = connect(env)
    put_security(url, context, env)
    run_hvdlog_setup(url, env)


def import_kibana_objects(env: Mapping[str, str]) -> None:
    """The `kibana-objects` service: `hvdlog setup` with KIBANA_URL, once Kibana is healthy."""
    problems = check_passwords(env)
    if problems:
        raise ProvisionError("refusing to set up the stack:\n  " + "\n  ".join(problems))
    if not env.get("KIBANA_URL"):
        raise ProvisionError("KIBANA_URL is empty: nothing to import the Kibana objects into")
    url, _ = connect(env)
    run_hvdlog_setup(url, env)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the setup containers; exit 2 with one sentence on failure."""
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["--kibana-objects"]:
            import_kibana_objects(os.environ)
        elif not args:
            provision({key: value for key, value in os.environ.items() if key != "KIBANA_URL"})
        else:
            print("usage: provision.py [--kibana-objects]", file=sys.stderr)
            return 2
    except ProvisionError as error:
        print(f"xx {error}", file=sys.stderr)
        return 2
    print("==> the stack is set up", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

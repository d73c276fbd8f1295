"""A real Elasticsearch with security and HTTPS on, as elk-compose.yml runs it.

Why: roles, users and TLS are what the setup service provisions; only a secured node can
say whether the role JSON is valid and whether the roles really are least-privilege.
Certificates come from setup/certs.sh (elasticsearch-certutil); the ``elastic`` password is
bootstrapped through the keystore, as the Docker image does with ELASTIC_PASSWORD.

Deviation: the integ-test distribution lacks the analysis-common module that the
``.security`` index mapping needs, so the native realm cannot store roles or users here
(``PUT _security/role`` fails with "Unknown filter type [pattern_capture]"). The same role
bodies are therefore loaded as file-realm roles (``roles.yml``) and the users written to the
file realm's ``users`` file: the privileges they grant are enforced by the same code. File
roles cannot hold application (Kibana) privileges, so those are left out here.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import yaml
from support.elasticsearch import ElasticsearchServer

__all__ = ["SecuredElasticsearchServer"]


def _pbkdf2(password: str, cost: int = 10000) -> str:
    """A password hash Elasticsearch's file realm verifies."""
    salt = os.urandom(32)
    key = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, cost, dklen=32)
    return f"{{PBKDF2}}{cost}${base64.b64encode(salt).decode()}${base64.b64encode(key).decode()}"


class SecuredElasticsearchServer(ElasticsearchServer):
    """Single node, security on, HTTP and transport TLS with the stack's certificates."""

    def __init__(
        self,
        certs: Path,
        password: str,
        roles: dict[str, dict] | None = None,
        users: dict[str, tuple[str, list[str]]] | None = None,
        es_home: Path | None = None,
        heap: str = "512m",
    ) -> None:
        super().__init__(es_home, heap)
        self.certs = certs
        self.password = password
        self.roles = roles or {}
        self.users = users or {}

    @property
    def url(self) -> str:
        """HTTPS on localhost: the name the elasticsearch certificate carries."""
        return f"https://localhost:{self.port}"

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        tls = {
            "key": "certs/elasticsearch/elasticsearch.key",
            "certificate": "certs/elasticsearch/elasticsearch.crt",
            "certificate_authorities": "certs/ca/ca.crt",
        }
        settings["xpack.security.enabled"] = "true"
        for layer in ("http", "transport"):
            settings[f"xpack.security.{layer}.ssl.enabled"] = "true"
            settings.update({f"xpack.security.{layer}.ssl.{key}": value for key, value in tls.items()})
        settings["xpack.security.transport.ssl.verification_mode"] = "certificate"
        return settings

    def _prepare(self, home: Path, conf: Path, env: dict[str, str]) -> None:
        """Copy the certificates into the config folder and bootstrap ``elastic``'s password."""
        shutil.copytree(self.certs, conf / "certs", dirs_exist_ok=True)
        tool = str(home / "bin" / "elasticsearch-keystore")
        if not (conf / "elasticsearch.keystore").exists():
            subprocess.run([tool, "create"], env=env, check=True, capture_output=True, timeout=120)
        subprocess.run(
            [tool, "add", "-x", "-f", "bootstrap.password"], env=env, input=self.password.encode(), check=True, capture_output=True, timeout=120
        )
        if self.roles:
            file_roles = {name: {k: v for k, v in role.items() if k != "applications"} for name, role in self.roles.items()}
            # Block style: FileRolesStore splits the file into roles at lines that start in column 0.
            (conf / "roles.yml").write_text(yaml.safe_dump(file_roles, default_flow_style=False))
        if self.users:
            # The file realm's `users` / `users_roles`, as `elasticsearch-users useradd` writes
            # them, hashed with PBKDF2 (ES's Hasher: {PBKDF2}<cost>$<salt>$<key>, HMAC-SHA512,
            # 256-bit key): no JVM launch per user.
            (conf / "users").write_text("".join(f"{user}:{_pbkdf2(password)}\n" for user, (password, _) in self.users.items()))
            members: dict[str, list[str]] = {}
            for user, (_, roles) in self.users.items():
                for role in roles:
                    members.setdefault(role, []).append(user)
            (conf / "users_roles").write_text("".join(f"{role}:{','.join(users)}\n" for role, users in members.items()))

    def _urlopen(self, url: str):
        context = ssl.create_default_context(cafile=str(self.certs / "ca" / "ca.crt"))
        request = urllib.request.Request(url)  # noqa: S310 - an https URL of the loopback server this harness started
        request.add_header("Authorization", "Basic " + base64.b64encode(f"elastic:{self.password}".encode()).decode())
        return urllib.request.urlopen(request, timeout=5, context=context)  # noqa: S310 - see above: our own https URL

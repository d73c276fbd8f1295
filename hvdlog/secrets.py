"""Keep secrets out of the logs: values of secret-looking environment variables.

``horovodrun --verbose`` and crash dumps print environments; a token in a log line
would be shipped, indexed and shown in Kibana. We collect the values once (at
configure time) and replace them, raw and JSON-escaped, in every line we write.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import orjson

__all__ = ["REDACTED", "SECRET_NAME", "Redactor", "secret_values"]

REDACTED = b"[REDACTED]"

#: Names that look secret (matched case-insensitively anywhere in the name).
SECRET_NAME = re.compile(r"TOKEN|KEY|PASSWORD|PASSWD|PASS\b|SECRET|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)

# Short or ubiquitous values would redact half of every line ("1", "true").
_MIN_LENGTH = 6
_HARMLESS = {"true", "false", "none", "null", "/bin/bash", "default"}


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables worth redacting, longest first."""
    env = os.environ if env is None else env
    values = {
        value
        for name, value in env.items()
        if SECRET_NAME.search(name) and len(value) >= _MIN_LENGTH and value.lower() not in _HARMLESS
    }
    return sorted(values, key=len, reverse=True)


class Redactor:
    """Replaces every secret (plain and as it appears inside a JSON string) in bytes."""

    __slots__ = ("longest", "needles")

    def __init__(self, secrets: list[str]) -> None:
        needles: set[bytes] = set()
        for secret in secrets:
            raw = secret.encode()
            needles.add(raw)
            needles.add(orjson.dumps(secret)[1:-1])
        self.needles = sorted(needles, key=len, reverse=True)
        self.longest = max((len(n) for n in self.needles), default=0)

    def __bool__(self) -> bool:
        return bool(self.needles)

    def __call__(self, data: bytes) -> bytes:
        """``data`` with every secret replaced by ``[REDACTED]``."""
        for needle in self.needles:
            if needle in data:
                data = data.replace(needle, REDACTED)
        return data

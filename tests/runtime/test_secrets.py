"""hvdlog.runtime.secrets: which variables are secrets, every spelling of a value, and what may be held back."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote

import pytest

from hvdlog.runtime.secrets import Redactor, secret_values

SECRET = "tok-3xAmPle/Value+42"  # noqa: S105 - a made-up secret the tests must see redacted


def test_names_and_values() -> None:
    """Locators and kinds are not secrets; short values and common words never are."""
    env = {
        "HF_TOKEN": SECRET, "SSH_AUTH_SOCK": "/tmp/ssh-abcdefgh/agent.1", "KEY_PATH": "/etc/keys/private.pem",
        "GOOGLE_CREDENTIALS_FILE": "/etc/gcp/creds.json", "AUTH_TYPE": "kerberos5x", "SSL_KEY_DIR": "/etc/ssl/keysdir",
        "DB_PASSWORD": "short", "NOTE_SECRET": "message", "API_KEY": "Localhost",
    }
    assert secret_values(env) == [SECRET]


@pytest.mark.parametrize("prefix", ["", "a:", "ab:", "abc:", "user:"])
def test_base64_at_every_alignment(prefix: str) -> None:
    """Base64 of the secret, alone or after any prefix (Basic auth ``user:secret``), loses the secret."""
    redact = Redactor([SECRET])
    blob = base64.b64encode(f"{prefix}{SECRET}".encode())
    out = redact(b"Authorization: Basic " + blob)
    assert b"[REDACTED]" in out and blob not in out


def test_url_and_json_forms() -> None:
    """URL-encoded (upper and lower hex) and JSON-escaped forms are redacted too."""
    redact = Redactor([SECRET, 'quote"d\\value'])
    assert redact(quote(SECRET, safe="").encode()) == b"[REDACTED]"
    assert redact(re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(SECRET, safe="")).encode()) == b"[REDACTED]"
    assert redact(json.dumps('quote"d\\value').encode()) == b'"[REDACTED]"'


def test_json_line_redacts_keys_too() -> None:
    """A secret used as a JSON key is redacted like a value (issue #23; keys were kept); field
    names stay, and two keys redacted alike are both kept."""
    redact = Redactor([SECRET])
    event = {SECRET: 1, "message": f"x {SECRET} y", "extra": {"list": [SECRET], f"per-{SECRET}": 2, "per-[REDACTED]": 3}}
    line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    assert json.loads(redact.json_line(line)) == {
        "[REDACTED]": 1, "message": "x [REDACTED] y", "extra": {"list": ["[REDACTED]"], "per-[REDACTED]": 2, "per-[REDACTED]#": 3},
    }


def test_holdback_is_only_a_possible_secret_start() -> None:
    """Only a tail that could still become a secret is held back: not a fixed window."""
    redact = Redactor([SECRET])
    assert redact.holdback(b"hello world\n") == 0
    assert redact.holdback(b"token=" + SECRET[:5].encode()) == 5
    assert redact.holdback(b"tok") == 3 and redact.holdback(b"tox") == 0


@pytest.mark.parametrize("others", [[], ["other-secret-1", "an0ther/secret+2", "third:secret=3"]], ids=["direct", "prefiltered"])
@pytest.mark.parametrize("value", ["Basic {b64}", "{b64}", "x={url}&y=1"])
def test_json_line_finds_encoded_forms_of_a_short_secret(value: str, others: list[str]) -> None:
    """The hot-path detection never hides an encoded spelling, even of the shortest secret (8
    characters): with a few secrets every needle is searched, with more a run filter goes first."""
    secret = "p@ss/w0rd"[:8]
    redact = Redactor([secret, *others])
    assert (redact._encoded is None) == (not others)  # both detection modes are exercised
    text = value.format(b64=base64.b64encode(f"u:{secret}".encode()).decode() if "Basic" in value else base64.b64encode(secret.encode()).decode(),
                        url=quote(secret, safe=""))
    line = (json.dumps({"message": "m", "extra": {"v": text}}, separators=(",", ":")) + "\n").encode()
    assert "[REDACTED]" in json.loads(redact.json_line(line))["extra"]["v"]


def test_quick_no_never_hides_a_secret() -> None:
    """The redactor's quick "no" (no long enough run of the spellings' characters) agrees with
    searching every spelling, on lines with and without secrets in every spelling."""
    import random

    secrets = ["s3cr3t-bench-token-value", "p@ss:w0rd/with+signs", "ключ-секрет-42x"]
    redactor = Redactor(secrets)
    assert redactor.quick_no is not None
    rng = random.Random(7)
    spellings = [form for secret in secrets for form in (secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode(),
                                                             base64.b64encode(f"user:{secret}".encode()).decode())]
    alphabet = "abcXYZ019 -_/+=:@.%\"{}," + "ключ"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        if rng.random() < 0.4:
            where = rng.randint(0, len(text))
            text = text[:where] + rng.choice(spellings) + text[where:]
        line = text.encode()
        expected = any(needle in line for needle in redactor.needles)
        assert redactor.holds_secret(line) == expected, line

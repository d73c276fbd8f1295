"""Keep secrets out of the logs: values of secret-looking environment variables.

``horovodrun --verbose`` and crash dumps print environments; a token in a log line
would be shipped, indexed and shown in Kibana. We collect the values once (at
configure time, and in the capture process from its own environment) and replace
them — raw, JSON-escaped, URL-encoded and base64 (alone or inside a Basic-auth
``user:secret`` blob) — in every line we write.

Stdlib only, on purpose: the capture process (:mod:`hvdlog.runtime.tee`) loads this file by
path without importing the training-side package.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "SECRET_NAME", "Redactor", "secret_values"]

REDACTED = b"[REDACTED]"
_REDACTED_STR = REDACTED.decode()

#: Names that look secret (matched case-insensitively anywhere in the name)...
SECRET_NAME = re.compile(r"TOKEN|KEY|PASSWORD|PASSWD|PASS\b|SECRET|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE)
#: ...unless the name says the value is a locator or a kind, not the secret itself
#: (``SSH_AUTH_SOCK``, ``GOOGLE_APPLICATION_CREDENTIALS_FILE``, ``KEY_PATH``, ``AUTH_TYPE``).
NOT_SECRET_NAME = re.compile(r"_(PATH|FILE|SOCK|TYPE|DIR)$", re.IGNORECASE)

# Short or ubiquitous values would redact half of every line ("1", "true", "message").
MIN_LENGTH = 8
COMMON_WORDS = frozenset(
    [
        "true", "false", "none", "null", "default", "message", "password", "username", "localhost", "training",
        "horovod", "enabled", "disabled", "unknown", "undefined", "required", "optional", "/bin/bash", "/bin/sh", "changeme",
    ]
)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables worth redacting, longest first."""
    env = os.environ if env is None else env
    values = {
        value
        for name, value in env.items()
        if SECRET_NAME.search(name)
        and not NOT_SECRET_NAME.search(name)
        and len(value) >= MIN_LENGTH
        and value.strip().lower() not in COMMON_WORDS
    }
    return sorted(values, key=len, reverse=True)


_HEX_ESCAPE = re.compile(r"%[0-9A-F]{2}")
# Where a URL-encoded or base64 spelling can be: a '%' escape, or 10+ base64 characters in a
# row (the base64 of an 8+ byte secret, alone or in a Basic blob, is at least 11). Our JSON
# lines rarely have such a run ("@timestamp" has 9), so most skip the encoded search.
_BASE64_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_RUN_TABLE = bytes(0x61 if byte in _BASE64_CHARS else 0x20 for byte in range(256))  # base64 -> 'a', else ' '
_RUN = b"a" * 10
# Up to this many needles (about two secrets' spellings) are each searched for directly: a
# ``bytes`` search with a long needle skips ahead fast, cheaper than the run filter above.
_DIRECT_NEEDLES = 12


def _base64_forms(secret: bytes) -> set[bytes]:
    """The secret's base64 text at each alignment (0, 1, 2 bytes of unknown prefix, e.g.
    ``user:`` in Basic auth): only the characters that depend on the secret alone."""
    forms = {base64.b64encode(secret), base64.b64encode(secret).rstrip(b"=")}
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        padded = b"\0" * offset + secret
        whole = padded[: len(padded) // 3 * 3]  # the last partial group depends on what follows
        core = base64.b64encode(whole)[skip:]
        if len(core) >= 6:
            forms.add(core)
    return forms


def _forms(secret: str) -> set[str]:
    """Every spelling of ``secret`` we look for in text."""
    raw = secret.encode("utf-8", "surrogateescape")
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe="")}
    forms |= {_HEX_ESCAPE.sub(lambda match: match.group().lower(), form) for form in list(forms)}  # %2f as well as %2F
    forms |= {form.decode("ascii") for form in _base64_forms(raw)}
    return {form for form in forms if form}


class Redactor:
    """Replaces every spelling of every secret by ``[REDACTED]``.

    ``needles`` are byte strings for raw text (the capture process): each form plain and as it
    appears inside a JSON string. :meth:`json_line` redacts the strings of a JSON line, keys
    included (secrets are never field names: they are 8+ characters and not common words).
    """

    __slots__ = ("_encoded", "_plain", "_text", "longest", "needles", "quick_no", "text_forms")

    def __init__(self, secrets: list[str]) -> None:
        text_forms: set[str] = set()
        for secret in secrets:
            text_forms |= _forms(secret)
        needles: set[bytes] = set()
        for form in text_forms:
            needles.add(form.encode("utf-8", "surrogateescape"))
            needles.add(json.dumps(form, ensure_ascii=False)[1:-1].encode("utf-8", "surrogateescape"))
        self.text_forms = sorted(text_forms, key=len, reverse=True)
        self.needles = sorted(needles, key=len, reverse=True)
        self.longest = max((len(n) for n in self.needles), default=0)
        # Detection on the hot path (every JSON event): only needles that contain no other (a
        # line holding a longer spelling holds the shorter one too); the plain spellings always,
        # the URL/base64 ones only when the line has a run they could be part of.
        minimal = [n for n in self.needles if not any(other != n and other in n for other in self.needles)]
        plain = {
            n
            for secret in secrets
            for n in (secret.encode("utf-8", "surrogateescape"), json.dumps(secret, ensure_ascii=False)[1:-1].encode("utf-8", "surrogateescape"))
        }
        encoded = [n for n in minimal if n not in plain]
        # A quick "no" before searching for several spellings: each is a run of characters
        # from its own alphabet, so a line without a run that long of those characters holds none.
        # (translate + find over a 100-byte line costs what about two substring searches do.)
        #: (translation table, run): no secret in ``line`` when ``line.translate(table).find(run) < 0``.
        self.quick_no: tuple[bytes, bytes] | None = None
        if len(minimal) > 2:
            alphabet = set(b"".join(minimal))
            self.quick_no = (bytes(0x61 if byte in alphabet else 0x20 for byte in range(256)), b"a" * min(map(len, minimal)))
        self._text: tuple[str, ...] | None = None
        if len(minimal) <= _DIRECT_NEEDLES:  # a few secrets: every needle, one C-level loop, no filter
            self._plain, self._encoded = tuple(minimal), None
            with contextlib.suppress(UnicodeDecodeError):  # str search is cheaper than bytes search; exact for UTF-8 needles in UTF-8 text
                self._text = tuple(n.decode("utf-8") for n in minimal)
        else:
            self._plain = tuple(n for n in minimal if n in plain)
            self._encoded = re.compile(b"|".join(re.escape(n) for n in encoded)) if encoded else None

    def __bool__(self) -> bool:
        return bool(self.needles)

    def __call__(self, data: bytes) -> bytes:
        """``data`` with every secret replaced by ``[REDACTED]``."""
        for needle in self.needles:
            if needle in data:
                data = data.replace(needle, REDACTED)
        return data

    def holdback(self, data: bytes) -> int:
        """How many trailing bytes of ``data`` could still be the start of a secret (hold them
        until more bytes or a newline tell): the longest suffix that is a needle's prefix."""
        hold = 0
        size = len(data)
        for needle in self.needles:
            if len(needle) - 1 <= hold:
                break  # needles are longest first: no shorter one can beat ``hold``
            first = needle[:1]
            index = data.find(first, max(0, size - len(needle) + 1))
            while index != -1:
                if size - index > hold and needle.startswith(data[index:]):
                    hold = size - index
                    break
                index = data.find(first, index + 1)
        return hold

    def json_line(self, line: bytes) -> bytes:
        """Redact the strings, values and keys, of one rendered JSON line."""
        if not self.holds_secret(line):
            return line
        document = json.loads(line)
        return (json.dumps(self._values(document), ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogateescape")

    def holds_secret(self, line: bytes) -> bool:
        """Whether some spelling of a secret is in ``line`` (cheap: plain needles first).

        ``bytes.__contains__`` first tries its argument as an integer and pays for the
        TypeError, so the searches here are ``str.__contains__`` and ``bytes.find``.
        """
        if self.quick_no is not None and line.translate(self.quick_no[0]).find(self.quick_no[1]) < 0:
            return False
        if self._text is not None:
            try:
                return any(map(line.decode("utf-8").__contains__, self._text))
            except UnicodeDecodeError:  # not UTF-8 (raw text): search the bytes
                pass
        if max(map(line.find, self._plain), default=-1) >= 0:
            return True
        encoded = self._encoded
        return encoded is not None and (line.find(b"%") >= 0 or line.translate(_RUN_TABLE).find(_RUN) >= 0) and encoded.search(line) is not None

    def _values(self, value: Any) -> Any:
        if isinstance(value, str):
            for form in self.text_forms:
                if form in value:
                    value = value.replace(form, _REDACTED_STR)
            return value
        if isinstance(value, dict):
            redacted: dict[str, Any] = {}
            for key, item in value.items():
                name = self._values(key)  # a secret used as a key (``{token: count}``) is a leak too
                while name in redacted:  # two keys redacted alike: both kept
                    name += "#"
                redacted[name] = self._values(item)
            return redacted
        if isinstance(value, list):
            return [self._values(item) for item in value]
        return value

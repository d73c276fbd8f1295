"""Message templates: the one canonical form of a log message, used by ``grep``, fingerprints, ``history`` and ``diff``.

Two lines that differ only in their numbers, addresses, paths or host names are the same
event: ``Timed out waiting 30000ms`` and ``... 31000ms`` share the template
``Timed out waiting <N>ms``. One regular expression replaces, left to right, times
(``<TIME>``), URLs and paths (``<PATH>``), IP addresses (``<IP>``), host names with a domain
(``<HOST>``), hex numbers and long hex ids (``<HEX>``) and every other number (``<N>``: ranks,
tensor indices, ports, sizes). Words and quoted strings stay: ``KeyError: 'lr_decay'`` and
``KeyError: 'batch'`` are different bugs.

A fixed rule rather than a template miner (drain3): the template of a line depends only on
the line, never on what was seen before, so two jobs, two hosts, the files and Elasticsearch
all give a message the same template, and a fingerprint stays stable across days. The
measurement behind the choice is in docs/across-jobs.md.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

__all__ = ["MAX_CHARS", "Template", "canonical", "fingerprint_id", "template"]

#: Longest text canonicalised: a message beyond it is cut (a template is an identity, not a copy).
MAX_CHARS: Final = 2000

_PLACEHOLDERS: Final = (
    ("TIME", r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"),
    ("PATH", r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+|(?<![\w.<>])(?:~|\.{1,2})?(?:/[\w.@+=-]+){2,}/?|(?<![\w.<>])/[\w.@+-]*[A-Za-z][\w.@+-]*\.\w+\b"),
    ("IP", r"\b\d{1,3}(?:\.\d{1,3}){3}\b|(?<![\w:])(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}\b"),
    ("HOST", r"\b[A-Za-z][\w-]*(?:\.[A-Za-z0-9][\w-]*)*\.(?:com|org|net|edu|gov|io|local|internal|lan|cluster|svc|cn|de|uk|jp|fr)\b"),
    ("HEX", r"\b0[xX][0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"),
    ("N", r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\d+(?:\.\d+)?"),
)
#: Plain words and separators, consumed whole so the placeholders are tried only where they can
#: start (a tenfold speed-up on real lines): letters not followed by what makes them a host, a
#: path, a URL or a word with digits; runs of spaces and punctuation that start nothing.
_SKIP: Final = r"(?P<SKIP>[A-Za-z_]++(?![\w.:/-])|[ ,;!?()\[\]'\"=<>|#*%&{}]++)"
_PATTERN: Final = re.compile(_SKIP + "|" + "|".join(f"(?P<{name}>{regex})" for name, regex in _PLACEHOLDERS))
_SPACE: Final = re.compile(r"\s+")


@dataclass(frozen=True)
class Template:
    """A message's template and the values its placeholders stood for, in order."""

    text: str
    #: (placeholder, original text) per placeholder, left to right.
    values: tuple[tuple[str, str], ...]


def canonical(message: object, hosts: frozenset[str] = frozenset()) -> Template:
    """The template of ``message`` with the values it replaced; ``hosts``: names (the job's
    ``host.name`` values) that become ``<HOST>`` wherever they appear as words."""
    text = _SPACE.sub(" ", str(message if message is not None else "")[:MAX_CHARS]).strip()
    values: list[tuple[str, str]] = []

    def replace(match: re.Match[str]) -> str:
        if match.lastgroup == "SKIP":
            return match.group(0)
        kind = "HOST" if match.lastgroup == "KNOWN" else match.lastgroup or "N"
        values.append((kind, match.group(0)))
        return f"<{kind}>"

    return Template(_pattern(hosts).sub(replace, text), tuple(values))


@lru_cache(maxsize=64)
def _pattern(hosts: frozenset[str]) -> re.Pattern[str]:
    """The pattern, with the known host names tried first (``node3`` stays ``node<N>`` otherwise)."""
    names = [re.escape(host) for host in sorted(hosts, key=len, reverse=True) if host]
    if not names:
        return _PATTERN
    return re.compile(rf"(?P<KNOWN>(?<![\w.-])(?:{'|'.join(names)})(?![\w-]))|" + _PATTERN.pattern)


def template(message: object) -> str:
    """The template text alone."""
    return canonical(message).text


def fingerprint_id(*parts: str | None) -> str:
    """A short stable id for a tuple of canonical parts (the same in every process and on every day)."""
    return hashlib.blake2b("\n".join(part or "" for part in parts).encode("utf-8", "backslashreplace"), digest_size=6).hexdigest()

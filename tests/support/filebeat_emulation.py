"""What Filebeat does to a file, re-done in Python so tests can check shipper/filebeat.yml.

Why: a real Filebeat build is slow and a 7.17 one at best (see scripts/install-filebeat.sh);
the parts of filebeat.yml that decide which events exist — `${VAR:default}` expansion, the
path globs, the dissect tokenizer and the multiline parsers — are small, documented
algorithms. They follow libbeat 7.17/8.x source: ``libbeat/reader/multiline/pattern.go``
and ``message_buffer.go`` (pattern type, negate, match after/before, max_lines; a line is
tested without its newline; joined with ``\\n``), ``libbeat/processors/dissect`` (delimiters
found left to right, the last key takes the rest), go-ucfg's ``${VAR}``,
``${VAR:default}`` and ``${VAR:?error}``. The patterns stay in the subset where Go's RE2 and
Python's ``re`` agree (no look-around, no back-references, ``$`` only at the very end).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Multiline", "dissect", "expand", "join_lines", "multiline_parsers"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::(\?)?([^}]*))?\}")


def expand(value: str, env: Mapping[str, str]) -> str:
    """go-ucfg variable expansion: ``${VAR}``, ``${VAR:default}``, ``${VAR:?message}``."""

    def substitute(match: re.Match[str]) -> str:
        name, required, rest = match.group(1), match.group(2), match.group(3)
        if name in env:
            return env[name]
        if required:
            raise KeyError(f"{name}: {rest}")
        if rest is None:
            raise KeyError(f"{name} is not set and has no default")
        return rest

    return _VARIABLE.sub(substitute, value)


def dissect(tokenizer: str, text: str) -> dict[str, Any] | None:
    """The dissect processor: literal delimiters matched left to right, keys between them.

    ``%{key|integer}`` converts, ``%{?key}`` and ``%{}`` skip. None when a delimiter is
    missing (Filebeat then tags the event and changes nothing).
    """
    parts = re.split(r"(%\{[^}]*\})", tokenizer)
    result: dict[str, Any] = {}
    position = 0
    if not text.startswith(parts[0]):
        return None
    position = len(parts[0])
    keys, delimiters = parts[1::2], parts[2::2]
    for key, delimiter in zip(keys, delimiters, strict=True):  # re.split with one group: text (key text)*
        if delimiter:
            end = text.find(delimiter, position)
            if end < 0:
                return None
        else:
            end = len(text)
        value = text[position:end]
        position = end + len(delimiter)
        name, _, kind = key[2:-1].partition("|")
        if not name or name.startswith("?"):
            continue
        result[name] = int(value) if kind in ("integer", "long") else value
    if delimiters and delimiters[-1] and position != len(text):
        return None
    return result


@dataclass(frozen=True)
class Multiline:
    """One ``multiline`` parser of type ``pattern`` as configured in filebeat.yml."""

    pattern: re.Pattern[str]
    negate: bool
    match: str
    max_lines: int = 500

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Multiline:
        """From the YAML mapping under ``- multiline:`` (only the pattern type is used here)."""
        if config.get("type", "pattern") != "pattern":
            raise ValueError(f"only multiline type `pattern` is emulated, not {config['type']!r}")
        if config.get("match") not in ("after", "before"):
            raise ValueError(f"multiline match must be after or before, not {config.get('match')!r}")
        return cls(re.compile(config["pattern"]), bool(config.get("negate", False)), config["match"], int(config.get("max_lines", 500)))

    def continues(self, last: str, current: str) -> bool:
        """Whether ``current`` joins the event being built (libbeat's matcher)."""
        tested = current if self.match == "after" else last
        return bool(self.pattern.search(tested)) != self.negate

    def apply(self, messages: Iterable[str]) -> list[str]:
        """Join messages into events; lines past max_lines are dropped, as Filebeat does."""
        events: list[str] = []
        buffer: list[str] = []
        last = ""
        for message in messages:
            if buffer and self.continues(last, message):
                if len(buffer) < self.max_lines:
                    buffer.append(message)
            else:
                if buffer:
                    events.append("\n".join(buffer))
                buffer = [message]
            last = message
        if buffer:
            events.append("\n".join(buffer))
        return events


def multiline_parsers(input_config: Mapping[str, Any]) -> list[Multiline]:
    """Every multiline parser of one filestream input, in order."""
    return [Multiline.from_config(parser["multiline"]) for parser in input_config.get("parsers", []) if "multiline" in parser]


def join_lines(text: str, parsers: Sequence[Multiline]) -> list[str]:
    """A file's text as the events the input's parsers make of it."""
    messages = text.split("\n")
    if messages and messages[-1] == "":
        messages.pop()
    messages = [line[:-1] if line.endswith("\r") else line for line in messages]
    for parser in parsers:
        messages = parser.apply(messages)
    return messages


def excluded(input_config: Mapping[str, Any], event: str) -> bool:
    """Whether the input's ``exclude_lines`` leave a joined event out (they see the event whole)."""
    return any(re.search(pattern, event) for pattern in input_config.get("exclude_lines", ()))

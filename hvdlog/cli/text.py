"""Text that reaches a terminal: one line, no control sequences, no credentials.

Logged text is data from the training job; an escape sequence in it (``ESC]0;title``,
``ESC[2J``) must not retitle or clear the reader's terminal, and a password in a URL must
not be echoed in an error line. Everything the CLI prints from data or exceptions passes here.
"""

from __future__ import annotations

import re
from typing import Final

from hvdlog.elastic.connection import mask_credentials

__all__ = ["SHORT", "clip", "escape_controls", "hanging", "sentence"]

#: C0 controls except tab and newline, DEL, and C1 controls (ESC, CSI 0x9b, OSC 0x9d...).
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NEWLINES: Final = re.compile(r"\s*[\r\n]+\s*")


def _visible(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}"


def escape_controls(text: str) -> str:
    """Control characters shown as ``\\x1b``-style escapes (tabs and newlines kept)."""
    return _CONTROLS.sub(_visible, text)


def sentence(text: str, limit: int = 2000) -> str:
    """One line for stderr: newlines folded, controls escaped, URL credentials masked, length bounded."""
    line = escape_controls(_NEWLINES.sub(" ", mask_credentials(text)).strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def hanging(label: str, text: str) -> str:
    """``label`` then ``text``; a multi-line text's further lines are indented under its first
    (a launcher's verdict spans lines: ``Process name: 3`` / ``Exit code: 250``)."""
    indent = "\n" + " " * len(label)
    return label + indent.join(line.rstrip() for line in text.strip("\n").splitlines())


#: Free text in a one-line view (a status's reason, a collateral rank's message, a list of tensor
#: names) is cut at this many characters: a table row or a summary stays readable (such text
#: reached 300-900 columns on real consoles); ``--json`` and the detailed commands keep it whole.
SHORT: Final = 100


def clip(text: str, limit: int = SHORT) -> str:
    """``text`` on one line (whitespace folded), cut to ``limit`` characters with ``…``."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"

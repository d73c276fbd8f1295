"""The declared multi-line grammar and the bounds of one document (``assets/blocks.json``).

hvdlog parse (:mod:`hvdlog.parse.native`) and Logstash (logstash/pipeline/horovod_native.rb)
read the same file, and ``python -m hvdlog.elastic.generate`` writes Filebeat's multiline
patterns from it, so the three agree by construction rather than by goldens alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Final

__all__ = ["BLOCKS_FILE", "MAX_DOCUMENT_BYTES", "MAX_PIECES", "TRUNCATED_TAG", "bound", "cut_text", "load_blocks"]

#: The grammar, shipped inside the package; ``HVDLOG_BLOCKS`` points elsewhere.
BLOCKS_FILE: Final = Path(os.environ.get("HVDLOG_BLOCKS") or Path(__file__).resolve().parent / "assets" / "blocks.json")
TRUNCATED_TAG: Final = "_hvdlog_truncated"
_CUT_FIELDS: Final = ("message", "error.stack_trace", "error.message")


def load_blocks(path: Path = BLOCKS_FILE) -> dict[str, Any]:
    """The whole file, as JSON."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


_LIMITS: Final = load_blocks()["limits"]
#: A document's message (and stack trace, error message) is cut to this many bytes at a line end.
MAX_DOCUMENT_BYTES: Final[int] = int(_LIMITS["max_document_bytes"])
#: At most this many documents leave Logstash for one Filebeat event; the rest become one summary.
MAX_PIECES: Final[int] = int(_LIMITS["max_pieces"])


def cut_text(text: str, limit: int = MAX_DOCUMENT_BYTES) -> tuple[str, int, int]:
    """(the first whole lines of ``text`` within ``limit`` UTF-8 bytes -- its first ``limit``
    bytes when the first line is longer -- plus the cut mark, lines not kept whole, bytes cut);
    the same cut as horovod_native.rb's ``cut_text``."""
    data = text.encode("utf-8", "surrogateescape")
    head = data[: limit + 1].decode("utf-8", "ignore")
    stop = head.rfind("\n")
    kept = head[:stop] if stop > 0 else data[:limit].decode("utf-8", "ignore")
    rest = data[len(kept.encode("utf-8", "surrogateescape")):]
    lines = rest.count(b"\n") + (0 if rest.startswith(b"\n") else 1)
    return f"{kept}\n... [hvdlog: {lines} lines ({len(rest)} bytes) cut]", lines, len(rest)


def bound(fields: dict[str, Any], limit: int = MAX_DOCUMENT_BYTES) -> None:
    """Cut a document's long texts in place; the message's cut is counted (``hvdlog.truncated.*``)."""
    message = fields.get("message")
    if not isinstance(message, str) or len(message) * 4 <= limit:
        return  # the hot path (a character is at most 4 bytes); the other texts are parts of the message
    counted = None
    for name in _CUT_FIELDS:
        text = fields.get(name)
        if isinstance(text, str) and len(text.encode("utf-8", "surrogateescape")) > limit:
            fields[name], lines, cut = cut_text(text, limit)
            if name == "message":
                counted = (lines, cut)
    if counted is not None:
        fields["hvdlog.truncated.lines"], fields["hvdlog.truncated.bytes"] = counted
        fields["tags"] = [*fields.get("tags", []), TRUNCATED_TAG]

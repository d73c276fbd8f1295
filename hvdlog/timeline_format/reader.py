"""Read a Horovod timeline the way it is on disk: streamed, and possibly cut mid-event.

Horovod (0.28.1 ``timeline.cc``) writes a Chrome-trace JSON array from a background thread:
``[`` then objects, each followed by ``]`` that the next write overwrites with ``,``; a
newline comes only after metadata records, so one line often holds many events. A job that
dies leaves the array unterminated, often with half an object at the end. This reader never
loads the whole file and never needs the closing bracket: it decodes one object at a time,
skips what cannot be decoded, and says how much it skipped and whether the tail was cut.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

__all__ = ["ReadStats", "looks_like_timeline", "read_events"]

_CHUNK: Final = 1 << 20
#: An undecodable object longer than this, with more data after it, is corrupt, not incomplete.
_MAX_OBJECT: Final = 1 << 20
_SEPARATORS: Final = frozenset(" \t\r\n,[]")
_DECODER: Final = json.JSONDecoder()


@dataclass
class ReadStats:
    """What reading one timeline found, beyond its events."""

    events: int = 0
    #: Bytes (characters) skipped because they did not decode, tail included.
    skipped: int = 0
    #: The file ended inside an object (the job died, or Horovod is still writing).
    truncated: bool = False
    #: The closing ``]`` was missing (the writer never finished).
    unterminated: bool = True


def looks_like_timeline(path: str | Path) -> bool:
    """True when the file starts like a Chrome-trace array (Horovod's timeline), whatever its name."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    text = head.lstrip()
    return text.startswith(b"[") and text[1:].lstrip().startswith(b"{") and b'"ph"' in text


def _skip_separators(buf: str, pos: int) -> int:
    while pos < len(buf) and buf[pos] in _SEPARATORS:
        pos += 1
    return pos


def read_events(stream: IO[bytes], stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Every JSON object of the timeline array, in file order; damage is counted in ``stats``."""
    stats = stats if stats is not None else ReadStats()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buf, pos, eof = "", 0, False
    last_char = ""
    while True:
        pos = _skip_separators(buf, pos)
        if pos >= len(buf) or buf[pos] != "{":
            if pos < len(buf):  # garbage between objects: skip to the next object
                nxt = buf.find("{", pos)
                stats.skipped += (nxt if nxt >= 0 else len(buf)) - pos
                pos = nxt if nxt >= 0 else len(buf)
                continue
            if eof:
                break
            chunk = stream.read(_CHUNK)
            eof = not chunk
            text = decoder.decode(chunk, final=eof)
            if text.strip():
                last_char = text.rstrip()[-1]
            buf, pos = text, 0
            continue
        try:
            obj, end = _DECODER.raw_decode(buf, pos)
        except json.JSONDecodeError:
            if not eof and len(buf) - pos < _MAX_OBJECT:
                chunk = stream.read(_CHUNK)
                eof = not chunk
                text = decoder.decode(chunk, final=eof)
                if text.strip():
                    last_char = text.rstrip()[-1]
                buf, pos = buf[pos:] + text, 0
                continue
            # Corrupt (or, at the end, cut): resume at the next object start, if any.
            nxt = buf.find("{", pos + 1)
            stats.truncated = eof
            if nxt < 0 or (eof and "}" not in buf[pos:]):
                stats.skipped += len(buf) - pos
                pos = len(buf)
            else:
                stats.skipped += nxt - pos
                pos = nxt
            continue
        pos = end
        # A bare ``args`` object found while resynchronising has no phase: not an event.
        if isinstance(obj, dict) and "ph" in obj:
            stats.events += 1
            stats.truncated = False
            yield obj
    stats.unterminated = stats.truncated or last_char != "]"

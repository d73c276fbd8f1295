"""Where one stalled rank is stuck, as one short string that groups ranks stuck at the same place.

The watchdog's stall event holds the Horovod operation the rank waits in
(``horovod.stall.operation``), the innermost user-code frame (``log.origin.*``) and the last
frames of its Python stack (``horovod.stall.stack``). A rank in a collective is named by the
operation ("``_DistributedOptimizer.step > synchronize``"): every rank waiting there is the
same place, whatever line of the user's loop called it. A rank outside any collective is named
by the innermost frame that is not the interpreter's or hvdlog's (``__next__ (dataloader.py)``) and
the user's own line (``at data.py:88``), so a culprit in the data loader reads as such.
"""

from __future__ import annotations

import re
from typing import Any, Final

from hvdlog.documents import Document, get_field
from hvdlog.query.spec import format_ranks

__all__ = ["rank_list", "stuck_location"]

#: One ``traceback.format_list`` entry: ``  File "path", line N, in name``.
_FRAME: Final = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)', re.MULTILINE)
#: Frames that say nothing about where the rank is stuck: the interpreter's waiting and our own code.
_NOISE: Final = ("/threading.py", "/selectors.py", "/queue.py", "/hvdlog/runtime/", "/hvdlog/__init__")


def _basename(path: Any) -> str:
    return str(path).replace("\\", "/").rsplit("/", 1)[-1]


def _innermost(stack: Any, user_file: Any) -> str | None:
    """The innermost meaningful frame of a formatted stack: ``__next__ (dataloader.py)`` in a library,
    the bare function in the user's own file (None when the stack names none)."""
    if not isinstance(stack, str):
        return None
    frames = [m for m in _FRAME.finditer(stack) if not any(part in m["file"].replace("\\", "/") for part in _NOISE)]
    if not frames:
        return None
    inner = frames[-1]
    return inner["name"] if inner["file"] == user_file else f"{inner['name']} ({_basename(inner['file'])})"


def stuck_location(doc: Document) -> str:
    """The place one stall event says its rank is stuck, e.g. ``_DistributedOptimizer.step > synchronize``
    or ``__next__ at data.py:88`` (``unknown place`` when the event names none)."""
    operation = get_field(doc, "horovod.stall.operation")
    if isinstance(operation, str) and operation:
        return operation
    function, file, line = (get_field(doc, f"log.origin.{key}") for key in ("function", "file.name", "file.line"))
    where = f"{_basename(file)}:{line}" if file and isinstance(line, int) else None
    innermost = _innermost(get_field(doc, "horovod.stall.stack"), file) or (function if isinstance(function, str) else None)
    if innermost and where:
        return f"{innermost} at {where}"
    return innermost or where or "unknown place"


def rank_list(ranks: list[int], limit: int = 12) -> str:
    """``0-1022`` or ``3,9,17 and 40 more``: a rank set as ranges, bounded for one line."""
    text = format_ranks(ranks)
    parts = text.split(",")
    return text if len(parts) <= limit else f"{','.join(parts[:limit])} and {len(parts) - limit} more ranges"

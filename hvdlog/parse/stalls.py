"""Stall inspector warnings, every generation, assembled into one event per warning.

Horovod's stall inspector (rank 0 only) prints a W line (E when shutting down) followed
by header-less lines; what follows the header changed over the years:

- v0.21+ (``stall_inspector.cc``): ``Missing ranks:`` then ``<rank>[!]: [t1, t2 ...]``
  (a list read without its header and title, as a grep leaves it, is still a report when it
  names Horovod's tensors; a last entry cut after its rank keeps the rank)
  (at most 6 names, `` ...`` appended; ``!`` = past the shutdown time), and on shutdown
  ``One or more rank (marked by "!") is stalled for longer than S seconds. Will shutdown.``
- v0.17-v0.20: ``Stalled ranks:`` instead of ``Missing ranks:``.
- <= v0.16: ``Stalled ops:`` then ``<tensor> [missing ranks: 1, 2]`` entries (some indented),
  or each entry as its own W core line; older builds ``[ready ranks: ...]`` (missing = all -
  ready when the job size is known, else the ranks below the highest ready one that are not
  ready: a lower bound) after a bare ``WARNING: `` header, which may follow a progress bar's
  output on the same line or a space.
"""

from __future__ import annotations

import re
from typing import Any, Final

from hvdlog.parse.patterns import compile_pattern

__all__ = ["StallBlock", "is_continuation", "is_cut_header", "is_cut_warning", "stall_header_seconds", "stall_op_fields"]

_HEADER: Final = compile_pattern("HOROVOD_STALL_HEADER")
_RANKS_TITLE: Final = compile_pattern("HOROVOD_STALL_RANKS_TITLE").regex
_RANK: Final = compile_pattern("HOROVOD_STALL_RANK")
_CUT_RANK: Final = compile_pattern("HOROVOD_STALL_CUT_RANK")
_SHUTDOWN: Final = compile_pattern("HOROVOD_STALL_SHUTDOWN")
_OPS_TITLE: Final = compile_pattern("HOROVOD_STALL_OPS_TITLE").regex
_OPS_LINE: Final = compile_pattern("HOROVOD_STALL_OPS_LINE").regex
_OP: Final = compile_pattern("HOROVOD_STALL_OP")
_TRUNCATED: Final = " ..."


def stall_header_seconds(message: str) -> float | None:
    """The N of "... for more than N seconds." when ``message`` opens a stall warning."""
    if not message.startswith("One or more tensors"):
        return None
    fields = _HEADER.match(message)
    return None if fields is None else fields["horovod.stall.seconds"]


#: The header's words up to its number: a header a terminal wrapped is a prefix of them.
_HEADER_WORDS: Final = (
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks"
    " and are waiting for remainder of ranks for more than "
)


def is_cut_header(message: str) -> bool:
    """True for a stall header a terminal wrapped (mid-word, anywhere after "One or more"):
    the rest went to the next physical line, without the tag, so it is read on its own."""
    return len(message) >= len("One or more") and _HEADER_WORDS.startswith(message.rstrip("0123456789."))


#: The whole warning of v0.17+ (numbers as 0), whose last line a wrap may have cut anywhere.
_WARNING_WORDS: Final = (
    f"{_HEADER_WORDS}0 seconds. This may indicate that different ranks are trying to submit different tensors"
    " or that only subset of ranks is submitting tensors, which will cause deadlock."
)
_NUMBERS: Final = re.compile(r"\d+(?:\.\d+)?")


def is_cut_warning(message: str) -> bool:
    """True for a stall warning (from "One or more") that stops before its last word, as a
    terminal's wrap leaves it: :func:`is_cut_header`, or cut anywhere after the number."""
    said = _NUMBERS.sub("0", message.rstrip(" ").rstrip("0123456789."))
    return len(said) >= len("One or more") and len(said) < len(_WARNING_WORDS) - 1 and _WARNING_WORDS.startswith(said)


def is_continuation(line: str) -> bool:
    """True for the header-less lines that belong to the stall warning above them."""
    return bool(
        _RANKS_TITLE.match(line) or _RANK.regex.match(line) or _SHUTDOWN.regex.match(line)
        or _OPS_TITLE.match(line) or _OPS_LINE.match(line.lstrip(" "))  # old builds indent some entries
    )


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def stall_op_fields(text: str, size: int | None) -> dict[str, Any]:
    """Tensors and ranks from ``<tensor> [missing|ready ranks: ...]`` entries in ``text``."""
    tensors: list[str] = []
    missing: list[int] = []
    ready: list[int] = []
    for op in _OP.finditer(text):
        tensors.append(op["@metadata.hvd.stall_tensor"])
        ranks = [int(rank) for rank in op["@metadata.hvd.stall_ranks"].replace(" ", "").split(",")]
        if op["@metadata.hvd.stall_kind"] == "missing":
            missing.extend(ranks)
        else:
            ready.extend(ranks)
            # size unknown: the ranks below the highest ready one that are not ready (a lower bound)
            upto = size if size is not None else max(ranks)
            missing.extend(rank for rank in range(upto) if rank not in ranks)
    fields: dict[str, Any] = {}
    if tensors:
        fields["horovod.stall.tensors"] = _unique(tensors)
    if missing:
        fields["horovod.stall.missing_ranks"] = sorted(set(missing))
    if ready:
        fields["horovod.stall.ready_ranks"] = sorted(set(ready))
    return fields


class StallBlock:
    """The lines of one stall warning, turned into the ``horovod.stall.*`` fields."""

    __slots__ = ("lines", "seconds")

    def __init__(self, first: str, seconds: float | None) -> None:
        self.lines = [first]
        self.seconds = seconds

    def add(self, line: str) -> None:
        """Append a continuation line."""
        self.lines.append(line)

    def fields(self, size: int | None) -> dict[str, Any]:
        """Flat fields of the event (message = the whole warning, one line per line)."""
        fields: dict[str, Any] = {
            "message": "\n".join(self.lines),
            "event.action": "stall",
            "horovod.stall.source": "inspector",
            "horovod.stall.shutdown": False,
        }
        if self.seconds is not None:
            fields["horovod.stall.seconds"] = self.seconds
        tensors: list[str] = []
        missing: list[int] = []
        marked: list[int] = []
        # every line: a report whose header and title were lost begins with a rank line
        for line in self.lines:
            rank = _RANK.match(line) or _CUT_RANK.match(line)
            if rank is not None and "@metadata.hvd.stall_tensors" not in rank:  # an entry cut after its rank
                missing.append(rank["@metadata.hvd.stall_rank"])
                if "@metadata.hvd.stall_mark" in rank:
                    marked.append(rank["@metadata.hvd.stall_rank"])
            elif rank is not None:
                missing.append(rank["@metadata.hvd.stall_rank"])
                if "@metadata.hvd.stall_mark" in rank:
                    marked.append(rank["@metadata.hvd.stall_rank"])
                names = _readable_names(line, rank["@metadata.hvd.stall_tensors"])
                tensors.extend(name for name in names.split(", ") if name)
            elif _SHUTDOWN.regex.match(line):
                fields["horovod.stall.shutdown"] = True
        if missing:
            fields["horovod.stall.missing_ranks"] = sorted(set(missing))
            fields["horovod.stall.tensors"] = _unique(tensors)
            if marked:
                fields["horovod.stall.shutdown_ranks"] = sorted(set(marked))
        else:
            fields.update(stall_op_fields(fields["message"], size))
        return fields


def _readable_names(line: str, names: str) -> str:
    """The tensor names of a ``<rank>: [t1, t2 ...]`` line that can be read: without the
    ``...`` of a list cut at six names, and, on a line cut short (``1: [t1, t2, t``: a
    terminal's wrap, a truncated capture), without the last, partial name."""
    if not line.endswith("]"):
        return names.rpartition(", ")[0]
    return names.removesuffix(_TRUNCATED)

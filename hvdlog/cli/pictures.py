"""Pictures for where people look rather than read: a bar per rank, a sparkline across ranks.

On a terminal they are drawn with block characters; into a pipe (or a file) with ASCII,
so ``| grep`` and logs stay plain. Colour, when any, comes from the printer (``NO_COLOR``
is honoured there). The functions return text; the caller prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["bars", "figure_sparkline", "sparkline"]


_BLOCKS: Final = "▁▂▃▄▅▆▇█"
_ASCII: Final = ".:-=+*#%@"


def _scale(value: float, top: float, steps: int) -> int:
    if top <= 0:
        return 0
    return max(0, min(steps, round(value / top * steps)))


def sparkline(values: Mapping[int, float | None], fancy: bool) -> str:
    """One character per rank (in rank order), height = value / the largest; ``?`` where unknown."""
    ramp = _BLOCKS if fancy else _ASCII
    known = [v for v in values.values() if v is not None]
    top = max(known, default=0.0)
    return "".join("?" if values[rank] is None else ramp[_scale(values[rank] or 0.0, top, len(ramp) - 1)] for rank in sorted(values))


def bars(values: Mapping[int, float | None], fancy: bool, width: int = 30, unit: str = "") -> list[str]:
    """``rank 3 ██████████░░░░  12`` lines, bars scaled to the largest value; ``?`` when unknown."""
    full, empty = ("█", "░") if fancy else ("#", ".")
    known = [v for v in values.values() if v is not None]
    top = max(known, default=0.0)
    lines = []
    for rank in sorted(values):
        value = values[rank]
        if value is None:
            lines.append(f"rank {rank:>4} {'?' * 1:<{width}}  unknown")
            continue
        filled = _scale(value, top, width)
        lines.append(f"rank {rank:>4} {full * filled}{empty * (width - filled)}  {value:g}{unit}")
    return lines


def figure_sparkline(title: str, values: Mapping[int, float | None], fancy: bool) -> str:
    """``samples/s by rank 0-39: <sparkline>  (highest 812.4)``, as report and stragglers show it."""
    from hvdlog.query.spec import format_ranks

    highest = max((value for value in values.values() if value is not None), default=None)
    return f"{title} by rank {format_ranks(list(values))}: {sparkline(values, fancy)}  (highest {'?' if highest is None else f'{highest:g}'})"

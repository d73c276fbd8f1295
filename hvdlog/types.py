"""The vocabulary every side shares, typed once (as structlog's ``typing`` module does).

Stdlib only: the training side, the parser and the CLI all import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

__all__ = ["Document", "Emit", "Warn"]

#: A document as the pipeline stores it: nested JSON objects keyed by the contract's names.
Document: TypeAlias = dict[str, Any]

#: How a training-side part logs an event of its own: ``emit(level, message, fields)``.
#: Each part gets one from ``configure`` so that it never imports the logger itself.
Emit: TypeAlias = Callable[[str, str, dict[str, Any]], None]

#: Where a reader says what it skipped or could not read: one sentence, never an exception.
Warn: TypeAlias = Callable[[str], None]

"""``grep -E`` patterns that run in linear time, or are refused with a reason.

Python's ``re`` backtracks: ``(a+)+$`` over a long line of ``a`` takes exponential time, and
a file search has no way to interrupt it. With the ``google-re2`` wheel (part of
``hvdlog[cli]``) patterns run on RE2, whose time is linear in the text. Patterns RE2 does not
take (backreferences, lookaround) and every pattern without the wheel use ``re``, after a check
of the parsed pattern: a repetition inside a repetition (``(a+)+``, ``(a*)*b``, ``((ab)+c)*``) is
refused with one sentence, since that is the usual way ``re`` blows up, and so is an alternation
under a repetition (``(a|aa)+``: alternatives may overlap; with a backreference RE2 refuses, such a
pattern would otherwise reach ``re``). The same lines match either way for the patterns both accept.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

__all__ = ["Pattern", "PatternError", "compile_search", "nested_repeat"]


class Pattern(Protocol):
    def search(self, text: str) -> Any: ...


class PatternError(ValueError):
    """A pattern that cannot run in bounded time, or does not compile; the message is one sentence."""


#: Whether to use RE2 when the wheel imports (tests turn it off to check the stdlib path).
USE_RE2 = True


@functools.cache
def _re2() -> Any:
    try:
        import re2  # type: ignore[import-untyped]  # the google-re2 wheel ships no types
    except ImportError:
        return None
    return re2


def compile_search(source: str, ignore_case: bool = False) -> Pattern:
    """The compiled pattern: RE2 when it can, else ``re`` (refusing nested repetitions)."""
    re2 = _re2() if USE_RE2 else None
    if re2 is not None:
        options = re2.Options()
        options.case_sensitive = not ignore_case
        options.log_errors = False  # its C++ logger would write to our stderr
        try:
            compiled: Pattern = re2.compile(source, options)
        except re2.error:
            pass  # backreferences, lookaround: the stdlib, checked
        else:
            return compiled
    try:
        stdlib = re.compile(source, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise PatternError(f"bad regular expression {source!r}: {exc}") from None
    if nested_repeat(source):
        remedy = ("RE2 does not take it (a backreference or a lookaround), so rewrite it" if re2 is not None
                  else "rewrite it, or install hvdlog[cli] (google-re2) for linear-time matching")
        raise PatternError(
            f"regular expression {source!r} repeats a repetition or an alternation (like (a+)+ or (a|aa)+), "
            f"which can take exponential time; {remedy}"
        )
    return stdlib


def nested_repeat(source: str) -> bool:
    """Whether a repetition (``*``, ``+``, ``{n,}``) holds another unbounded-ish one, or an alternation."""
    from re import _parser as sre_parse  # type: ignore[attr-defined]  # the stdlib's own parser (3.11+)

    return _nested(sre_parse.parse(source), 0, sre_parse)


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _nested(parsed: Any, depth: int, sre: Any) -> bool:
    for op, value in parsed:
        name = str(op)
        if name in _REPEATS:
            _, high, body = value
            repeats = high is sre.MAXREPEAT or high > 1
            if (repeats and depth > 0) or _nested(body, depth + (1 if repeats else 0), sre):
                return True
            continue
        if name == "BRANCH" and depth > 0:  # alternatives under a repetition may overlap: (a|aa)+ backtracks exponentially
            return True
        children = [value[-1]] if name == "SUBPATTERN" else value[1] if name == "BRANCH" else []
        if any(_nested(child, depth, sre) for child in children):
            return True
    return False

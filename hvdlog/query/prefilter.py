"""Which lines of a ``.jsonl`` events file can hold a document an analysis asks for, told by their bytes.

``first-failure`` and ``stalls`` ask a source for the documents meeting one of a few
conditions (``FAILURE_EVENTS``, ``STALL_EVENTS``: a level, an ``event.action``, a field that
exists), then maybe for the step events after a reset or a stall. A line of our events file
is a JSON object whose keys and values are the document's, so such a document's line must
hold certain bytes: ``"error"`` for ``log.level`` error, ``"signal"`` for that action, each
dotted part of a field that must exist (``exit_code`` and ``process``). Only the lines that
hold them are parsed; the parsed document is still checked with
:meth:`~hvdlog.query.spec.Filter.matches`, so the prefilter only has to keep every line whose
document could match (a superset), and then the answer is the full read's.

What keeps that exact:

* a JSON escape can spell any of those bytes otherwise (``"\\u0065rror"`` is ``"error"``):
  a line holding ``\\u`` is always kept (the only escape that makes letters, digits, ``_``
  or ``.``), and ``\\/`` for a text with a slash;
* the parser adds fields of its own (``event.dataset``, ``log.file.path``, the path's rank
  and job, the raw line's ``message`` and ``log.level`` for a line that is not JSON): a
  condition on such a field, or one the document of a non-JSON line meets, is not
  prefiltered. What the parser adds is not listed here but asked of the parser itself, by
  parsing probe lines at the file's path (``_added``);
* a condition or filter part it cannot reason about adds no needle; when no part of the
  filter gives any, the file is read whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from hvdlog.documents import Document, flatten
from hvdlog.fields import LEVELS
from hvdlog.query.spec import Condition, Filter

__all__ = ["LineTest", "line_test"]

#: Bytes a key or string value must spell as they are: printable ASCII, no quote, no backslash.
_PLAIN: Final = re.compile(r"^[\x20-\x7e]+$")
#: A line holding this may spell anything with escapes: always a candidate.
_ESCAPE: Final = b"\\u"
#: Probe lines, parsed at each file's path: what the parser adds to an object, to an
#: ``"event"`` that is not one, and to a line that is not JSON.
_OBJECT_PROBES: Final = (b"{}", b'{"event":0}')
_RAW_PROBE: Final = b"not json"

#: Alternatives of one clause: each is bytes that must all be in the line.
Clause = tuple[tuple[bytes, ...], ...]


@dataclass(frozen=True, slots=True)
class LineTest:
    """Clauses a line must all meet; a clause is met by any one of its alternatives."""

    clauses: tuple[Clause, ...]

    @property
    def scan(self) -> list[bytes]:
        """The needles the byte scanner looks for: one per alternative of the first clause."""
        return list(dict.fromkeys(alternative[0] for alternative in self.clauses[0]))

    def keeps(self, line: bytes) -> bool:
        """Whether the line meets every clause (found by the scan, it may still miss one)."""
        return all(any(all(needle in line for needle in alternative) for alternative in clause) for clause in self.clauses)


def _plain(text: object) -> bool:
    return isinstance(text, str) and _PLAIN.match(text) is not None and '"' not in text and "\\" not in text


def _overlaps(name: str, fields: frozenset[str]) -> bool:
    """``name`` is one of ``fields``, a parent of one, or under one."""
    return any(name == field or field.startswith(name + ".") or name.startswith(field + ".") for field in fields)


@dataclass(frozen=True, slots=True)
class _Added:
    """What the parser adds at a path: fields to the documents of JSON objects, fields and the
    whole document of a line that is not JSON."""

    objects: frozenset[str]
    raw: frozenset[str]
    raw_docs: tuple[Document, ...]

    @property
    def fields(self) -> frozenset[str]:
        return self.objects | self.raw


#: By the names of the fields a path gives (its values, such as the rank, matter to no needle: a
#: condition on a field the path gives is never prefiltered).
_PROBED: dict[tuple[str, ...], _Added] = {}


def _added(path: str) -> _Added:
    """What the parser adds at ``path``, asked of the parser with probe lines (once per kind of path)."""
    from hvdlog.parse import parse_lines
    from hvdlog.parse.launcher import path_fields

    shape = tuple(sorted(path_fields(path)))
    found = _PROBED.get(shape)
    if found is None:
        objects = [name for doc in parse_lines(list(_OBJECT_PROBES), path=path) for name, _ in flatten(doc)]
        raw = tuple(parse_lines([_RAW_PROBE], path=path))
        found = _PROBED[shape] = _Added(frozenset(objects), frozenset(name for doc in raw for name, _ in flatten(doc)), raw)
    return found


def _levels(minimum: str) -> tuple[tuple[bytes, ...], ...] | None:
    """``"error"``, ``"critical"`` for error: a missing or unknown level counts as info, so below warning nothing is needed."""
    if LEVELS.index(minimum) <= LEVELS.index("info"):
        return None
    return tuple((f'"{name}"'.encode(),) for name in LEVELS[LEVELS.index(minimum) :])


def _condition(condition: Condition, added: _Added) -> tuple[tuple[bytes, ...], ...] | None:
    """The alternatives a line meeting ``condition`` holds one of (None: cannot say)."""
    if any(condition.matches(doc) for doc in added.raw_docs):
        return None  # a line that is not JSON meets it: any line may
    if condition.min_level is not None:  # a line that is not JSON is info (checked above); an object's level is its own
        return None if _overlaps("log.level", added.objects) else _levels(condition.min_level)
    if _overlaps(condition.field, added.fields) or not all(_plain(part) for part in condition.field.split(".")):
        return None
    if condition.values:
        if not all(_plain(value) for value in condition.values):
            return None
        return tuple((f'"{value}"'.encode(),) for value in condition.values)
    # the field exists: each dotted part is in some key; the last is scanned for (the first is often `horovod`, in every line)
    return (tuple(part.encode() for part in reversed(condition.field.split("."))),)


def _literal(spec: Filter) -> tuple[tuple[bytes, ...], ...] | None:
    """A fixed PATTERN is in the line as it is, unless escaped (or, in a line that is not JSON and not
    UTF-8, shown as ``\\xNN``: such patterns add no clause)."""
    pattern = spec.pattern
    if not pattern or spec.regex or spec.ignore_case or not _plain(pattern) or re.search(r"x[0-9a-fA-F]", pattern):
        return None
    return ((pattern.encode(),), (b"\\/",)) if "/" in pattern else ((pattern.encode(),),)


def _clauses(spec: Filter, added: _Added) -> list[tuple[tuple[bytes, ...], ...] | None]:
    """One clause per part of the filter that needs bytes (None: that part cannot say)."""
    parts: list[tuple[tuple[bytes, ...], ...] | None] = []
    if spec.any_of:
        found = [_condition(condition, added) for condition in spec.any_of]
        parts.append(None if any(item is None for item in found) else tuple(alt for item in found if item for alt in item))
    if spec.min_level is not None:
        parts.append(_condition(Condition("log.level", min_level=spec.min_level), added))
    if spec.steps is not None:  # ``step`` an integer at the top: the key ``"step"`` itself
        parts.append(None if _overlaps("step", added.fields) else ((b'"step"',),))
    parts.append(_literal(spec))
    return parts


def line_test(spec: Filter, path: str) -> LineTest | None:
    """The test every line of the events file at ``path`` whose document meets ``spec`` passes;
    None when ``spec`` needs no bytes we can name (the file is read whole)."""
    clauses = tuple((*clause, (_ESCAPE,)) for clause in _clauses(spec, _added(path)) if clause)
    return LineTest(clauses) if clauses else None

"""Metamorphic variants of a log corpus case: what real clusters and real posting do to logs.

One generator for every case of the real-world corpus (tests/corpus/realworld) and for the
real captures (tests/corpus/horovod.*): :func:`variants` takes a case's files (path relative
to the case -> bytes) and yields :class:`Variant` objects, each the same files rewritten the
way a scheduler, a terminal, a log viewer or Horovod's own threads rewrite them. A new case
gets every variant that applies to its files, with nothing to declare.

Each variant says, honestly, what must stay the same (:attr:`Variant.keeps`): the analysis
aspects (``documents``, ``first_failure``, ``stalls``, ``grep_error``, ``grep_rank``) checked
as they are on the original, and the ones checked only for *who* (:attr:`Variant.loose`: the
blamed ranks and cause, the stall's missing ranks and end, the ranks of the error lines, not
the exact counts or tensor lists), because the variant legitimately changes the rest. Why
each keeps what it keeps is in the docstring of the function that makes it.

Variants are deterministic (seeded by the case's name), so a failure reproduces.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from hvdlog.parse.launcher import path_fields

__all__ = ["ALL_ASPECTS", "PREFIXES", "Variant", "variants"]

Files = dict[str, bytes]
ALL_ASPECTS = frozenset({"documents", "first_failure", "stalls", "grep_error", "grep_rank"})
_WHO = frozenset({"first_failure", "stalls", "grep_error"})

#: Prefixes that schedulers, Kubernetes and CI put before every line they capture ({n}: line
#: number, so times move on). Each ends in a separator; none is in any list of the parser.
PREFIXES: dict[str, Callable[[int], str]] = {
    "ci": lambda n: f"[2021-03-04T05:{n // 60 % 60:02d}:{n % 60:02d}Z] job-7 [RUNNING] ||  ",
    "determined": lambda n: f"<>  [2021-03-04 05:06:{n % 60:02d}] 7a1e9f2c || ",
    "kubectl-prefix": lambda n: "[pod/hvd-train-launcher-x7k2p/mpi-launcher] ",
    "kubectl-timestamps": lambda n: f"2021-03-04T05:06:{n % 60:02d}.{123456789 + n}Z ",
    "ray": lambda n: "(BaseHorovodWorker pid=43121, ip=10.1.2.7) ",
    "compose": lambda n: "trainer-1  | ",
    "syslog": lambda n: f"Mar  4 05:06:{n % 60:02d} node07 python3[4321]: ",
}

_TAG = re.compile(rb"^(\[\d+,\d+\]<std(?:out|err|diag)>:|\[\d+\]<std(?:out|err|diag)>:|\[\d+\] |\d+: )")
_CORE = re.compile(rb"^\[(?:\d{4}-\d{2}-\d{2} [\d:. ]+: )?[TDIWEF] [^:\]\n]+:\d+\] ")
_RANKED = re.compile(rb"^(?:\[\d+,(\d+)\]<std(?:out|err)>:|\[(\d+)\]<std(?:out|err)>:)")
_PROGRESS = " 45%|####5     | 45/100 [00:12<00:15,  3.61it/s]\r"


@dataclass(frozen=True)
class Variant:
    """One rewriting of a case's files, and what must stay the same under it."""

    name: str
    files: Files
    keeps: frozenset[str] = ALL_ASPECTS
    loose: frozenset[str] = frozenset()
    #: lines the variant removed or cut: expected documents matching them are not checked
    cut: tuple[str, ...] = field(default=())


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _join(lines: list[bytes]) -> bytes:
    return b"\n".join(lines)


def _is_console(path: str) -> bool:
    """A capture a terminal, scheduler or viewer saw: its path gives no rank (not a per-rank file)."""
    return path_fields(path).get("rank") is None and ".jsonl" not in path


def _consoles(files: Files) -> list[str]:
    return [path for path in files if _is_console(path)]


def _rewrite(files: Files, paths: list[str], line: Callable[[int, bytes], bytes]) -> Files:
    out = dict(files)
    for path in paths:
        out[path] = _join([line(n, text) if text else text for n, text in enumerate(_lines(files[path]))])
    return out


# --- the variants ---------------------------------------------------------------------------


def prefixed(files: Files, name: str) -> Variant:
    """A scheduler / Kubernetes / CI prefix on every line of every console capture. The
    prefix adds nothing and hides nothing: every aspect stays the same."""
    make = PREFIXES[name]
    return Variant(f"prefix-{name}", _rewrite(files, _consoles(files), lambda n, text: make(n).encode() + text))


def wrapped(files: Files, width: int) -> Variant:
    """A terminal at ``width`` columns (80-250) wrapped every longer console line, as a post
    copied from it shows. The pieces after the first lose the launcher tag, so what a line
    says is cut: who failed, what the stall's missing ranks are and which ranks logged errors
    must stay; counts, tensor lists and exact messages may not."""
    def wrap(data: bytes) -> bytes:
        out: list[bytes] = []
        for text in _lines(data):
            chars = text.decode("utf-8", "surrogateescape")
            out += [chars[i:i + width].encode("utf-8", "surrogateescape") for i in range(0, max(len(chars), 1), width)] or [b""]
        return _join(out)
    consoles = _consoles(files)
    return Variant(f"wrap-{width}", {**files, **{p: wrap(files[p]) for p in consoles}}, keeps=_WHO, loose=_WHO)


def crlf(files: Files) -> Variant:
    """Every file with Windows line ends (a log copied through a Windows editor): nothing changes."""
    return Variant("crlf", {path: data.replace(b"\n", b"\r\n") for path, data in files.items()})


def ansi(files: Files) -> Variant:
    """Colour codes as colouring loggers, log viewers and CI consoles print them: the whole
    line in a colour, the level word in another. Nothing changes."""
    def colour(_n: int, text: bytes) -> bytes:
        text = re.sub(rb"\b(ERROR|WARNING|INFO|Traceback)\b", b"\x1b[1;31m\\1\x1b[0m", text, count=1)
        return b"\x1b[36m" + text + b"\x1b[0m"
    return Variant("ansi", _rewrite(files, _consoles(files), colour))


def _first_text(lines: list[bytes], reverse: bool) -> int | None:
    order = range(len(lines) - 1, -1, -1) if reverse else range(len(lines))
    return next((i for i in order if lines[i].strip()), None)


def cut(files: Files, where: str) -> Variant | None:
    """The capture starts (``first``) or ends (``last``) in the middle of a line, as scrollback
    and a copy-paste do: the first line loses its first half, the last its second half. Only
    that line's own evidence may go; expected documents made of it are not checked, and an
    aspect the line may carry (an error or stall line, or any line for the rank counts) is
    checked only for who, unless the line is plain output."""
    out = dict(files)
    removed: list[str] = []
    for path in _consoles(files):
        lines = _lines(files[path])
        index = _first_text(lines, reverse=where == "last")
        if index is None:
            continue
        text = lines[index].decode("utf-8", "surrogateescape")
        half = len(text) // 2
        lines[index] = (text[half:] if where == "first" else text[:half]).encode("utf-8", "surrogateescape")
        removed.append(text)
        out[path] = _join(lines)
    if not removed:
        return None
    return Variant(f"cut-{where}", out, loose=frozenset({"grep_rank", "grep_error"}), cut=tuple(removed))


def _tag_of(text: bytes) -> tuple[bytes, int] | None:
    found = _RANKED.match(text)
    if found is None:
        return None
    return found.group(0), int(found.group(1) or found.group(2))


def interleaved(files: Files, rng: random.Random) -> Variant | None:
    """Another rank's ordinary output between every two lines of a console (its progress
    lines, tagged as the launcher tags them), as a busy job's console shows. Multi-line
    events are per rank, so nothing changes but the number of that rank's lines."""
    out = dict(files)
    touched = False
    for path in _consoles(files):
        lines = _lines(files[path])
        tags = [t for t in map(_tag_of, lines) if t is not None]
        ranks = sorted({rank for _, rank in tags})
        if len(ranks) < 2:
            continue
        result: list[bytes] = []
        for number, text in enumerate(lines):
            result.append(text)
            own = _tag_of(text)
            if own is None or number == len(lines) - 1:
                continue
            others = [t for t in tags if t[1] != own[1]]
            tag, _rank = others[rng.randrange(len(others))]
            if tag.endswith((b"<stdout>:", b"<stderr>:")):
                tag = tag[: tag.rindex(b"<")] + b"<stdout>:"
            result.append(tag + f"progress: sample {number * 32} of 60000".encode())
            touched = True
        out[path] = _join(result)
    return Variant("interleaved", out, loose=frozenset({"grep_rank"})) if touched else None


def progress_glued(files: Files) -> Variant | None:
    """tqdm's ``\\r`` progress output, never ended by a newline, glued before every third line
    of a console (after its launcher tag): a terminal shows only what follows the last
    ``\\r``, and so must every aspect."""
    out = dict(files)
    touched = False
    for path in _consoles(files):
        lines = _lines(files[path])
        for index in range(0, len(lines), 3):
            text = lines[index]
            if not text.strip():
                continue
            tag = _TAG.match(text)
            head = tag.group(0) if tag else b""
            lines[index] = head + _PROGRESS.encode() + text[len(head):]
            touched = True
        out[path] = _join(lines)
    return Variant("tqdm-glued", out) if touched else None


def torn(files: Files) -> Variant | None:
    """Horovod's two threads writing into each other's line: the first core line of a pair
    stops after its header, the second is written whole right behind it, and the first's
    rest (``[1]: Horovod initialized``) follows on its own line. Rejoined, nothing changes."""
    out = dict(files)
    touched = False
    for path, data in files.items():
        if ".jsonl" in path:
            continue
        lines = _lines(data)
        for index in range(len(lines) - 1):
            a, b = lines[index], lines[index + 1]
            tag_a, tag_b = _TAG.match(a), _TAG.match(b)
            head_a = tag_a.group(0) if tag_a else b""
            head_b = tag_b.group(0) if tag_b else b""
            if head_a != head_b:
                continue
            core_a, core_b = _CORE.match(a[len(head_a):]), _CORE.match(b[len(head_b):])
            if core_a is None or core_b is None:
                continue
            cut_at = len(head_a) + core_a.end()
            lines[index:index + 2] = [a[:cut_at] + b[len(head_b):], head_a + a[cut_at:]]
            touched = True
            break
        out[path] = _join(lines)
    return Variant("torn", out) if touched else None


def output_copy(files: Files) -> Variant | None:
    """``horovodrun --output-filename out`` run beside hvdlog's own capture: the same native
    lines again, in ``<job>/output/rank.N/stdout|stderr`` next to hvdlog's ``rank-N.*.log``.
    The copy says nothing new: every aspect stays the same (no line twice)."""
    copy: Files = {}
    for path, data in files.items():
        found = re.search(r"^(.*)/([^/]+)/rank-(\d+)\.(stdout|stderr)\.log$", path)
        if found is None:
            continue
        job, _host, rank, stream = found.groups()
        plain = re.sub(rb"(?m)^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z ", b"", data)  # the tee's arrival times
        copy[f"{job}/output/rank.{rank}/{stream}"] = plain
    return Variant("output-copy", {**files, **copy}) if copy else None


def variants(case_id: str, files: Files) -> Iterator[Variant]:
    """Every variant of one case's files that applies to them (in a fixed order)."""
    rng = random.Random(zlib.crc32(case_id.encode()))
    consoles = _consoles(files)
    if consoles:
        for name in PREFIXES:
            yield prefixed(files, name)
        yield wrapped(files, rng.randrange(80, 251))
        yield ansi(files)
        for made in (cut(files, "first"), cut(files, "last"), interleaved(files, rng), progress_glued(files)):
            if made is not None:
                yield made
    yield crlf(files)
    for made in (torn(files), output_copy(files)):
        if made is not None:
            yield made

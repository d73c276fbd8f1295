"""What a case's expectations become under a metamorphic variant (tests/support/variants.py).

Shared by both paths that check the variants: the Python path (tests/query/test_metamorphic.py,
hvdlog's commands over the rewritten files) and the Logstash path
(tests/stack/test_logstash_ruby_filter.py, Filebeat's events through the conf's groks and the
ruby filter), so a variant promises the same on both.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from corpus.realworld import ASPECTS, RealCase
from support.variants import Variant

__all__ = ["carried", "case_files", "expected_under", "materialise"]

_SIGNIFICANT = ("error", "critical")


def case_files(case: RealCase) -> dict[str, bytes]:
    """A case's log files (path relative to the case -> bytes): what :func:`variants` rewrites."""
    return {relative: path.read_bytes() for relative, path in case.files()}


def materialise(folder: Path, files: dict[str, bytes]) -> None:
    """A variant's files written under ``folder`` at their relative paths."""
    for relative, data in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def carried(variant: Variant, docs: list[dict[str, Any]]) -> bool:
    """Whether a line the variant cut was part of an error or stall document of the original."""
    for doc in docs:
        level = (doc.get("log") or {}).get("level")
        stall = (doc.get("event") or {}).get("action") == "stall"
        if level in _SIGNIFICANT or stall:
            text = str(doc.get("message", ""))
            if any(line.strip() and _payload(line) in text for line in variant.cut):
                return True
    return False


def _payload(line: str) -> str:
    """The cut line without its launcher tag and, on a Horovod core line, without the core
    header (``[time: W file:line] ``, ``[0]: ``): what a document's message holds. With the
    header kept, no cut core line (a stall header, an E line) was ever found in its document."""
    from hvdlog.parse.launcher import strip_tag
    from hvdlog.parse.patterns import compile_pattern

    payload = strip_tag(line).payload.strip()
    core = compile_pattern("HOROVOD_CORE_LINE").match(payload)
    if core is not None and core.get("message"):
        payload = str(core["message"]).strip()
    return payload[:40] or line.strip()[:40]


def _loosened(aspect: str, expected: Any) -> Any:
    """The expectation of ``aspect`` reduced to who: ranks, cause, missing ranks, end."""
    if not isinstance(expected, (dict, list)):
        return expected
    expected = copy.deepcopy(expected)
    if aspect == "stalls":
        return [{k: v for k, v in episode.items() if k in ("missing_ranks", "shutdown")} for episode in expected]
    if aspect == "first_failure":
        return {k: v for k, v in expected.items() if k in ("blamed", "primary", "cause")}
    if aspect.startswith("grep_"):
        kept = {k: v for k, v in expected.items() if k in ("rank", "ranks_include")}
        if "ranks" in expected:
            kept["ranks_include"] = expected["ranks"]
        return kept
    return expected


def expected_under(case: RealCase, folder: Path, variant: Variant, original_docs: list[dict[str, Any]]) -> RealCase:
    """The case as the variant's files in ``folder``, with the expectations the variant keeps
    (``original_docs``: the unchanged case's documents, needed only when the variant cut lines)."""
    config = copy.deepcopy(case.config)
    was_carried = bool(variant.cut) and carried(variant, original_docs)
    for aspect in ASPECTS:
        if aspect not in config:
            continue
        if aspect not in variant.keeps or (was_carried and aspect in ("first_failure", "stalls", "grep_error")):
            del config[aspect]
        elif aspect in variant.loose:
            config[aspect] = _loosened(aspect, config[aspect])
    if variant.cut and "documents" in config:
        config["documents"] = [item for item in config["documents"]
                               if not any(item["match"][:20] in line or line.strip()[:20] in item["match"] for line in variant.cut)
                               and not _made_of_cut(variant, item["match"], original_docs)]
    return RealCase(folder, config)


def _made_of_cut(variant: Variant, match: str, docs: list[dict[str, Any]]) -> bool:
    """Whether an expected document (the original's documents saying ``match``) holds a line the
    variant cut: a multi-line one (a stall report, a traceback) whose last or first line was
    cut is made of that line too, and its fields (tensors, ranks, message) may lose what it said."""
    payloads = [_payload(line) for line in variant.cut if line.strip()]
    return any(payload in str(doc.get("message", "")) for doc in docs if match in str(doc.get("message", "")) for payload in payloads)

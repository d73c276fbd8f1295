"""Metamorphic tests: the analyses give the same answer under what clusters and posting do to logs.

Every case of the real-world corpus (tests/corpus/realworld) and every real capture
(tests/corpus/horovod.*) is rewritten by every variant of tests/support/variants.py
(prefixes, terminal wraps, CRLF, colour codes, cut lines, other ranks interleaved, tqdm
progress, torn core lines, an ``--output-filename`` copy), and the answer must stay what the
variant promises to keep: for real-world cases, their ``case.yml`` expectations; for the
captures, the answer on the unchanged capture. All in-process (library calls and click's
runner), so the whole corpus runs in a few minutes: documents through the library, the
analyses through the commands as a user runs them (test_realworld checks both paths on
the unchanged cases).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from corpus.realworld import ASPECTS, RealCase, check, cli_answers, library_answers, real_cases
from support.variant_expectations import carried, case_files, expected_under, materialise
from support.variants import Variant, variants

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
#: "<test> <param id>" of the variants known to differ (xfail, strict: a fix must remove its line)
KNOWN = Path(__file__).with_name("metamorphic_known_failures.txt")
_KNOWN: frozenset[str] = frozenset(
    line.strip() for line in KNOWN.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")
)


def _param(test: str, *values: Any, id: str) -> Any:
    """One parameter set; a known gap is marked xfail (strict), so it still runs and a fix shows."""
    marks = [pytest.mark.xfail(strict=True, reason=f"known gap, listed in {KNOWN.name}")] if f"{test} {id}" in _KNOWN else []
    return pytest.param(*values, id=id, marks=marks)


def _captures() -> list[RealCase]:
    """The real captures as cases (one file each, at the path it is parsed as), no expectations."""
    found = []
    for config_path in sorted(CORPUS.glob("horovod.*/*.log-config.yml")):
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        log = config_path.with_name(config_path.name.removesuffix("-config.yml"))
        relative = str(config.get("path", log.name)).lstrip("/")
        found.append(RealCase(log.parent, {"inputs": [relative], "timezone": config.get("timezone", "UTC"),
                                           "capture": str(log), "size": config.get("size")}))
    return found


def _params() -> Iterator[Any]:
    for case in real_cases():
        for variant in variants(case.id, case_files(case)):
            yield _param("test_realworld_variant", case, variant, id=f"{case.id}-{variant.name}")


def _summary(case: RealCase) -> dict[str, Any]:
    """What a capture's analyses say, reduced to what every variant keeps."""
    reports = library_answers(case, "first_failure")
    episodes = library_answers(case, "stalls")
    _, errors = cli_answers(case, "grep_error")
    return {
        "first_failure": [(sorted(map(str, r.get("blamed_ranks") or [])), r.get("primary"), r.get("cause")) for r in reports],
        "stalls": [(e.get("missing_ranks"), e.get("shutdown")) for e in episodes],
        "grep_error": sorted({str(d.get("rank")) for d in errors}),
    }


@pytest.mark.parametrize(("case", "variant"), list(_params()))
def test_realworld_variant(case: RealCase, variant: Variant, tmp_path: Path) -> None:
    """A real-world case, rewritten, still gives the expected answers the variant keeps."""
    materialise(tmp_path, variant.files)
    original = library_answers(case, "documents") if variant.cut else []
    changed = expected_under(case, tmp_path, variant, original)
    problems = []
    for aspect in ASPECTS:
        if aspect not in changed.config and aspect != "documents":
            continue
        if aspect == "documents":  # the analyses through the commands (the library path is test_realworld's)
            problems += [f"{aspect} (library): {p}" for p in check(changed, aspect, library_answers(changed, aspect))]
        else:
            _, answers = cli_answers(changed, aspect)
            problems += [f"{aspect} (cli): {p}" for p in check(changed, aspect, answers)]
    assert problems == []


def _capture_params() -> Iterator[Any]:
    for case in _captures():
        files = {case.config["inputs"][0]: Path(case.config["capture"]).read_bytes()}
        for variant in variants(Path(case.config["capture"]).relative_to(CORPUS).as_posix(), files):  # seeded by a name, not a machine path
            yield _param("test_capture_variant", case, files, variant, id=f"{Path(case.config['capture']).stem}-{variant.name}")


@pytest.mark.parametrize(("case", "files", "variant"), list(_capture_params()))
def test_capture_variant(case: RealCase, files: dict[str, bytes], variant: Variant, tmp_path: Path) -> None:
    """A real capture, rewritten, gives the answer it gives unchanged (for what the variant keeps)."""
    (tmp_path / "original").mkdir()
    materialise(tmp_path / "original", files)
    materialise(tmp_path / "variant", variant.files)
    before = _summary(RealCase(tmp_path / "original", case.config))
    after = _summary(RealCase(tmp_path / "variant", case.config))
    if variant.cut:
        docs = library_answers(RealCase(tmp_path / "original", case.config), "documents")
        if carried(variant, docs):
            return  # the cut line was the evidence itself: nothing to keep (see variants.cut)
    if variant.loose:
        before["first_failure"] = [(ranks, primary, None) for ranks, primary, _ in before["first_failure"]]
        after["first_failure"] = [(ranks, primary, None) for ranks, primary, _ in after["first_failure"]]
    assert after == before


def test_known_failures_are_current() -> None:
    """Every line of the known-failures list names a variant that exists (a stale line hides nothing)."""
    ids = {f"test_realworld_variant {p.id}" for p in _params()} | {f"test_capture_variant {p.id}" for p in _capture_params()}
    assert ids >= _KNOWN, sorted(_KNOWN - ids)[:10]


def test_every_case_gets_the_variants() -> None:
    """Every real-world case has at least the line-ending variant (consoles get many more), and
    the generator makes every kind somewhere in the corpus."""
    names: set[str] = set()
    for case in real_cases():
        made = [variant.name for variant in variants(case.id, case_files(case))]
        assert "crlf" in made, case.id
        names |= {name.rsplit("-", 1)[0] if name.startswith("wrap-") else name for name in made}
    assert {"prefix-ci", "prefix-determined", "wrap", "crlf", "ansi", "cut-first", "cut-last", "interleaved",
            "tqdm-glued", "torn", "output-copy"} <= names

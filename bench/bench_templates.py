"""Templates: hvdlog's canonicaliser against drain3 on the parsing corpus (speed and quality).

    python bench/bench_templates.py            # ours only
    PYTHONPATH=DIR python bench/bench_templates.py   # with drain3 importable from DIR, both

Quality, on every message of the real-world corpus and the dataset captures:
* distinct templates (fewer is more collapse; too few means different events merged);
* number variants: each message with digits, its digits changed, must get the same template;
* failures apart: the first failures of the real-world cases with different error types or
  words must keep different templates (pairs merged are counted).
"""

from __future__ import annotations

import random
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def messages() -> tuple[list[str], list[str]]:
    """Every message of the corpus, and the first-failure error messages of the real-world cases."""
    from corpus.realworld import real_cases

    from hvdlog.analyses.failures import find_first_failure
    from hvdlog.query.files import FileSource
    from hvdlog.query.spec import Filter

    out: list[str] = []
    failures: list[str] = []
    for case in real_cases():
        source = FileSource([str(path) for path in case.inputs()], timezone=case.timezone, warn=lambda _: None)
        docs = list(source.search(Filter()))
        out += [str(doc.get("message") or "") for doc in docs]
        for report in find_first_failure(lambda spec, docs=docs: [d for d in docs if spec.matches(d)], Filter()):
            if report.error_message:
                failures.append(f"{report.error_type or ''}: {report.error_message}")
    for log in sorted((ROOT / "tests" / "corpus").glob("horovod.*/*.log")):
        out += [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return out, sorted(set(failures))


def _vary(text: str, rng: random.Random) -> str:
    """The same text with every digit changed (same length: a date stays a date, a time a time)."""
    return re.sub(r"\d", lambda m: str((int(m.group(0)) + rng.randint(1, 9)) % 10) if m.group(0) != "0" else "0", text)


def ours(corpus: list[str]) -> dict[str, Any]:
    from hvdlog.analyses.templates import template

    started = time.perf_counter()
    for _ in range(5):
        for text in corpus:
            template(text)
    per_line = (time.perf_counter() - started) / (5 * len(corpus))
    return {"name": "hvdlog.analyses.templates", "us_per_line": per_line * 1e6, "label": template}


def drain(corpus: list[str]) -> dict[str, Any]:
    from drain3 import TemplateMiner  # type: ignore[import-not-found]
    from drain3.template_miner_config import TemplateMinerConfig  # type: ignore[import-not-found]

    config = TemplateMinerConfig()
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    started = time.perf_counter()
    for text in corpus:
        miner.add_log_message(text)
    per_line = (time.perf_counter() - started) / len(corpus)

    def label(text: str) -> str:
        cluster = miner.match(text)
        return f"#{cluster.cluster_id}" if cluster is not None else f"(new) {miner.add_log_message(text)['template_mined']}"

    return {"name": "drain3 (default config, trained on the corpus)", "us_per_line": per_line * 1e6, "label": label}


def quality(result: dict[str, Any], corpus: list[str], failures: list[str]) -> None:
    label = result["label"]
    rng = random.Random(7)
    with_digits = [text for text in set(corpus) if re.search(r"\d", text)]
    same = sum(label(text) == label(_vary(text, rng)) for text in with_digits)
    distinct = len({label(text) for text in set(corpus)})
    labels = [label(text) for text in failures]
    merged = sum(1 for i in range(len(labels)) for j in range(i + 1, len(labels)) if labels[i] == labels[j]
                 and re.sub(r"\d+", "", failures[i]) != re.sub(r"\d+", "", failures[j]))
    print(f"{result['name']}: {result['us_per_line']:.1f} us/line; {distinct} templates for {len(set(corpus))} distinct "
          f"messages; number variants collapsed {same}/{len(with_digits)}; distinct failures merged: {merged} pairs of {len(failures)} failures")


def main() -> None:
    corpus, failures = messages()
    print(f"{len(corpus)} messages ({len(set(corpus))} distinct), {len(failures)} distinct first-failure messages")
    quality(ours(corpus), corpus, failures)
    try:
        result = drain(corpus)
    except ImportError:
        print("drain3 not importable: set PYTHONPATH to a directory holding it (pip install --target DIR drain3)")
        return
    quality(result, corpus, failures)


if __name__ == "__main__":
    main()

"""The parsing corpus: raw cases, their settings and their golden documents.

``tests/corpus/<dataset>/<case>.log`` holds raw lines (real captures, or hand-copied from
the public bug report named in the case's config); ``<case>.log-config.yml`` the settings
that make the case deterministic (the path the lines were read from, the time zone, the
job size); ``<case>.log-expected.json`` the expected documents, pretty with sorted keys.
Regenerate goldens only with ``pytest --regenerate-goldens`` and review the diff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CORPUS", "Case", "cases", "write_golden"]

CORPUS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Case:
    """One raw file of the corpus and its settings."""

    log: Path
    config: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.log.parent.name}/{self.log.stem}"

    @property
    def golden(self) -> Path:
        return self.log.with_name(self.log.name + "-expected.json")

    def lines(self) -> list[bytes]:
        return self.log.read_bytes().splitlines(keepends=True)

    def parse(self) -> list[dict[str, Any]]:
        """The documents hvdlog's parser gives for this case."""
        from hvdlog.parse import parse_lines

        return list(
            parse_lines(
                self.lines(),
                path=self.config["path"],
                timezone=self.config.get("timezone", "UTC"),
                size=self.config.get("size"),
                chatter=self.config.get("chatter", "keep"),
            )
        )

    def expected(self) -> list[dict[str, Any]]:
        return json.loads(self.golden.read_text(encoding="utf-8"))["expected"]


def cases() -> list[Case]:
    """Every case, in a stable order."""
    found = []
    for log in sorted(CORPUS.glob("*/*.log")):
        config = yaml.safe_load(log.with_name(log.name + "-config.yml").read_text(encoding="utf-8"))
        found.append(Case(log, config))
    return found


def write_golden(case: Case, documents: list[dict[str, Any]]) -> None:
    """Write the expected documents of a case (pretty, sorted keys, stable diffs)."""
    text = json.dumps({"expected": documents}, indent=2, sort_keys=True, ensure_ascii=False)
    case.golden.write_text(text + "\n", encoding="utf-8")

"""`hvdlog parse` gives the golden documents for every case of the corpus (tests/corpus)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus.cases import Case, cases, write_golden

CASES = cases()


@pytest.fixture(name="regenerate")
def fixture_regenerate(request: pytest.FixtureRequest) -> bool:
    """True when run with --regenerate-goldens."""
    return bool(request.config.getoption("--regenerate-goldens"))


class TestGoldens:
    @pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
    def test_parse_gives_golden_documents(self, case: Case, regenerate: bool) -> None:
        """parse_lines on the case's raw lines gives exactly its expected documents."""
        documents = json.loads(json.dumps(case.parse()))  # as they travel: JSON types
        if regenerate:
            write_golden(case, documents)
        assert case.golden.exists(), f"no golden for {case.id}: run pytest --regenerate-goldens and review the diff"
        assert documents == case.expected()

    def test_corpus_covers_every_dataset(self) -> None:
        """Each dataset has cases, and the goldens hold documents of every dataset."""
        datasets = {doc["event"]["dataset"] for case in CASES for doc in case.expected()}
        assert datasets == {"horovod.app", "horovod.core", "horovod.launcher"}
        assert {case.log.parent.name for case in CASES} == datasets


class TestCli:
    def test_cli_prints_the_golden_documents(self, tmp_path) -> None:
        """`hvdlog parse` on a per-rank file prints the same documents as NDJSON."""
        case = next(case for case in CASES if case.id == "horovod.launcher/layout-rank1-stdout")
        target = tmp_path / case.config["path"]
        target.parent.mkdir(parents=True)
        target.write_bytes(case.log.read_bytes())
        result = subprocess.run(
            [sys.executable, "-c", "from hvdlog.cli.main import main; main()", "parse", "--timezone", "UTC", str(target)],
            capture_output=True, check=False, cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        printed = [json.loads(line) for line in result.stdout.splitlines()]
        for doc in printed:
            doc["log"]["file"]["path"] = case.config["path"]
        assert printed == case.expected()

    def test_output_filename_tree(self, tmp_path) -> None:
        """A horovodrun --output-filename tree given as a directory is walked, rank from the path."""
        from hvdlog.parse import parse_paths

        expected = []
        for case in CASES:
            if "tree" in case.log.stem:
                target = tmp_path / case.config["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(case.log.read_bytes())
                expected.extend(json.dumps(doc, sort_keys=True) for doc in case.expected())
        docs = []
        for doc in parse_paths([tmp_path], timezone="UTC"):
            doc["log"]["file"]["path"] = str(Path(doc["log"]["file"]["path"]).relative_to(tmp_path))
            docs.append(json.dumps(doc, sort_keys=True))
        assert len(expected) > 50 and sorted(docs) == sorted(expected)

"""`hvdlog diff`: on good/bad pairs of the same script, the injected failure's template leads, and nothing
that differs only in numbers is reported."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.seeded_jobs import seed_root

from hvdlog.analyses.diff import script_stem
from hvdlog.cli.main import cli

REALWORLD = Path(__file__).resolve().parent.parent / "corpus" / "realworld"
#: Real-world cases whose console has a healthy part before the failure, and the failure's words.
TWINS = {
    "gloo-timestamped-cuda-oom": "CUDA out of memory",
    "gloo-headless-scrollback": "mat1 and mat2 shapes",
    "kubectl-prefix-mpijob-nccl": "ncclCommInitRank failed",
    "nccl-unhandled-cuda-all-ranks": "ncclAllReduce failed",
    "srun-l-keyerror": "KeyError",
    "thcudacheck-fail-rank4": "illegal memory access",
    "gloo-bash-segfault": "Segmentation fault",
}


def _diff(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["diff", "--json", *args])
    assert result.exit_code == 0, result.output
    answer: dict[str, Any] = json.loads(result.output)
    return answer


def _digitless(text: str) -> str:
    return re.sub(r"\d+", "", text)


def _lines(path: Path) -> list[str]:
    from hvdlog.analyses.summary import one_line
    from hvdlog.query.files import FileSource
    from hvdlog.query.spec import Filter

    return [one_line(doc) for doc in FileSource([str(path)], warn=lambda _m: None).search(Filter())]


def test_script_stem_of_hvdlog_job_ids() -> None:
    assert script_stem("train-20261129-1547") == "train"
    assert script_stem("my_model-v2-20261129-7") == "my_model-v2"
    assert script_stem("train-003") == "train"


@pytest.fixture(name="seeded", scope="module")
def fixture_seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("seeded")
    return root, seed_root(root)


@pytest.mark.parametrize("kind", ["bug", "ecc", "one-off"])
def test_seeded_failure_leads_and_the_newest_finished_twin_is_chosen(seeded: tuple[Path, dict[str, list[str]]], kind: str) -> None:
    root, kinds = seeded
    bad = root / kinds[kind][0]
    answer = _diff(str(bad))
    newest_ok = max(job for job in kinds["ok"])
    assert Path(answer["good"]).name == newest_ok and "newest finished job" in answer["good_chosen"]
    culprit = next(line for line in _lines(bad) if "uncaught" in line and "HorovodInternalError" not in line)
    top = [item["example"] for item in answer["templates"][:3]]
    assert culprit in top, top
    good = {_digitless(line) for line in _lines(Path(answer["good"]))}
    assert not [item for item in answer["templates"] if _digitless(item["example"]) in good]
    assert all(not item["template"].startswith("step <N>: loss") for item in answer["templates"])


def _twin(case: str, words: str, tmp_path: Path) -> tuple[Path, Path]:
    """The case's console as BAD; its lines before the failure, every digit changed, as GOOD (another run)."""
    config = yaml.safe_load((REALWORLD / case / "case.yml").read_text(encoding="utf-8"))
    (source,) = [REALWORLD / case / name for name in config["inputs"]]
    lines = source.read_text(encoding="utf-8").splitlines()
    cut = next(index for index, line in enumerate(lines) if words in line or "Traceback" in line)
    rng = random.Random(case)
    healthy = [re.sub(r"[1-9]", lambda _m: str(rng.randint(1, 9)), line) for line in lines[:cut]]
    assert healthy, f"{case}: no healthy part before the failure"
    good = tmp_path / "good" / source.name
    good.parent.mkdir()
    good.write_text("\n".join(healthy) + "\n", encoding="utf-8")
    return source, good


@pytest.mark.parametrize(("case", "words"), sorted(TWINS.items()))
def test_realworld_case_against_its_healthy_twin(case: str, words: str, tmp_path: Path) -> None:
    bad, good = _twin(case, words, tmp_path)
    answer = _diff(str(bad), str(good))
    top = answer["templates"][:3]
    assert any(words in item["example"] or words in item["template"] for item in top), [item["example"] for item in top]
    twin = {_digitless(line) for line in _lines(good)}
    assert not [item["example"] for item in answer["templates"] if _digitless(item["example"]) in twin]


def test_a_missing_or_empty_job_is_one_sentence(tmp_path: Path) -> None:
    """A missing BAD is named before any root is searched for a twin; a folder without logs is one sentence."""
    runner = CliRunner()
    missing = runner.invoke(cli, ["diff", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output
    (tmp_path / "empty").mkdir()
    empty = runner.invoke(cli, ["diff", str(tmp_path / "empty"), str(tmp_path / "empty")])
    assert empty.exit_code == 2 and "no log files found" in empty.output and "SourceError" not in empty.output

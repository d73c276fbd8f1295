"""The analyses on a real elastic job (tests/corpus/elastic/j1, recorded by hvdlog with
Horovod 0.28.1 under horovodrun's elastic driver): the worker spawned as rank 0 was
SIGKILLed at step 5, the two others reset to 2 workers, a host was added back, 20 steps.

What issue #22 asks of the answers, from hvdlog's own files alone (no console): the killed
rank is named with its rank at death and the job is said to have recovered; the survivors'
receive timeouts and lost connections are consequences; nobody is a straggler.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hvdlog.cli.main import cli

JOB = Path(__file__).resolve().parents[1] / "corpus" / "elastic" / "j1" / "vm"


def _json(*args: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, [*args, "--json", str(JOB)])
    return result.exit_code, [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_first_failure_names_the_killed_rank_and_the_recovery() -> None:
    code, (report,) = _json("first-failure")
    assert code == 0
    assert report["blamed_ranks"] == [0] and report["primary"] is False
    assert report["confidence"] == "likely"
    assert "stop while the other 2 reset" in report["reasoning"]
    assert report["recovered"] and report["recovered"]["workers"] == 2
    assert {item["rank"] for item in report["collateral"]} == {1, 2}


def test_stragglers_flags_nobody() -> None:
    code, rows = _json("stragglers")
    assert code == 1  # not enough data: nobody is called a straggler
    assert rows and not any(row.get("outlier") for row in rows)

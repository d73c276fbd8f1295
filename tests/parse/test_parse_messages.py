"""The message table (hvdlog/parse/assets/messages.json): its rows compile, are anchored, set
only contract fields, and a bad table is refused with a sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import evidence_samples
from support.row_samples import cases, wrong_answers

from hvdlog.fields import FIELDS_BY_NAME, LEVELS
from hvdlog.parse.evidence_rules import evidence_rules
from hvdlog.parse.messages import LEVELS_MAP, MESSAGES_FILE, level_words, load_messages, recognise
from hvdlog.parse.patterns import PatternError, load_definitions

TABLE = json.loads(MESSAGES_FILE.read_text(encoding="utf-8"))


class TestTable:
    def test_rows_compile_and_set_contract_fields(self) -> None:
        """Every row's pattern is anchored; every field it sets is declared; levels are levels."""
        rows = load_messages()
        assert len(rows) == len(TABLE["messages"]) >= 1
        for row in TABLE["messages"]:
            for name, spec in row.get("fields", {}).items():
                assert name in FIELDS_BY_NAME, name
                mapped = level_words() if isinstance(spec, dict) and spec["map"] == LEVELS_MAP else spec.get("map", {}) if isinstance(spec, dict) else {}
                values = [*mapped.values(), spec.get("default")] if isinstance(spec, dict) else [spec]
                if name == "log.level":
                    assert {value for value in values if value is not None} <= set(LEVELS), row

    def test_level_words_are_written_once(self) -> None:
        """One map of level words: its levels are the contract's, Horovod's core letters and every
        word the grok patterns' level alternatives allow are in it, and no row keeps a map of its own."""
        words = level_words()
        assert set(words.values()) == set(LEVELS)
        definitions = load_definitions()
        letters = set(definitions["HOROVOD_LEVEL_LETTER"].strip("[]")) | set(definitions["HOROVOD_TF_LETTER"].strip("[]"))
        assert letters == set("TDIWEF") and letters <= set(words)
        assert set(definitions["HOROVOD_PYTHON_LEVEL_WORD"].split("|")) <= set(words)
        copies = [row["pattern"] for row in TABLE["messages"] for spec in row.get("fields", {}).values()
                  if isinstance(spec, dict) and isinstance(spec["map"], dict) and set(spec["map"]) <= set(words)]
        assert not copies, f"rows with their own map of level words (use \"map\": \"levels\"): {copies}"

    def test_level_words_map_captures(self) -> None:
        """A row naming the levels map maps each word through it (loguru's SUCCESS is info, NCCL's
        WARN a warning, Python's CRITICAL critical), an unknown word to the row's default."""
        assert recognise("2024-05-01 10:00:00.123 | SUCCESS  | train:main:12 - done")["log.level"] == "info"
        assert recognise("CRITICAL:root:out of memory")["log.level"] == "critical"
        nccl = recognise("node1:1234:1300 [0] NCCL WARN Call to connect returned Connection refused")
        assert nccl is not None and nccl["log.level"] == "warning"

    def test_rows_carry_their_samples(self) -> None:
        """Every row carries a sample and a near-miss; each sample is taken by its own row and by
        no earlier one, no near-miss matches its row (the ruby filter's rows are checked alike:
        tests/stack/test_logstash_ruby_filter.py)."""
        rows = load_messages()
        assert len(rows) == len(TABLE["messages"])  # no family switched off: indexes are the table's
        for row in TABLE["messages"]:
            assert row.get("samples") and row.get("misses"), f"{row['pattern']}: a row needs samples and misses"
        answers = []
        for case in cases():
            first = next((index for index, row in enumerate(rows) if row.fields_of(case.line, case.given) is not None), None)
            answers.append((first, rows[case.row].pattern.match(case.line) is not None))
        assert not wrong_answers(answers), "\n".join(wrong_answers(answers))

    def test_evidence_rules_carry_their_samples(self) -> None:
        """Every evidence rule carries a sample document and a near-miss; each sample is classified
        by its own rule, before any earlier one, with the rule's kind, source and the rank it names;
        no near-miss matches its rule (the ruby filter is checked alike: tests/stack/test_logstash_ruby_filter.py)."""
        assert len(evidence_rules()) == len(TABLE["evidence"])  # no family switched off: indexes are the table's
        assert not evidence_samples.unexampled(), "\n".join(evidence_samples.unexampled())
        all_cases = evidence_samples.cases()
        assert len(all_cases) >= 2 * len(TABLE["evidence"])
        wrong = evidence_samples.wrong_answers(all_cases, [evidence_samples.python_answer(case) for case in all_cases], "Python")
        assert not wrong, "\n".join(wrong)

    def test_a_wrong_evidence_example_is_named(self, tmp_path: Path) -> None:
        """A sample an earlier rule takes, a sample given the wrong rank, a near-miss its rule takes and
        a rule without examples are each reported by row."""
        shutdown = next(i for i, row in enumerate(TABLE["evidence"]) if row["kind"] == "horovod_shutdown")
        exception = next(i for i, row in enumerate(TABLE["evidence"]) if row["kind"] == "exception")
        made = [
            evidence_samples.EvidenceCase(exception, "exception", "rank", {"message": "HorovodInternalError: Horovod has been shut down.",
                                                                           "log.level": "error", "error.type": "HorovodInternalError", "rank": 1}, 1, True),
            evidence_samples.EvidenceCase(shutdown, "horovod_shutdown", "rank",
                                          {"message": "Horovod has been shut down", "log.level": "error", "rank": 1}, 2, True),
            evidence_samples.EvidenceCase(shutdown, "horovod_shutdown", "rank", {"message": "Horovod has been shut down", "log.level": "error"}, None, False),
        ]
        assert evidence_samples.wrong_answers(made, [evidence_samples.python_answer(case) for case in made], "Python") == [
            f"Python: evidence row {exception} (exception) sample 'HorovodInternalError: Horovod has been shut down.' is taken by row {shutdown}, not its own",
            (f"Python: evidence row {shutdown} (horovod_shutdown) sample 'Horovod has been shut down' gets "
             "{'hvdlog.evidence.kind': 'horovod_shutdown', 'hvdlog.evidence.source': 'rank', 'hvdlog.evidence.rank': 1}, not "
             "{'hvdlog.evidence.kind': 'horovod_shutdown', 'hvdlog.evidence.source': 'rank', 'hvdlog.evidence.rank': 2}"),
            f"Python: evidence row {shutdown} (horovod_shutdown) near-miss 'Horovod has been shut down' matches it",
        ]
        table = json.loads(json.dumps(TABLE))
        table["evidence"][0].pop("misses")
        path = tmp_path / "messages.json"
        path.write_text(json.dumps(table), encoding="utf-8")
        assert evidence_samples.unexampled(path) == ["evidence row 0 (stall_report, {'event.action': ['stall']}): no misses (what the rule must not match)"]
        table["evidence"][1]["samples"].append({"message": "x", "hvdlog.evidence.kind": "stall_report"})
        path.write_text(json.dumps(table), encoding="utf-8")
        with pytest.raises(ValueError, match="an example gives no evidence fields"):
            evidence_samples.cases(path)

    def test_a_row_gives_its_fields(self) -> None:
        """horovodrun's exit line: rank, exit code, level and the signal the code means."""
        fields = recognise("Process 3 exit with status code 137.")
        assert fields == {
            "rank": 3, "process.exit_code": 137, "log.level": "error", "event.reason": "SIGKILL",
            "message": "Process 3 exit with status code 137.", "event.dataset": "horovod.launcher",
        }
        assert recognise("Process 0 exit with status code 0.")["log.level"] == "info"
        assert recognise("a print") is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"messages": [{"fields": {}}]}, "without a pattern"),
        ({"messages": [{"pattern": "HOROVOD_REST"}]}, "anchored"),
        ({"messages": [{"pattern": "HOROVOD_PROCESS_EXIT", "fields": {"log.level": {"from": "x"}}}]}, "from, map"),
        ({"messages": [{"pattern": "HOROVOD_NOPE"}]}, "HOROVOD_NOPE"),
    ],
)
def test_bad_tables_are_refused(tmp_path: Path, table: dict, message: str) -> None:
    """A row the parser cannot use fails with the reason."""
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(table), encoding="utf-8")
    with pytest.raises(PatternError, match=message):
        load_messages(path)


def test_unreadable_table(tmp_path: Path) -> None:
    """A missing or broken table names the file and the setting."""
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    for path in (tmp_path / "nope.json", tmp_path / "bad.json"):
        with pytest.raises(PatternError, match="HVDLOG_MESSAGES"):
            load_messages(path)


def test_the_any_level_gate_finds_what_one_of_its_rules_finds() -> None:
    """hvdlog/parse/evidence_rules.py searches an info line once, with the any-level rules' patterns
    joined: on every line and every multi-line block of the real-world consoles (and the
    rules' own evidence lines), the gate finds a message exactly when one rule's pattern does."""
    from hvdlog.parse.evidence_rules import _any_level_gate, _any_level_rules

    gate = _any_level_gate()
    assert gate is not None
    realworld = Path(__file__).resolve().parents[1] / "corpus" / "realworld"
    texts = [text for path in sorted(realworld.glob("*/*.log")) for text in path.read_text(errors="replace").split("\n\n")]
    texts += [line for text in texts for line in text.splitlines()]
    texts += ["Terminating remaining workers after failure of Process 3.", "  Process name: [[50371,1],0]",
              "worker-2 has been removed from elastic job", "Process 3 exit with status code 1."]
    found = [text for text in texts if any(rule.pattern.search(text) is not None for rule in _any_level_rules() if rule.pattern)]
    assert len(found) >= 4
    assert [text for text in texts if gate.search(text) is not None] == found

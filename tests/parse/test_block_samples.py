"""The block grammar's own examples (hvdlog/parse/assets/blocks.json: each row's ``samples``, which
it must take, and ``misses``, near-misses it must not take, as lnav's format files carry theirs):
every row has them, and hvdlog's Python reading (hvdlog/parse/blocks.py) and the ruby filter's
(logstash/pipeline/horovod_native/blocks.rb, in JRuby) answer every one alike, down to how the
lines group into documents.

A sample or a miss is a line (a row that opens a block, or a ``classify`` row), or a short
sequence of a stream's lines read from the start: ``at`` (default: the last) is the line the row
must take, first of its kind -- the opener that begins a block with it, or the first rule of its
state that continues the block with it -- or, for a miss, must not take (a state rule's block
is in the rule's state then); ``blocks`` is the [first, last] of each document the lines make.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from corpus.tools_required import installed, jdk_tool

from hvdlog.parse.blocks import BLOCKS_FILE, grammar, header_follows, load_blocks, segments, walk
from hvdlog.parse.messages import MESSAGES_FILE
from hvdlog.parse.patterns import PATTERN_FILE

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "logstash" / "pipeline" / "horovod_native.rb"
RUBY_SAMPLES = ROOT / "tests" / "support" / "ruby" / "run_block_samples.rb"


class Case(NamedTuple):
    """One sample or miss of one row of blocks.json."""

    part: str  # "core_opens", "opens", "states" or "classify"
    name: str  # the row's name (a classify row: `<state>[<index>]`)
    state: str | None  # a state rule's state; a classify row's block state; else None
    index: int  # the row's position in its list
    lines: tuple[str, ...]
    at: int
    blocks: tuple[tuple[int, int], ...] | None  # None: a classify row's text (no lines to group)
    sample: bool


def _rows(data: dict[str, Any]) -> list[tuple[str, str, str | None, int, dict[str, Any]]]:
    """(part, name, state, index, row) of every row that takes lines, in file order."""
    rows = [("core_opens", row["name"], None, index, row) for index, row in enumerate(data["core_opens"])]
    rows += [("opens", row["name"], None, index, row) for index, row in enumerate(data["opens"])]
    rows += [("states", row["name"], state, index, row) for state, own in data["states"].items() for index, row in enumerate(own)]
    rows += [("classify", f"{state}[{index}]", state, index, row) for state, own in data["classify"].items() for index, row in enumerate(own)]
    return rows


def _case(part: str, name: str, state: str | None, index: int, item: Any, sample: bool) -> Case:
    where = f"{name}: {'sample' if sample else 'miss'} {item!r:.80}"
    if isinstance(item, str):
        if part == "states":
            raise ValueError(f"{where}: a state rule's example is lines from a stream's start, {{\"lines\": [...], \"blocks\": [...]}}")
        return Case(part, name, state, index, (item,), 0, None if part == "classify" else ((0, 0),), sample)
    if part == "classify" or not isinstance(item, dict) or set(item) - {"lines", "at", "blocks"} or "lines" not in item or "blocks" not in item:
        raise ValueError(f"{where}: an example is a line, or {{\"lines\": [...], \"at\": n, \"blocks\": [[first, last], ...]}}")
    lines = tuple(item["lines"])
    at = item.get("at", len(lines) - 1)
    if not 0 <= at < len(lines):
        raise ValueError(f"{where}: `at` {at} is not a line of it")
    return Case(part, name, state, index, lines, at, tuple(tuple(pair) for pair in item["blocks"]), sample)


def cases(path: Path = BLOCKS_FILE) -> list[Case]:
    """Every sample and miss of every row, in file order."""
    return [
        _case(part, name, state, index, item, sample)
        for part, name, state, index, row in _rows(load_blocks(path))
        for sample, key in ((True, "samples"), (False, "misses"))
        for item in row.get(key, [])
    ]


def unexampled(path: Path = BLOCKS_FILE) -> list[str]:
    """The rows that lack a sample, or a miss although one can exist (a rule with no condition
    takes every line), or share a name: one sentence each."""
    problems = []
    rows = _rows(load_blocks(path))
    names = [name for _, name, _, _, _ in rows]
    problems += [f"{name}: two rows have this name" for name in sorted({name for name in names if names.count(name) > 1})]
    for part, name, _, _, row in rows:
        if not row.get("samples"):
            problems.append(f"{name}: no sample (`samples`: what the row must take)")
        if not row.get("misses") and not (part == "states" and not row["when"]):
            problems.append(f"{name}: no near-miss (`misses`: what the row must not take)")
    return problems


def python_answer(case: Case) -> dict[str, Any]:
    """How hvdlog parse's reading of blocks.json takes a case: what took its line (`taken`), the
    block's state before it, whether the case's own row takes it (`own`), and the documents."""
    rules = grammar()
    if case.part == "classify":
        rows = rules.classify[case.state or ""]
        first = next((index for index, (pattern, _) in enumerate(rows) if pattern.match(case.lines[0]) is not None), None)
        return {"taken": first, "own": rows[case.index][0].match(case.lines[0]) is not None}
    lines = list(case.lines)
    step = list(walk(lines))[case.at]
    line = lines[case.at]
    if case.part == "opens":
        opener = rules.opens[case.index]
        own: bool | None = opener.opens(line) and header_follows(opener, line)
    elif case.part == "core_opens":
        own = step.kind == "open" and step.name == case.name
    else:
        rule = rules.states[case.state or ""][case.index]
        own = rule.holds(line, step.previous, step.blank_before) if step.state == case.state else None
    return {
        "taken": step.name if step.kind in ("open", "continue", "hold") else None,
        "state": step.state,
        "own": own,
        "blocks": [[first, last] for _, first, last in segments(lines)],
    }


def wrong_answers(all_cases: list[Case], answers: list[dict[str, Any]], engine: str) -> list[str]:
    """The cases an engine answered wrong, each as a sentence naming the row."""
    assert len(answers) == len(all_cases) > 0
    wrong = []
    for case, answer in zip(all_cases, answers, strict=True):
        said = f"{engine}: {case.name} {'sample' if case.sample else 'miss'} {list(case.lines) if len(case.lines) > 1 else case.lines[0]!r}"
        if case.part == "classify":
            if case.sample and answer["taken"] != case.index:
                wrong.append(f"{said} is taken by row {answer['taken']}, not its own")
            if not case.sample and answer["own"]:
                wrong.append(f"{said} matches the row")
            continue
        state = case.state if case.part == "states" else None
        if answer["state"] != state:
            wrong.append(f"{said}: the block is in state {answer['state']!r} before line {case.at}, not the row's {state!r}")
        elif case.sample and answer["taken"] != case.name:
            wrong.append(f"{said}: line {case.at} is taken by {answer['taken']!r}")
        elif not case.sample and answer["own"]:
            wrong.append(f"{said}: the row takes line {case.at}")
        if [tuple(pair) for pair in answer["blocks"]] != list(case.blocks or ()):
            wrong.append(f"{said}: documents {answer['blocks']}, not {[list(pair) for pair in case.blocks or ()]}")
    return wrong


class TestExamples:
    def test_every_row_has_examples(self) -> None:
        """Each opener, state rule and classify row of the shipped file carries a sample and a
        near-miss (none only for a rule with no condition: it takes every line)."""
        assert len(cases()) >= 120
        problems = unexampled()
        assert not problems, "\n".join(problems)

    def test_python_answers_them(self) -> None:
        """hvdlog parse's reading (hvdlog/parse/blocks.py) takes every sample by its own row, first,
        no miss by its row, and groups every example's lines as written."""
        all_cases = cases()
        wrong = wrong_answers(all_cases, [python_answer(case) for case in all_cases], "Python")
        assert not wrong, "\n".join(wrong)

    def test_a_row_without_examples_is_named(self, tmp_path: Path) -> None:
        """A row without samples, or without a near-miss where one can exist, fails the check by name."""
        data = load_blocks()
        data["opens"][0].pop("misses")
        data["states"]["stall"][0].pop("samples")
        data["states"]["traceback"][-1].pop("samples")  # exception_line: no condition, no miss needed
        data["classify"]["terminate"][0].pop("misses")
        path = tmp_path / "blocks.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        assert unexampled(path) == [
            "traceback_start: no near-miss (`misses`: what the row must not take)",
            "stall_ranks_title: no sample (`samples`: what the row must take)",
            "exception_line: no sample (`samples`: what the row must take)",
            "terminate[0]: no near-miss (`misses`: what the row must not take)",
        ]

    def test_a_wrong_example_is_named(self) -> None:
        """A sample another row takes first, a miss its row takes, a miss in another state and a
        wrong grouping are each reported with the row."""
        made = [
            Case("opens", "headless_frame", None, 8, ("Traceback (most recent call last):",), 0, ((0, 0),), True),
            Case("states", "frame", "traceback", 0, ("Traceback (most recent call last):", "  x = 1"), 1, ((0, 1),), False),
            Case("states", "stall_rank", "stall", 1, ("epoch 1", "0: [allreduce.a]"), 1, ((0, 0), (1, 1)), False),
            Case("opens", "traceback_start", None, 0, ("Traceback (most recent call last):", "epoch 1"), 0, ((0, 0), (1, 1)), True),
        ]
        assert wrong_answers(made, [python_answer(case) for case in made], "Python") == [
            "Python: headless_frame sample 'Traceback (most recent call last):': line 0 is taken by 'traceback_start'",
            "Python: frame miss ['Traceback (most recent call last):', '  x = 1']: the row takes line 1",
            "Python: stall_rank miss ['epoch 1', '0: [allreduce.a]']: the block is in state None before line 1, not the row's 'stall'",
            "Python: traceback_start sample ['Traceback (most recent call last):', 'epoch 1']: documents [[0, 1]], not [[0, 0], [1, 1]]",
        ]

    @pytest.mark.parametrize(
        ("row", "item", "message"),
        [
            ("states", "  x = 1", "a state rule's example is lines"),
            ("opens", {"lines": ["Traceback (most recent call last):"]}, "an example is a line, or"),
            ("opens", {"lines": ["x"], "at": 3, "blocks": [[0, 0]]}, "`at` 3 is not a line of it"),
        ],
    )
    def test_malformed_examples_are_refused(self, tmp_path: Path, row: str, item: Any, message: str) -> None:
        """An example that is no line or no lines with their documents fails with the row's name."""
        data = load_blocks()
        target = data["states"]["traceback"][0] if row == "states" else data["opens"][0]
        target["samples"].append(item)
        path = tmp_path / "blocks.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            cases(path)


@pytest.mark.jvm
class TestInRuby:
    def test_ruby_filter_answers_them(self) -> None:
        """The ruby filter's reading (horovod_native/blocks.rb: `opens?`, `header_follows?`,
        `step`, `holds?`, `segments`, the first line's `stall_header?` as native.rb's `pieces_of`
        asks it, `@classify`) answers every case as Python does, and as the file says."""
        jruby = installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")
        all_cases = cases()
        params = {"patterns_file": str(PATTERN_FILE), "messages_file": str(MESSAGES_FILE), "blocks_file": str(BLOCKS_FILE)}
        result = subprocess.run(
            [jdk_tool("java"), "-jar", jruby, "--dev", str(RUBY_SAMPLES), str(SCRIPT), json.dumps(params)],
            input=json.dumps([case._asdict() for case in all_cases]),
            capture_output=True, text=True, check=False, timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        answers = [json.loads(line) for line in result.stdout.splitlines()]
        wrong = wrong_answers(all_cases, answers, "ruby filter")
        assert not wrong, "\n".join(wrong)

"""The grok pattern file's own examples (hvdlog/parse/assets/patterns/horovod: the `#+` samples and
`#-` near-misses above each definition, as lnav's format files carry theirs): every definition has
them, and hvdlog's Python translation, Logstash's grok and the ruby filter's expansion (JRuby)
answer every one alike. A case is matched as grok matches: a search anywhere in the text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest
from corpus.tools_required import installed, jdk_tool
from support.grok import run_logstash

from hvdlog.parse.patterns import PATTERN_FILE, PatternError, compile_pattern, load_definitions, load_samples

ROOT = Path(__file__).resolve().parents[2]
PATTERNS_RB = ROOT / "logstash" / "pipeline" / "horovod_native" / "patterns.rb"
RUBY_SAMPLES = ROOT / "tests" / "support" / "ruby" / "run_pattern_samples.rb"


class Case(NamedTuple):
    """One example of one definition: a sample (``sample``) or a near-miss."""

    name: str
    text: str
    sample: bool


def example_cases(path: Path = PATTERN_FILE) -> list[Case]:
    """Every sample and near-miss of every definition, in file order."""
    return [
        Case(name, text, sample)
        for name, own in load_samples(path).items()
        for sample, texts in ((True, own.samples), (False, own.misses))
        for text in texts
    ]


def unexampled(path: Path) -> list[str]:
    """The definitions that lack a sample, or a near-miss although one can exist (a definition
    that matches the empty text matches every text somewhere): one sentence each."""
    examples = load_samples(path)
    problems = []
    for name in load_definitions(path):
        own = examples[name]
        if not own.samples:
            problems.append(f"{name}: no sample (a `#+ \"text\"` line right above it)")
        if not own.misses and compile_pattern(name, path).regex.search("") is None:
            problems.append(f"{name}: no near-miss (a `#- \"text\"` line right above it)")
    return problems


def wrong_answers(cases: list[Case], matches: list[bool], engine: str) -> list[str]:
    """The cases an engine answered wrong, each as a sentence naming the definition."""
    assert len(matches) == len(cases) > 0
    return [
        f"{engine}: {case.name} {'does not match its sample' if case.sample else 'matches its near-miss'} {case.text!r}"
        for case, matched in zip(cases, matches, strict=True) if matched != case.sample
    ]


class TestExamples:
    def test_every_definition_has_examples(self) -> None:
        """Each definition of the shipped file carries a sample and a near-miss (none only where
        none can exist: HOROVOD_REST and the like match the empty text)."""
        assert len(load_samples()) == len(load_definitions()) >= 100
        problems = unexampled(PATTERN_FILE)
        assert not problems, "\n".join(problems)

    def test_python_translation_answers_them(self) -> None:
        """hvdlog's translation (hvdlog/parse/patterns.py) finds every sample and no near-miss."""
        cases = example_cases()
        matches = [compile_pattern(case.name).regex.search(case.text) is not None for case in cases]
        wrong = wrong_answers(cases, matches, "Python")
        assert not wrong, "\n".join(wrong)

    def test_a_definition_without_examples_is_named(self, tmp_path: Path) -> None:
        """A new definition without samples, or without a near-miss, fails the check by name."""
        path = tmp_path / "patterns"
        path.write_text('#+ "42"\n#- "x"\nHOROVOD_INT \\d+\nHOROVOD_BARE \\d+x\n#+ "7"\nHOROVOD_HALF %{HOROVOD_INT}\n'
                        '#+ "any"\nHOROVOD_REST [^\\n]*\n', encoding="utf-8")
        assert unexampled(path) == [
            'HOROVOD_BARE: no sample (a `#+ "text"` line right above it)',
            'HOROVOD_BARE: no near-miss (a `#- "text"` line right above it)',
            'HOROVOD_HALF: no near-miss (a `#- "text"` line right above it)',
        ]

    def test_a_wrong_example_is_named(self, tmp_path: Path) -> None:
        """A sample the definition misses and a near-miss it matches are both reported."""
        path = tmp_path / "patterns"
        path.write_text('#+ "forty-two"\n#- "42"\nHOROVOD_INT \\d+\n', encoding="utf-8")
        cases = example_cases(path)
        matches = [compile_pattern(case.name, path).regex.search(case.text) is not None for case in cases]
        assert wrong_answers(cases, matches, "Python") == [
            "Python: HOROVOD_INT does not match its sample 'forty-two'", "Python: HOROVOD_INT matches its near-miss '42'",
        ]

    def test_examples_escape_what_a_line_cannot_hold(self, tmp_path: Path) -> None:
        """Each example is one JSON string: a tab, a carriage return, a line break survive."""
        path = tmp_path / "patterns"
        path.write_text('#+ "a\\tb\\r\\nc "\n#- "ab"\nHOROVOD_X a\\tb\n', encoding="utf-8")
        assert load_samples(path)["HOROVOD_X"].samples == ("a\tb\r\nc ",)
        assert load_definitions(path) == {"HOROVOD_X": "a\\tb"}

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ('#+ "1"\n\nHOROVOD_INT \\d+\n', ":1: samples must sit right above"),
            ('#+ "1"\n# a comment\nHOROVOD_INT \\d+\n', ":1: samples must sit right above"),
            ('#+ 1\nHOROVOD_INT \\d+\n', ":1: a sample line is"),
            ('HOROVOD_INT \\d+\n#-\n', ":2: a sample line is"),
            ('HOROVOD_INT \\d+\n#- "x"\n', ":2: samples at the end of the file belong to no definition"),
        ],
    )
    def test_misplaced_examples_are_refused(self, tmp_path: Path, text: str, message: str) -> None:
        """An example that belongs to no definition, or is no JSON string, fails with the line."""
        path = tmp_path / "patterns"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(PatternError, match=message):
            load_samples(path)


@pytest.mark.jvm
class TestInRuby:
    def test_logstash_grok_answers_them(self) -> None:
        """Logstash's grok (tests/support/grok/logstash_grok.rb under JRuby: jls-grok's loader, which
        skips the `#` example lines, its expansion and Regexp::MULTILINE) finds every sample and no
        near-miss, searching the whole text as the grok filter does."""
        cases = example_cases()
        answers = run_logstash([(case.name, case.text) for case in cases])
        wrong = wrong_answers(cases, [answer["match"] for answer in answers], "Logstash grok")
        assert not wrong, "\n".join(wrong)

    def test_ruby_filter_answers_them(self) -> None:
        """The ruby filter's own expansion (logstash/pipeline/horovod_native/patterns.rb) agrees."""
        jruby = installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")
        cases = example_cases()
        result = subprocess.run(
            [jdk_tool("java"), "-jar", jruby, "--dev", str(RUBY_SAMPLES), str(PATTERNS_RB), str(PATTERN_FILE)],
            input=json.dumps([{"name": case.name, "text": case.text} for case in cases]),
            capture_output=True, text=True, check=False, timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        matches = [json.loads(line)["match"] for line in result.stdout.splitlines()]
        wrong = wrong_answers(cases, matches, "ruby filter")
        assert not wrong, "\n".join(wrong)

"""The horovod-native pipeline's ruby filter (logstash/pipeline/horovod_native.rb), run in
JRuby (the Ruby Logstash 8.19 embeds) through logstash-filter-ruby's contract
(tests/support/ruby/run_filter.rb: register with script_params, filter returning arrays, one instance
shared by concurrent workers), fed with what Logstash's grok really produces, gives the
documents `hvdlog parse` gives -- every field, compared whole.

What reaches the filter is built from the corpus as Logstash would receive it: each rank's
stream joined into events by Filebeat's multiline rules (tests/support/native_events.py);
then horovod-native.conf's steps before the ruby filter, in order: the arrival-time grok and
gsub, the launcher-tag groks (with their `overwrite` and `add_field`) and gsubs, the blank
drop, the block copy and the core-line grok (`keep_empty_captures`). Every grok runs in
Logstash's grok (tests/support/grok.py, Regexp::MULTILINE); the gsub regexes are the
pattern file's *_ANY patterns (tests/stack/test_logstash_config.py checks the conf uses exactly
those). No Logstash can run here: the date filter, data_stream and tidy steps after the
ruby filter are not run, so @timestamp is not compared (tests/parse/test_parse_native.py covers time).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from corpus.cases import cases
from corpus.realworld import RealCase, answers_over, check, check_documents, library_answers, real_cases
from corpus.tools_required import installed, jdk_tool
from support import conf_regexes, evidence_samples, row_samples
from support.filebeat_emulation import excluded
from support.grok import run_logstash
from support.native_events import LAUNCHER_INPUT, events_of, numbered_streams_of, streams_of
from support.variant_expectations import case_files, expected_under, materialise
from support.variants import Variant, variants

from hvdlog.documents import expand, flatten
from hvdlog.fields import PARSE_FAILURE_TAG
from hvdlog.layout import without_launcher_copies
from hvdlog.parse import parse_lines
from hvdlog.parse.blocks import BLOCKS_FILE, MAX_DOCUMENT_BYTES, MAX_PIECES
from hvdlog.parse.jsonl import nest
from hvdlog.parse.launcher import path_fields
from hvdlog.parse.messages import MESSAGES_FILE
from hvdlog.parse.native import NativeParser
from hvdlog.parse.patterns import PATTERN_FILE, load_definitions

pytestmark = pytest.mark.jvm


ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "logstash" / "pipeline" / "horovod_native.rb"
CONF = ROOT / "logstash" / "pipeline" / "horovod-native.conf"
RUNNER = ROOT / "tests" / "support" / "ruby" / "run_filter.rb"
DEFINITIONS = load_definitions()
_TIME = DEFINITIONS["HOROVOD_LAUNCHER_TIME"]
ARRIVAL_GSUB = re.compile(DEFINITIONS["HVDLOG_ARRIVAL_PREFIX_ANY"], re.MULTILINE)
#: horovod-native.conf's tag groks, in order, and the gsubs that follow each.
_PREFIX = conf_regexes.LINE_PREFIX
TAG_STEPS = [
    ("openmpi", "HOROVOD_OPENMPI_LINE", [f"^{_PREFIX}(?:{_TIME})?{DEFINITIONS['HOROVOD_OPENMPI_TAG_ANY']}", DEFINITIONS["HOROVOD_OPENMPI_TAG_ANY"]]),
    ("gloo", "HOROVOD_GLOO_LINE", [f"^{_PREFIX}(?:{_TIME})?{DEFINITIONS['HOROVOD_GLOO_TAG_ANY']}"]),
    ("mpich", "HOROVOD_MPICH_LINE", [f"^{_PREFIX}{DEFINITIONS['HOROVOD_MPICH_TAG_ANY']}"]),
    ("srun", "HOROVOD_SRUN_LINE", [f"^{_PREFIX}{DEFINITIONS['HOROVOD_SRUN_TAG_ANY']}"]),
]
ANSI_GSUB = re.compile(DEFINITIONS["HOROVOD_ANSI_ANY"])
PROGRESS_GSUB = re.compile(conf_regexes.PROGRESS, re.MULTILINE)
COLLECTOR_GSUB = re.compile(conf_regexes.COLLECTOR_PREFIXES, re.MULTILINE)
#: horovod-native.conf's scheduler-prefix gsub of untagged events (HOROVOD_PREFIXED_CORE's regex)
SCHEDULER_GSUB = re.compile(
    f"^{DEFINITIONS['HOROVOD_PREFIX_NOT_CORE']}(?:{DEFINITIONS['HOROVOD_SCHEDULER_PREFIX']}){DEFINITIONS['HOROVOD_PREFIXED_START']}", re.MULTILINE)
TAG_OVERWRITE = ("rank", "horovod.launcher.stream")
OPENMPI_RANKS = re.compile(r"\[\d+,(\d+)\]<std")
CORE_OVERWRITE = ("message", "rank")
NATIVE_CASES = [case for case in cases() if case.log.parent.name != "horovod.app"]
REAL_CASES = real_cases()
#: Real-world cases (tests/corpus/realworld) whose expected documents the Logstash path gives;
#: raise it when a rule lands in logstash/ (it may only go up).
REALWORLD_RIGHT_THROUGH_LOGSTASH = 127
#: Per variant kind (tests/support/variants.py), the variants of the real-world cases whose
#: expected documents (as the variant keeps them) the Logstash path gives; it may only go up.
#: A variant that keeps no expected document (every wrap-*, and the cases without documents)
#: is not counted: there is nothing to check on this path.
#: Of those checked, per kind: ansi 53, crlf 61, cut-first 45, cut-last 43, interleaved 20,
#: kubectl-prefix 53, kubectl-timestamps 53, output-copy 3, torn 1, tqdm-glued 53 are all (Filebeat's
#: multiline patterns look past colour codes and tqdm's ``\r`` progress at a line's start and
#: behind its tag, blocks.json ``LEAD``). Behind a scheduler prefix the pattern file does not list
#: (ci, determined, ray, compose, syslog: 52 of 53 each), Filebeat joins an untagged line only
#: where no print starts so (blocks.json ``behind_prefix``) and the ruby filter takes the prefix
#: from the event itself; hvdlog/parse/prefixes.py learns it from neighbouring lines. A scheduler
#: prefix before a collector's (syslog, then CRI) is one prefix on both paths (HOROVOD_LINE_PREFIX,
#: HOROVOD_COLLECTOR_LINE). The one left per kind: an untagged traceback's code lines (only a
#: learned prefix tells an indented line from a prefix with blanks inside, Determined's
#: ``<>        [time] ...``).
VARIANTS_RIGHT_THROUGH_LOGSTASH: dict[str, int] = {
    "ansi": 53, "crlf": 61, "cut-first": 45, "cut-last": 43, "interleaved": 20, "output-copy": 3,
    "prefix-ci": 53, "prefix-compose": 53, "prefix-determined": 53, "prefix-kubectl-prefix": 53,
    "prefix-kubectl-timestamps": 53, "prefix-ray": 53, "prefix-syslog": 53, "torn": 1, "tqdm-glued": 53,
}

#: The answers the variants' documents are checked for, through Logstash too.
ANSWER_ASPECTS: tuple[str, ...] = ("first_failure", "stalls", "grep_error", "grep_rank")
#: Per variant kind (and the unchanged cases), how many variants' answers are right from the
#: Logstash path's documents (a floor: it may only go up). Every kind is whole but ``wrap``: a
#: terminal's wraps are joined back only where the whole console is read (hvdlog/parse/wraps.py
#: learns the width from it), and no file Filebeat reads went through a terminal (it ships the
#: ranks' own captures, never a console: test_filebeat.py ``test_no_console_is_shipped``). The
#: wrap variants are counted here so a change that breaks more of them shows.
VARIANT_ANSWERS_RIGHT_THROUGH_LOGSTASH: dict[str, int] = {
    "unchanged": 124, "ansi": 114, "crlf": 124, "cut-first": 84, "cut-last": 72, "interleaved": 37, "output-copy": 4,
    "prefix-ci": 113, "prefix-compose": 113, "prefix-determined": 113, "prefix-kubectl-prefix": 113, "prefix-kubectl-timestamps": 113,
    "prefix-ray": 113, "prefix-syslog": 113, "torn": 1, "tqdm-glued": 114, "wrap": 106,
}

@pytest.fixture(name="jruby", scope="module")
def fixture_jruby() -> str:
    """jruby-complete.jar from scripts/install-jruby.sh."""
    return installed("HVDLOG_JRUBY", "jruby-complete.jar", "install-jruby.sh")


def _run_ruby(jruby: str, script: Path, params: dict[str, Any], events: list[dict[str, Any]], *, workers: int = 1,
              heap: str | None = None) -> tuple[list[list[dict[str, Any]]], int]:
    """Each event through a ruby filter script (``heap``: the JVM's -Xmx, as Logstash's
    jvm.options sets it); the events that leave it, per input, and the run's peak heap bytes."""
    result = subprocess.run(
        [jdk_tool("java"), *([f"-Xmx{heap}"] if heap else []), "-jar", jruby, "--dev", str(RUNNER), str(script), json.dumps(params),
         "--workers", str(workers)],
        input="".join(json.dumps(event) + "\n" for event in events),
        capture_output=True, text=True, check=False, timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ruby filter exception" not in result.stderr, result.stderr[:3000]
    outputs = [json.loads(line)["events"] for line in result.stdout.splitlines()]
    assert len(outputs) == len(events)
    peak = re.search(r"peak heap bytes: (\d+)", result.stderr)
    assert peak, result.stderr[-1000:]
    return outputs, int(peak[1])


def run_filter(jruby: str, events: list[dict[str, Any]], *, chatter: str = "keep", workers: int = 1) -> list[list[dict[str, Any]]]:
    """Each event through the native ruby filter; the events that leave it, per input."""
    params = {"patterns_file": str(PATTERN_FILE), "messages_file": str(MESSAGES_FILE), "blocks_file": str(BLOCKS_FILE), "chatter": chatter}
    return _run_ruby(jruby, SCRIPT, params, events, workers=workers)[0]


def _grok_into(event: dict[str, Any], captures: dict[str, Any], overwrite: tuple[str, ...]) -> None:
    """A grok match's captures into a (flat) event, by logstash-filter-grok 4.4.4's `handle`:
    overwrite listed fields, set absent ones, append to arrays, promote strings to arrays,
    leave other existing values alone."""
    for field, value in captures.items():
        field = field.strip("[]").replace("][", ".")
        previous = event.get(field)
        if field in overwrite or previous is None:
            event[field] = value
        elif isinstance(previous, list):
            previous.append(value)
        elif isinstance(previous, str):
            event[field] = [previous, value]


class Shipped:
    """One Filebeat event: where it comes from, its text, the base fields Filebeat gave it,
    and the documents `hvdlog parse` makes of its lines."""

    def __init__(self, source: str, path: str, text: str, docs: list[dict[str, Any]], position: tuple[int, int] = (0, 0)) -> None:
        self.source = source  # a corpus case id, or realworld/<case>
        self.text = text
        self.docs = docs
        self.position = position  # (file, line) of its first line: the order of lines without a time
        self.event: dict[str, Any] = {"message": text, "log.file.path": path, **path_fields(path)}


def _events_of_file(source: str, path: str, streams: list[list[str]], timezone: str) -> Iterator[Shipped]:
    for stream in streams:
        # Logstash has no --size: the job size comes only from the log itself, on both sides.
        parser = NativeParser(timezone=timezone)
        for text in events_of(stream):
            yield Shipped(source, path, text, list(parse_lines(text.split("\n"), path=path, parser=parser)))


def _shipped() -> Iterator[Shipped]:
    for case in NATIVE_CASES:
        yield from _events_of_file(case.id, case.config["path"], streams_of(case), case.config.get("timezone", "UTC"))


def _shipped_realworld() -> Iterator[Shipped]:
    for real in REAL_CASES:
        for relative, path in real.files():
            if not _jsonl(path.name):  # JSON events: horovod-app
                yield from _events_of_file(f"realworld/{real.id}", relative, streams_of(path), real.timezone)


def _jsonl(path: str) -> bool:
    """One of our JSON events files (horovod-app): Filebeat decodes them, no grok or ruby filter."""
    return path.endswith(".jsonl") or ".jsonl." in path


def _documents_through(jruby: str, shipped: list[Shipped], jsonl: dict[str, list[tuple[str, Path]]]) -> dict[str, list[dict[str, Any]]]:
    """The documents of each source from the Logstash path: the shipped events through the
    conf's groks and the ruby filter in one run, in their lines' order in the files, plus the
    JSON events files of ``jsonl``."""
    documents: dict[str, list[dict[str, Any]]] = {}
    for item, events in sorted(_through(jruby, shipped), key=lambda pair: (pair[0].source, pair[0].position)):
        documents.setdefault(item.source, []).extend(events or [])
    for source, files in jsonl.items():
        for relative, path in files:
            documents.setdefault(source, []).extend(parse_lines(path.read_bytes().splitlines(), path=relative))
    return documents


def _without_time(expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Expected documents without @timestamp, which comes from the date filter (not run here)."""
    return [{**item, "fields": {name: value for name, value in item.get("fields", {}).items() if name != "@timestamp"}}
            for item in expected]


def _kind(variant: Variant) -> str:
    """A variant's kind: its name, one kind for every terminal width."""
    return "wrap" if variant.name.startswith("wrap-") else variant.name


def _expects(config: dict[str, Any], aspects: frozenset[str]) -> bool:
    """Whether a case's expectations hold one of ``aspects`` (no documents listed: none)."""
    return any(config.get(aspect) if aspect == "documents" else aspect in config for aspect in aspects)


def _variant_cases(folder: Path, aspects: frozenset[str] = frozenset({"documents"})) -> Iterator[tuple[str, str, RealCase]]:
    """(id, kind, case) of every variant of every real-world case that keeps expectations of
    ``aspects``, its files written under ``folder``, its expectations adjusted as test_metamorphic does."""
    for case in REAL_CASES:
        if not _expects(case.config, aspects):
            continue
        original: list[dict[str, Any]] | None = None
        for variant in variants(case.id, case_files(case)):
            if not aspects & variant.keeps:
                continue
            if variant.cut and original is None:
                original = library_answers(case, "documents")
            changed = expected_under(case, folder / case.id / variant.name, variant, original or [])
            if _expects(changed.config, aspects & variant.keeps):
                materialise(changed.folder, variant.files)
                yield f"{case.id}-{variant.name}", _kind(variant), changed


def _shipped_variant(source: str, case: RealCase) -> Iterator[Shipped]:
    """A variant's Filebeat events, each at its first line's place (its documents by hvdlog
    parse are not needed: the check is against the case's expectations, as test_metamorphic's)."""
    files = dict(case.files())
    for order, relative in enumerate(without_launcher_copies(list(files))):  # Filebeat's paths: the layout, not the copies
        if not _jsonl(relative):
            for stream in numbered_streams_of(files[relative]):
                first = 0
                for text in events_of([line for _, line in stream]):
                    yield Shipped(source, relative, text, [], (order, stream[first][0]))
                    first += text.count("\n") + 1


def _before_ruby(shipped: list[Shipped]) -> list[dict[str, Any] | None]:
    """horovod-native.conf's steps before the ruby filter (None: dropped as blank)."""
    for item in shipped:  # colour codes go first
        item.text = ANSI_GSUB.sub("", item.text)
    arrival = run_logstash([("HVDLOG_ARRIVAL_PREFIX", item.text) for item in shipped])
    texts = [PROGRESS_GSUB.sub(r"\1", ARRIVAL_GSUB.sub("", item.text)) for item in shipped]
    for item, answer, text in zip(shipped, arrival, texts, strict=True):
        _grok_into(item.event, answer["captures"], ())
        item.event["message"] = text
    tags = run_logstash([(name, text) for text in texts for _, name, _ in TAG_STEPS])
    for index, item in enumerate(shipped):
        for step, (launcher, _, _) in enumerate(TAG_STEPS):
            answer = tags[index * len(TAG_STEPS) + step]
            if answer["match"]:
                _grok_into(item.event, answer["captures"], TAG_OVERWRITE)
                item.event["horovod.launcher.format"] = launcher
                break
        item.event["message"] = COLLECTOR_GSUB.sub("", item.event["message"])
        for launcher, _, gsubs in TAG_STEPS:
            if item.event.get("horovod.launcher.format") == launcher:
                for gsub in gsubs:
                    item.event["message"] = re.sub(gsub, "", item.event["message"], flags=re.MULTILINE)
    untagged = [item for item in shipped if "horovod.launcher.format" not in item.event]
    for item, answer in zip(untagged, run_logstash([("HOROVOD_PREFIXED_CORE", item.event["message"]) for item in untagged]), strict=True):
        _grok_into(item.event, answer["captures"], ())
        item.event["message"] = SCHEDULER_GSUB.sub("", item.event["message"])
    kept = [item for item in shipped if re.search(r"\S", item.event["message"])]
    core = run_logstash([("HOROVOD_CORE_LINE", item.event["message"]) for item in kept], keep_empty=True)
    for item, answer in zip(kept, core, strict=True):
        item.event["@metadata.hvd.block"] = item.event["message"]
        _grok_into(item.event, answer["captures"], CORE_OVERWRITE)
    kept_ids = {id(item) for item in kept}
    return [nest(dict(item.event)) if id(item) in kept_ids else None for item in shipped]


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """Every field but those set after the ruby filter (time) and @metadata (never indexed)."""
    return {name: value for name, value in flatten(doc) if name != "@timestamp" and not name.startswith("@metadata")}


def _through(jruby: str, shipped: list[Shipped]) -> list[tuple[Shipped, list[dict[str, Any]] | None]]:
    inputs = _before_ruby(shipped)
    outputs = iter(run_filter(jruby, [event for event in inputs if event is not None]))
    return [(item, None if event is None else next(outputs)) for item, event in zip(shipped, inputs, strict=True)]


@pytest.fixture(name="through_filter", scope="module")
def fixture_through_filter(jruby: str) -> list[tuple[Shipped, list[dict[str, Any]] | None]]:
    """Every shipped event of the native corpus and what leaves the ruby filter (None: dropped before it)."""
    return _through(jruby, list(_shipped()))


class TestSameDocumentsAsHvdlogParse:
    def test_every_field_of_every_event(self, through_filter) -> None:
        """Each shipped event gives exactly hvdlog parse's documents (several when Filebeat
        joined lines hvdlog parse keeps apart), every field compared."""
        compared = multiline = split = 0
        differences = []
        for item, events in through_filter:
            if events is None:  # blank after prefixes and tags: hvdlog parse skips it too
                assert item.docs == [], item.text
                continue
            if len(set(OPENMPI_RANKS.findall(item.text))) > 1:
                # another rank's output cut this line on an Open MPI console: hvdlog parse re-joins
                # the pieces per rank; Filebeat ships per-rank files, where it cannot happen
                continue
            ours = [_comparable(event) for event in events]
            theirs = [_comparable(doc) for doc in item.docs]
            if ours != theirs:
                differences.append((item.source, item.text[:300], ours, theirs))
            compared += 1
            multiline += "\n" in item.text
            split += len(item.docs) > 1
        assert not differences, f"{len(differences)} differ, first: {differences[:2]}"
        assert compared > 300 and multiline >= 20 and split >= 1, (compared, multiline, split)

    def test_a_torn_core_line_is_rejoined(self, jruby: str) -> None:
        """A core line the other thread's whole core line tore (`[hdr] [hdr] line`, its rest on
        the next line): Filebeat's `match: before` joins the rest to it, and the filter gives
        hvdlog parse's documents of the whole stream: the inner line, then the outer header
        with its rest (a header whose next line is a core line, or none, is dropped in both)."""
        path = "/logs/torn/node1/rank-1.stderr.log"
        header = "[2024-02-11 09:30:01.119004: I /src/horovod/common/operations.cc:689] "
        inner = "[2024-02-11 09:30:01.119010: D /src/horovod/common/operations.cc:906] Background thread init done"
        lines = [header + inner, "[1]: Horovod initialized", "epoch 1", header + inner, header + "[1]: next", header + inner]
        shipped = list(_events_of_file("torn", path, [lines], "UTC"))
        assert [item.text.count("\n") for item in shipped] == [1, 0, 1, 0]
        ours = [_comparable(event) for _, events in _through(jruby, shipped) for event in events or []]
        theirs = [_comparable(doc) for doc in parse_lines(lines, path=path)]
        assert ours == theirs
        assert [(doc["message"], doc["log.level"]) for doc in ours[:2]] == [("Background thread init done", "debug"), ("Horovod initialized", "info")]

    def test_stalls_and_tracebacks_are_among_them(self, through_filter) -> None:
        """The comparison covers stall blocks (with core header) and tracebacks as whole events."""
        stalls = sum(
            "\n" in item.text and len(item.docs) == 1 and "stall" in item.docs[0].get("horovod", {}) for item, _ in through_filter
        )
        tracebacks = sum("Traceback (most recent call last):\n" in item.text and len(item.docs) == 1 for item, _ in through_filter)
        assert stalls >= 6 and tracebacks >= 6, (stalls, tracebacks)

    def test_stall_reports_without_their_header(self, jruby: str) -> None:
        """A capture that starts inside a stall report (its header line cut in half or lost):
        `Missing ranks:`, `Stalled ranks:` and `Stalled ops:` blocks are stall reports on both paths."""
        stream = ["ranks for more than 2 seconds. This may indicate that different ranks", "Missing ranks:",
                  "1: [allreduce.a, allreduce.b]", "epoch 2", "Stalled ranks:", "6: [horovod_allreduce.0 ...]",
                  "[2026-11-29 16:01:46.105951: I /a.cc:1] next", "Stalled ops:", "grad_0 [missing ranks: 2]", " grad_1 [missing ranks: 3]"]
        shipped = list(_events_of_file("headless-stall", "job/node1/rank-0.stderr.log", [stream], "UTC"))
        compared = [([_comparable(e) for e in events or []], [_comparable(d) for d in item.docs]) for item, events in _through(jruby, shipped)]
        assert all(ours == theirs for ours, theirs in compared), compared
        stalls = [doc for _, docs in compared for doc in docs if doc.get("event.action") == "stall"]
        assert [doc["horovod.stall.missing_ranks"] for doc in stalls] == [[1], [6], [2, 3]]


    def test_a_rank_list_without_header_or_title(self, jruby: str) -> None:
        """Issue 41: a stall report's rank lines alone (a `grep allreduce` keeps them, their header and
        title gone) are a stall report on both paths when they name Horovod's tensors; a print of the
        same shape that names none (`0: [1, 2, 3]`) is no stall; an entry cut in its list keeps its rank."""
        stream = ["epoch 1", "1: [allreduce.grad.fc1.weight, allreduce.grad.fc1.bias]", "3: [allreduce.grad.fc1.weight]",
                  "epoch 2", "0: [1, 2, 3]", "2: [DistributedAdam_Allreduce/cond_1/HorovodAllreduce_grads_0]", "5: [allred"]
        shipped = list(_events_of_file("headless-list", "job/node1/rank-0.stderr.log", [stream], "UTC"))
        compared = [([_comparable(e) for e in events or []], [_comparable(d) for d in item.docs]) for item, events in _through(jruby, shipped)]
        assert all(ours == theirs for ours, theirs in compared), compared
        stalls = [doc for _, docs in compared for doc in docs if doc.get("event.action") == "stall"]
        assert [doc["horovod.stall.missing_ranks"] for doc in stalls] == [[1, 3], [2, 5]]

    def test_an_unlisted_prefix_leaves_an_untagged_event(self, jruby: str) -> None:
        """Behind a prefix no list names (compose's ``trainer-1  | ``), an untagged event gives
        hvdlog parse's documents: the prefix found before a line the table knows leaves every
        line of the event (Hydra's box joined by Filebeat), and a line known as a whole keeps
        its text. Where the two paths differ, by design: a plain print keeps the prefix here
        (hvdlog parse learns it for the file's every line, the event has nothing to learn it
        from), and a known line behind a prefix-shaped lead alone is read as prefixed here, where
        hvdlog parse waits for a neighbour with the same prefix."""
        prefix = "trainer-1  | "
        stream = [prefix + line for line in ("Process 2 exit with status code 250.", "=   RANK 3 PID 51822 RUNNING AT p3-node1",
                                             "=   KILLED BY SIGNAL: 9 (Killed)", "epoch 3 done")]
        stream.append("NOTE: Process 2 exit with status code 250.")
        shipped = list(_events_of_file("unlisted-prefix", "job/console.log", [stream], "UTC"))
        assert [item.text.count("\n") for item in shipped] == [0, 1, 0, 0]
        ours = [_comparable(event) for _, events in _through(jruby, shipped) for event in events or []]
        theirs = [_comparable(doc) for doc in parse_lines(stream, path="job/console.log")]
        theirs[2]["message"] = prefix + theirs[2]["message"]
        assert len(ours) == len(theirs) == 4 and ours[:3] == theirs[:3]
        assert (theirs[3]["message"], theirs[3]["log.level"], ours[3]["message"], ours[3]["rank"]) == (
            "NOTE: Process 2 exit with status code 250.", "error", "Process 2 exit with status code 250.", 2)
        assert [(doc["message"].split("\n")[0], doc.get("rank"), doc.get("process.exit_code"), doc.get("event.reason")) for doc in ours] == [
            ("Process 2 exit with status code 250.", 2, 250, None), ("=   RANK 3 PID 51822 RUNNING AT p3-node1", 3, None, "SIGKILL"),
            (prefix + "epoch 3 done", None, None, None), ("Process 2 exit with status code 250.", 2, 250, None)]


#: A real job where the kernel-style SIGKILL leaves rank 1 no line of its own about it: only
#: horovodrun's console says ``Process 1 exit with status code 137.``
_KILLED_RANK = (
    "import os, signal, time, torch, hvdlog, horovod.torch as hvd\n"
    "hvdlog.configure(stall_after=None)\nhvd.init()\nhvdlog.get_logger().info('started')\n"
    "if hvd.rank() == 1:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    "hvd.allreduce(torch.ones(1), name='grad')\ntime.sleep(60)\n"
)


class TestLauncherConsole:
    def test_a_killed_rank_is_named_from_the_launchers_lines(self, jruby: str, tmp_path: Path) -> None:
        """A real ``hvdlog run -- horovodrun --gloo -np 2`` job whose rank 1 is SIGKILLed: what
        Filebeat ships of it with HVDLOG_SHIP_LAUNCHER=true (the ranks' files, and launcher.log
        without the workers' lines: shipper/filebeat.yml's own ``exclude_lines``), through the
        conf's groks and the ruby filter, gives ``first-failure``'s answer on the files: rank 1,
        by its exit status per horovodrun. Without the launcher's lines no document says it (the
        model can only infer rank 1 as the one rank that left no evidence, "likely")."""
        import os
        import sys

        from hvdlog.analyses.failures import find_first_failure
        from hvdlog.documents import sort_key
        from hvdlog.query.files import FileSource
        from hvdlog.query.spec import Filter

        env = {key: value for key, value in os.environ.items() if key not in ("HVDLOG_JOB", "HVDLOG_ROOT")}
        done = subprocess.run([sys.executable, "-m", "hvdlog", "run", "--root", str(tmp_path), "--job", "killed", "--",
                               "horovodrun", "--gloo", "-np", "2", sys.executable, "-c", _KILLED_RANK],
                              capture_output=True, text=True, timeout=240, check=False, env=env)
        assert done.returncode != 0, done.stderr[-2000:]
        shipped, jsonl = [], []
        files = sorted(path for path in (tmp_path / "killed").rglob("*") if path.is_file())
        for order, path in enumerate(files):
            relative = str(path.relative_to(tmp_path))
            if _jsonl(path.name):
                jsonl.append((relative, path))
                continue
            first = 0
            for text in events_of(path.read_text().splitlines()):
                if not (path.name == "launcher.log" and excluded(LAUNCHER_INPUT, text)):
                    shipped.append(Shipped("killed", relative, text, [], (order, first)))
                first += text.count("\n") + 1
        documents = _documents_through(jruby, shipped, {"killed": jsonl})["killed"]

        def reports(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            def search(spec: Filter, last: int | None = None) -> list[dict[str, Any]]:
                return sorted((doc for doc in docs if spec.matches(doc)), key=sort_key)

            return [report.to_json() for report in find_first_failure(search, Filter())]

        on_files = [report.to_json() for report in find_first_failure(FileSource([tmp_path / "killed"]).search, Filter())]
        through = reports(documents)
        assert [report["blamed_ranks"] for report in on_files] == [[1]], on_files
        assert [report["blamed_ranks"] for report in through] == [[1]], through
        assert "137" in through[0]["reasoning"] and "horovodrun" in through[0]["reasoning"], through[0]["reasoning"]
        without = [doc for doc in documents if "launcher.log" not in str(doc.get("log", {}).get("file", {}).get("path", doc.get("log.file.path")))]
        assert not any("status code 137" in str(doc.get("message")) for doc in without)


class TestRealWorld:
    def test_expected_documents_through_logstash(self, jruby: str) -> None:
        """The real-world cases' expected documents (tests/corpus/realworld), from the Logstash
        path: Filebeat's events through the conf's groks and the ruby filter."""
        jsonl = {f"realworld/{real.id}": [(relative, path) for relative, path in real.files() if _jsonl(path.name)] for real in REAL_CASES}
        documents = _documents_through(jruby, list(_shipped_realworld()), jsonl)
        problems = {real.id: check_documents(_without_time(real.config.get("documents") or []), documents.get(f"realworld/{real.id}", []))
                    for real in REAL_CASES}
        right = sorted(case for case, found in problems.items() if not found)
        print(f"real-world documents through Logstash: {len(right)}/{len(problems)} right")
        for case, found in problems.items():
            for problem in found:
                print(f"  {case}: {problem}")
        assert len(right) >= REALWORLD_RIGHT_THROUGH_LOGSTASH, {case: found for case, found in problems.items() if found}


class TestVariants:
    def test_variants_through_logstash(self, jruby: str, tmp_path: Path) -> None:
        """Every metamorphic variant (tests/support/variants.py) of every real-world case, from
        the Logstash path -- all in one batch through the grok harness and one JRuby run -- gives the expected documents
        the variant keeps (adjusted as tests/query/test_metamorphic.py adjusts them). Counted per
        kind against VARIANTS_RIGHT_THROUGH_LOGSTASH: the Python path learns a scheduler prefix
        from neighbouring lines and joins wrapped lines; Logstash reads each event alone."""
        made = list(_variant_cases(tmp_path))
        documents = _variants_documents(jruby, made)
        _hold_floors(made, lambda source, case: check_documents(_without_time(case.config["documents"]), documents.get(source, [])),
                     VARIANTS_RIGHT_THROUGH_LOGSTASH, "expected documents")

    def test_variant_answers_through_logstash(self, jruby: str, tmp_path: Path) -> None:
        """Every variant's ``first-failure``, ``stalls`` and ``grep`` answers (the ones it keeps,
        adjusted as test_metamorphic adjusts them), from the documents the Logstash path makes
        of it, by the library calls the commands make. Logstash's date filter cannot run here
        (ARCHITECTURE.md), so a native document has no time and keeps its line's place in the
        file, as the Python path orders lines without a time; JSON events keep their own.
        The unchanged cases too. Counted per kind against VARIANT_ANSWERS_RIGHT_THROUGH_LOGSTASH."""
        unchanged = [(case.id, "unchanged", case) for case in REAL_CASES if _expects(case.config, frozenset(ANSWER_ASPECTS))]
        made = [*unchanged, *_variant_cases(tmp_path, frozenset(ANSWER_ASPECTS))]
        documents = _variants_documents(jruby, made)

        def problems(source: str, case: RealCase) -> list[str]:
            return [f"{aspect}: {problem}" for aspect in ANSWER_ASPECTS if aspect in case.config
                    for problem in check(case, aspect, answers_over(documents.get(source, []), case, aspect))]

        _hold_floors(made, problems, VARIANT_ANSWERS_RIGHT_THROUGH_LOGSTASH, "answers")


def _variants_documents(jruby: str, made: list[tuple[str, str, RealCase]]) -> dict[str, list[dict[str, Any]]]:
    """Each variant's documents from the Logstash path, all variants in one run."""
    shipped = [item for source, _, case in made for item in _shipped_variant(source, case)]
    jsonl = {source: [(r, p) for r, p in case.files() if _jsonl(p.name)] for source, _, case in made}
    return _documents_through(jruby, shipped, jsonl)


def _hold_floors(made: list[tuple[str, str, RealCase]], problems: Callable[[str, RealCase], list[str]], floors: dict[str, int],
                 what: str) -> None:
    """Count, per kind, the variants without a problem, print the counts and the wrong ones, and
    hold every kind to its floor (a kind without a floor fails too)."""
    right: dict[str, list[str]] = {}
    wrong: dict[str, list[str]] = {}
    for source, kind, case in made:
        (wrong if problems(source, case) else right).setdefault(kind, []).append(source)
        right.setdefault(kind, [])
    print(f"variants' {what} through Logstash, per kind (right/checked):")
    for kind in sorted(right):
        print(f"  {kind}: {len(right[kind])}/{len(right[kind]) + len(wrong.get(kind, []))}", *wrong.get(kind, []))
    assert set(right) <= set(floors), sorted(set(right) - set(floors))
    short = [f"{kind}: {len(right.get(kind, []))} right, floor {floor}; wrong: {' '.join(wrong.get(kind, []))}"
             for kind, floor in floors.items() if len(right.get(kind, [])) < floor]
    assert not short, "\n".join(short)


def _ruby_gsub(jruby: str, tmp_path: Path, regex: str, by: str, texts: list[str]) -> list[str]:
    """Each text after ``String#gsub(Regexp.new(regex), by)`` in JRuby, as a mutate gsub does."""
    script = tmp_path / "gsub.rb"
    script.write_text("def register(params)\n  @regex = Regexp.new(params['regex'])\n  @by = params['by']\nend\n"
                      "def filter(event)\n  event.set('message', event.get('message').gsub(@regex, @by))\n  [event]\nend\n")
    outputs, _ = _run_ruby(jruby, script, {"regex": regex, "by": by}, [{"message": text} for text in texts])
    return [events[0]["message"] for events in outputs]


class TestFilterContract:
    def test_chatter_sampled_per_stream_by_concurrent_workers(self, jruby: str) -> None:
        """sample=N keeps exactly one in N chatter lines of each stream, with 4 workers sharing
        the one instance (an unsynchronised counter loses counts), and never a W line."""
        chatter = "Sent 1 messages to coordinator."
        events = []
        for rank in range(4):
            for _ in range(200):
                events.append({"message": chatter, "rank": rank, "@metadata": {"hvd": {"level": "D", "block": chatter}}})
        events.append({"message": chatter, "rank": 0, "@metadata": {"hvd": {"level": "W", "block": chatter}}})
        outputs = run_filter(jruby, events, chatter="sample=10", workers=4)
        kept = [event for events_out in outputs for event in events_out]
        by_rank = {rank: sum(event["rank"] == rank and event["log"]["level"] == "debug" for event in kept) for rank in range(4)}
        assert by_rank == {0: 20, 1: 20, 2: 20, 3: 20}
        assert outputs[-1][0]["log"]["level"] == "warning"
        dropped = run_filter(jruby, events, chatter="drop", workers=2)
        assert sum(map(len, dropped)) == 1

    def test_progress_gsub_in_ruby(self, jruby: str, tmp_path: Path) -> None:
        """The conf's progress gsub, the one that puts its group 1 (the tag) back, does in Ruby
        (mutate's ``String#gsub(Regexp.new(needle), replacement)``) what the harness does with
        Python's ``re.sub``: only what follows each line's last ``\\r`` stays, behind its tag."""
        regex, by = re.search(r'id => "native_strip_progress"\s+gsub => \["message", "([^"]+)", "([^"]*)"\]', CONF.read_text(encoding="utf-8")).groups()
        bar = " 45%|####5     | 45/100 [00:12<00:15,  3.61it/s]\r"
        texts = [f"[1,0]<stderr>:{bar}Traceback (most recent call last):\n[1,0]<stderr>:{bar}{bar}  File \"t.py\", line 1",
                 f"{bar}Thu Aug 29 21:45:09 2019[2]<stderr>:terminate called", f"ci || [3]<stdout>:{bar}epoch 1",
                 f"{bar}2020-01-15 22:44:33 UTC master.0 -- [1,0]<stderr>:Stalled ranks:", f"2: {bar}x\nno progress\r",
                 f"{bar}[2024-02-11 09:30:01.118911: I a.cc:689] [0]: Horovod initialized"]
        ruby = _ruby_gsub(jruby, tmp_path, regex, by, texts)
        assert ruby == [PROGRESS_GSUB.sub(r"\1", text) for text in texts]
        assert ruby[:3] == ["[1,0]<stderr>:Traceback (most recent call last):\n[1,0]<stderr>:  File \"t.py\", line 1",
                            "Thu Aug 29 21:45:09 2019[2]<stderr>:terminate called", "ci || [3]<stdout>:epoch 1"]

    def test_collector_gsub_in_ruby(self, jruby: str, tmp_path: Path) -> None:
        """The conf's collector-prefix gsub removes, from every line, a collector's prefix and a
        scheduler's right before it (syslog over a CRI file), in Ruby as in the harness."""
        regex, by = re.search(r'id => "native_strip_collector_prefix"\s+gsub => \["message", "([^"]+)", "([^"]*)"\]', CONF.read_text(encoding="utf-8")).groups()
        cri = "2021-03-02T10:11:40.552011873Z stderr F "
        texts = [(f"Mar  4 05:06:02 node07 python3[4321]: {cri}[1]<stderr>:Traceback (most recent call last):\n"
                  f"Mar  4 05:06:03 node07 python3[4321]: {cri}[1]<stderr>:  File \"t.py\", line 1"),
                 f"[pod/w-0/c] {cri}Process 1 exit with status code 1.", "job: ERROR: 2021-03-02 not a collector's prefix"]
        ruby = _ruby_gsub(jruby, tmp_path, regex, by, texts)
        assert ruby == [COLLECTOR_GSUB.sub("", text) for text in texts]
        assert ruby == ['[1]<stderr>:Traceback (most recent call last):\n[1]<stderr>:  File "t.py", line 1',
                        "Process 1 exit with status code 1.", texts[-1]]

    def test_a_failing_script_is_tagged_not_lost(self, jruby: str, tmp_path: Path) -> None:
        """The runner follows the ruby filter: an exception tags the event _rubyexception and
        keeps it; a non-array return is an exception (so the checks above can fail)."""
        broken = tmp_path / "broken.rb"
        broken.write_text("def filter(event)\n  event\nend\n")
        result = subprocess.run(
            [jdk_tool("java"), "-jar", jruby, "--dev", str(RUNNER), str(broken), "{}"],
            input='{"message": "x"}\n', capture_output=True, text=True, check=False, timeout=300,
        )
        assert json.loads(result.stdout)["events"] == [{"message": "x", "tags": ["_rubyexception"]}]
        assert "did not return an array" in result.stderr

    def test_parse_failures_are_tagged(self, through_filter) -> None:
        """Broken lines are kept with the parse-failure tag, prints are not tagged: as hvdlog parse does."""
        tagged = sum(PARSE_FAILURE_TAG in (event.get("tags") or []) for _, events in through_filter for event in events or [])
        expected = sum(PARSE_FAILURE_TAG in (doc.get("tags") or []) for item, _ in through_filter for doc in item.docs)
        assert tagged == expected and tagged >= 1


class TestGrammar:
    def test_row_samples(self, jruby: str) -> None:
        """The message table's samples and near-misses, answered by the ruby filter's rows: each
        sample taken by its own row and no earlier one, no near-miss matching its row (the same
        cases as tests/parse/test_parse_messages.py::TestTable::test_rows_carry_their_samples)."""
        params = {"patterns_file": str(PATTERN_FILE), "messages_file": str(MESSAGES_FILE), "blocks_file": str(BLOCKS_FILE)}
        items = [{"row": case.row, "line": case.line, "given": case.given} for case in row_samples.cases()]
        result = subprocess.run(
            [jdk_tool("java"), "-jar", jruby, "--dev", str(ROOT / "tests" / "support" / "ruby" / "run_samples.rb"), str(SCRIPT), json.dumps(params)],
            input=json.dumps(items), capture_output=True, text=True, check=False, timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        answers = [(found["first"], found["own"]) for found in map(json.loads, result.stdout.splitlines())]
        assert len(answers) == len(items) > 0
        wrong = row_samples.wrong_answers(answers)
        assert not wrong, "\n".join(wrong)

    def test_evidence_samples(self, jruby: str) -> None:
        """The evidence rules' sample documents and near-misses, answered by the ruby filter's rules
        (horovod_native/evidence_rules.rb `evidence_of`, `classify_all`): each sample classified by
        its own rule and no earlier one, with the same kind, source and rank, no near-miss matching
        its rule (the same cases as tests/parse/test_parse_messages.py::TestTable::test_evidence_rules_carry_their_samples)."""
        params = {"patterns_file": str(PATTERN_FILE), "messages_file": str(MESSAGES_FILE), "blocks_file": str(BLOCKS_FILE)}
        all_cases = evidence_samples.cases()
        items = [{"row": case.row, "doc": expand(case.doc)} for case in all_cases]
        result = subprocess.run(
            [jdk_tool("java"), "-jar", jruby, "--dev", str(ROOT / "tests" / "support" / "ruby" / "run_evidence_samples.rb"), str(SCRIPT), json.dumps(params)],
            input=json.dumps(items), capture_output=True, text=True, check=False, timeout=600,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        answers = [json.loads(line) for line in result.stdout.splitlines()]
        wrong = evidence_samples.wrong_answers(all_cases, answers, "ruby filter")
        assert not wrong, "\n".join(wrong)


WARNING = "UserWarning: torch.distributed.reduce_op is deprecated, please use torch.distributed.ReduceOp instead (warning call {:06d})"
DEAD_LETTER = ROOT / "logstash" / "pipeline" / "dead_letter.rb"


class TestBounds:
    """One huge Filebeat event costs memory linear in its size and leaves at most
    MAX_PIECES events, each at most MAX_DOCUMENT_BYTES of text (hvdlog/parse/assets/blocks.json)."""

    @pytest.mark.parametrize("count", [4_000, 50_000])
    def test_warning_flood_in_a_1g_heap(self, jruby: str, count: int) -> None:
        """Consecutive `...Warning:` lines, which Filebeat's multiline joins into one event
        (the 4,000-line one is ~480 KB), go through the filter in Logstash's default 1 GB heap
        with the runner's Event that deep-copies on clone as Logstash's does (it ran out of
        memory: every piece cloned the whole block), and give hvdlog parse's documents; past
        the piece cap, one summary counts the rest."""
        path = "/logs/flood/node1/rank-0.stderr.log"
        lines = [WARNING.format(number) for number in range(count)]
        text = "\n".join(lines)
        assert count != 4_000 or 470_000 < len(text) < 500_000
        event = nest({"message": text, "log.file.path": path, **path_fields(path), "@metadata.hvd.block": text})
        [out], peak = _run_ruby(jruby, SCRIPT, {"patterns_file": str(PATTERN_FILE), "messages_file": str(MESSAGES_FILE),
                                                "blocks_file": str(BLOCKS_FILE)}, [event], heap="1g")
        print(f"{count} lines ({len(text)} bytes): {len(out)} events, peak heap {peak / 2**20:.0f} MiB")
        assert peak < 900 * 2**20
        theirs = [_comparable(doc) for doc in parse_lines(lines, path=path)]
        ours = [_comparable(doc) for doc in out]
        kept = min(len(theirs), MAX_PIECES - 1)
        assert ours[:kept] == theirs[:kept]
        if len(theirs) <= MAX_PIECES:
            assert len(ours) == len(theirs)
            return
        assert len(ours) == MAX_PIECES
        summary = ours[-1]
        assert summary["hvdlog.truncated.documents"] == len(theirs) - kept
        assert "_hvdlog_truncated" in summary["tags"] and summary["log.level"] == "warning"
        assert summary["message"].startswith(theirs[kept]["message"] + "\n")
        assert len(summary["message"].encode()) <= MAX_DOCUMENT_BYTES + 100
        assert summary["message"].endswith(f"[hvdlog: {summary['hvdlog.truncated.lines']} lines ({summary['hvdlog.truncated.bytes']} bytes) cut]")

    def test_a_document_over_the_byte_cap_is_cut_alike(self, jruby: str) -> None:
        """A 30,000-line traceback (~1.7 MB) is one document in both paths, cut at a line end to
        the byte cap, its cut lines and bytes counted: the same document from Logstash and hvdlog parse."""
        path = "/logs/deep/node1/rank-1.stderr.log"
        frames = [f'  File "/work/train/model_{number}.py", line {number}, in forward_{number}' for number in range(30_000)]
        lines = ["Traceback (most recent call last):", *frames, "RecursionError: maximum recursion depth exceeded"]
        text = "\n".join(lines)
        event = nest({"message": text, "log.file.path": path, **path_fields(path), "@metadata.hvd.block": text})
        [[ours]] = run_filter(jruby, [event])
        [theirs] = list(parse_lines(lines, path=path))
        assert _comparable(ours) == _comparable(theirs)
        assert theirs["hvdlog"]["truncated"]["lines"] > 10_000 and "_hvdlog_truncated" in theirs["tags"]
        assert len(theirs["message"].encode()) <= MAX_DOCUMENT_BYTES + 100
        assert theirs["error"]["type"] == "RecursionError"
        kept_lines = theirs["message"].count("\n")  # the kept lines, then the mark
        assert kept_lines + theirs["hvdlog"]["truncated"]["lines"] == len(lines)

    def test_dead_letter_reason_is_cut(self, jruby: str) -> None:
        """A 5 MB rejection reason gives a document of tens of KB, not 10 MB (the reason is in
        message and error.message): both cut to max_reason_bytes and marked."""
        reason = "x" * 5_000_000
        text = ('Could not index event to Elasticsearch. status: 400, action: ["create", {}], response: {"create"=>{"status"=>400, '
                f'"error"=>{{"type"=>"document_parsing_exception", "reason"=>"{reason}"}}}}}}')
        event = {"message": "hello", "rank": 3, "@metadata": {"dead_letter_queue": {"reason": text, "plugin_id": "app_to_elasticsearch"}}}
        [[out]], _ = _run_ruby(jruby, DEAD_LETTER, {"max_original_bytes": 32768, "max_reason_bytes": 8192}, [event])
        assert len(json.dumps(out)) < 64_000
        assert out["error"]["type"] == "document_parsing_exception"
        assert out["error"]["message"] == "x" * 8192 + "...(cut)"
        assert out["message"].endswith("x" * 100 + "...(cut)") and out["rank"] == 3

    @pytest.mark.parametrize("depth", [101, 254])
    def test_a_deeply_nested_rejected_event_is_recorded(self, jruby: str, depth: int) -> None:
        """Elasticsearch refuses an event nested past its depth limit; the dead-letter filter still
        records the rejection (it failed with JSON::NestingError past 100 levels, and the rejection was lost)."""
        nested: object = 1
        for _ in range(depth):
            nested = {"a": nested}
        text = ('Could not index event to Elasticsearch. status: 400, action: ["create", {}], response: {"create"=>{"status"=>400, '
                '"error"=>{"type"=>"document_parsing_exception", "reason"=>"too deep"}}}')
        event = {"message": "hello", "rank": 3, "x": nested, "@metadata": {"dead_letter_queue": {"reason": text, "plugin_id": "app_to_elasticsearch"}}}
        [[out]], _ = _run_ruby(jruby, DEAD_LETTER, {"max_original_bytes": 32768, "max_reason_bytes": 8192}, [event])
        assert out["error"]["type"] == "document_parsing_exception" and out["rank"] == 3 and "_hvdlog_rejected" in out["tags"], out
        assert out["event"]["original"].startswith("{") and '{"a":' * 50 in out["event"]["original"], out["event"]["original"][:200]


APP_SCRIPT = ROOT / "logstash" / "pipeline" / "horovod_app.rb"


def _filebeat_app_event(path: str, decoded: dict[str, Any], **path_fields: Any) -> dict[str, Any]:
    """An hvdlog-events event as shipper/filebeat.yml makes it: the line decoded under
    ``hvdlog_event`` (keys left dotted), the path's fields and Filebeat's own at the root."""
    return {"@timestamp": "2026-12-06T02:43:25.966Z", "hvdlog_event": decoded, "message": decoded.get("message"),
            "log": {"offset": 40, "file": {"path": path}}, "tags": ["hvdlog_events"], "input": {"type": "filestream"},
            "host": {"name": "node1"}, "job": "myjob", **path_fields}


class TestAppFilter:
    """logstash/pipeline/horovod_app.rb: the decoded event at the root, never over the path's fields."""

    def test_the_path_decides_job_host_and_a_rank_files_rank(self, jruby: str) -> None:
        claims = {"log.file.path": "/r/victimjob/victimhost/rank-0.jsonl", "job": "victimjob", "host.name": "victimhost", "rank": 0,
                  "log.offset": 0, "log.level": "error", "message": "forged", "step": 7, "horovod.stall.seconds": 1.5}
        events = [_filebeat_app_event("/r/myjob/node1/rank-3.jsonl", claims, rank=3),
                  _filebeat_app_event("/r/myjob/node1/rank-3.jsonl.2", {**claims, "host": "victimhost"}, rank=3),
                  _filebeat_app_event("/r/myjob/node1/pid-77.jsonl", {**claims, "rank": 5}),
                  _filebeat_app_event("/r/myjob/node1/rank-unknown-pid9.jsonl", {**claims, "rank": 2}),
                  _filebeat_app_event("/r/myjob/node1/launcher.jsonl", {**claims, "rank": None})]
        outputs, _ = _run_ruby(jruby, APP_SCRIPT, {"source": "hvdlog_event"}, events)
        docs = [out for [out] in outputs]
        for doc, source in zip(docs, events, strict=True):
            assert "hvdlog_event" not in doc and "victim" not in json.dumps(doc), doc
            assert (doc["job"], doc["host"], doc["log"]["file"]["path"], doc["log"]["offset"]) == (
                "myjob", {"name": "node1"}, source["log"]["file"]["path"], 40)
            assert (doc["log"]["level"], doc["message"], doc["step"], doc["horovod"]["stall"]["seconds"]) == ("error", "forged", 7, 1.5)
            assert doc["@timestamp"] == "2026-12-06T02:43:25.966Z"  # the conf's date filter's, not the script's
        assert [doc.get("rank", "absent") for doc in docs] == [3, 3, 5, "absent", None]

    def test_a_string_tags_value_is_one_tag(self, jruby: str) -> None:
        """`tags="cuda"` joins the routing tag (it sent the event to the fallback pipeline, at info)."""
        events = [_filebeat_app_event("/r/j/h/rank-0.jsonl", {"log.level": "error", "message": "m", "tags": tags}, rank=0)
                  for tags in ("cuda", ["a", "b"], [1, {"k": "v"}], None)]
        outputs, _ = _run_ruby(jruby, APP_SCRIPT, {"source": "hvdlog_event"}, events)
        assert [out["tags"] for [out] in outputs] == [["hvdlog_events", "cuda"], ["hvdlog_events", "a", "b"],
                                                      ["hvdlog_events", "1", '{"k":"v"}'], ["hvdlog_events"]]
        assert all(out["log"]["level"] == "error" for [out] in outputs)

    def test_an_undecodable_line_is_marked_for_the_parse_failure_branch(self, jruby: str) -> None:
        error = {"message": "Error decoding JSON: invalid character 'o' in literal null (expecting 'u')"}
        events = [_filebeat_app_event("/r/j/h/rank-0.jsonl", {"message": "not json", "error": error}, rank=0),
                  _filebeat_app_event("/r/j/h/rank-0.jsonl", {"message": "m", "error": {"message": "cuda: out of memory"}}, rank=0)]
        outputs, _ = _run_ruby(jruby, APP_SCRIPT, {"source": "hvdlog_event"}, events)
        [[bad], [good]] = outputs
        assert bad["error"] == {**error, "type": "json"} and bad["message"] == "not json" and bad["rank"] == 0
        assert good["error"] == {"message": "cuda: out of memory"}

"""shipper/filebeat.yml against real per-rank files and the native corpus.

Two ways, both reading the YAML itself (never a copy of its patterns):

* an emulation of the parts that decide which events exist (tests/shipping/
  filebeat_emulation.py): path globs, the dissect of job/host/rank from the path, and the
  multiline parsers, applied to the parsing corpus and to real captures; each multiline
  pattern is also run through Go's regexp (RE2) on every line, to prove both engines agree;
* a real Filebeat (built by scripts/install-filebeat.sh) run on files a real 2-rank
  horovodrun job wrote through hvdlog, with its output sent to a file, compared event for
  event with what the files hold and with the emulation.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from support.app_filter import through_app
from support.filebeat_emulation import dissect, excluded, expand, join_lines, multiline_parsers
from support.variants import PREFIXES

from hvdlog import layout
from hvdlog.documents import get_field
from hvdlog.elastic.generate import render_filebeat
from hvdlog.parse.blocks import filebeat_patterns, segments
from hvdlog.parse.patterns import compile_pattern

REPO = Path(__file__).resolve().parents[2]
FILEBEAT_YML = REPO / "shipper" / "filebeat.yml"
SHIPPING = Path(__file__).resolve().parents[1] / "shipping"
CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CONFIG: dict[str, Any] = yaml.safe_load(FILEBEAT_YML.read_text())
INPUTS: dict[str, dict[str, Any]] = {i["id"]: i for i in CONFIG["filebeat.inputs"]}
NATIVE_PARSERS = multiline_parsers(INPUTS["hvdlog-native"])
#: tests/support/variants.py's prefixes that no list of the parser names (a scheduler's, CI's, ...)
UNLISTED_PREFIXES = ("ci", "determined", "ray", "compose", "syslog")

# --- the native streams read with the declared grammar (hvdlog/parse/assets/blocks.json) ------
_ARRIVAL = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z "  # hvdlog's tee (GUIDE, HVDLOG_ARRIVAL_TIME)
_PREFIX = re.compile(f"^(?:{_ARRIVAL})?" r"(?:\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?(?:\[\d+(?:,\d+)?\]<std(?:out|err)>:|\[\d+\] )?")
_HOROVOD_HEADER = compile_pattern("HOROVOD_CORE_LINE").regex
_TRACEBACK = compile_pattern("HOROVOD_TRACEBACK_START").regex
_CHAINED = compile_pattern("HOROVOD_TRACEBACK_CHAIN").regex
#: the grammar's openers whose blocks Filebeat must ship whole, as the kind this test counts
_KINDS = {"stall_header": "stall", "legacy_stall": "stall", "traceback_start": "traceback"}


def _split(line: str) -> tuple[str, str]:
    """(launcher prefix, what the rank printed)."""
    prefix = _PREFIX.match(line)
    return (prefix.group(0), line[prefix.end():]) if prefix else ("", line)


def blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(kind, first, last) of every stall block and traceback in one rank's stream, as the
    grammar reads them up to the first rule Filebeat cannot follow (``filebeat: false``)."""
    bodies = [_split(line)[1] for line in lines]
    return [(_KINDS[name], first, last) for name, first, last in segments(bodies, filebeat_only=True) if name in _KINDS]


def streams(path: Path) -> dict[str, list[str]]:
    """A file's lines split by launcher tag, as they would be in per-rank files (Filebeat
    reads one file per rank and stream; a console capture interleaves them)."""
    groups: dict[str, list[str]] = {}
    for line in path.read_text(errors="replace").splitlines():
        prefix, _ = _split(line)
        tag = re.sub(f"^(?:{_ARRIVAL})?" r"(?:\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})?", "", prefix)
        groups.setdefault(tag, []).append(line)
    return groups


def event_spans(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line index of every event the native input makes of these lines."""
    spans, position = [], 0
    for event in join_lines("\n".join(lines) + "\n", NATIVE_PARSERS):
        count = event.count("\n") + 1
        spans.append((position, position + count - 1))
        position += count
    assert position == len(lines), "the emulation lost or invented lines"
    return spans


_TAGGED = re.compile(r"^\[\d+(?:,\d+)?\]<std(?:out|err)>:")


def _native_files() -> list[Path]:
    corpus = sorted(p for d in ("horovod.core", "horovod.launcher") for p in (CORPUS / d).glob("*.log"))
    captures = sorted((SHIPPING / "captures").rglob("rank-*.std*.log"))
    assert captures, "tests/shipping/captures is empty: run tests/shipping/record.sh"
    return corpus + captures


# --- fixtures -----------------------------------------------------------------------------


def _tool(variable: str, script: str) -> str:
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"{variable} is not set to an executable: run `make test` (or `bash scripts/{script}`) first")
    return path


@pytest.fixture(name="rank_root", scope="module")
def fixture_rank_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Per-rank files from a real 2-rank Gloo horovodrun job through hvdlog (DEBUG, rank 1
    dies with a traceback) and ``hvdlog run`` (the launcher's console in ``gloo-crash/launcher.log``),
    plus the recorded MPI stall captures moved onto this node."""
    root = tmp_path_factory.mktemp("hvdlog-root")
    env = {**os.environ, "HVDLOG_ROOT": str(root), "HVDLOG_JOB": "gloo-crash", "HOROVOD_LOG_LEVEL": "debug", "JOB_CRASH": "1"}
    result = subprocess.run(  # through hvdlog run: the job's folder gets the launcher's console too
        [sys.executable, "-m", "hvdlog", "run", "--", "horovodrun", "-np", "2", "--gloo", "python", str(SHIPPING / "rank_job.py")],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )
    hosts = [p.name for p in (root / "gloo-crash").iterdir() if p.is_dir()] if (root / "gloo-crash").exists() else []
    assert len(hosts) == 1, f"horovodrun wrote no per-rank files (exit {result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    assert result.returncode != 0, "rank 1 was meant to fail"
    host = hosts[0]
    for job in (SHIPPING / "captures").iterdir():
        for node in job.iterdir():
            shutil.copytree(node, root / job.name / host)
    # Another node's files on the same (shared) filesystem: this node must not ship them.
    shutil.copytree(root / "gloo-crash" / host, root / "gloo-crash" / "other-node")
    return root, host


def _env(root: Path, host: str) -> dict[str, str]:
    return {"HVDLOG_ROOT": str(root), "NODE_NAME": host, "LOGSTASH_HOSTS": "localhost:5044", "HVDLOG_TLS_DIR": str(root)}


def _path_fields(input_config: dict[str, Any], path: Path, env: dict[str, str]) -> dict[str, str] | None:
    """What the input's dissect processors (the ones whose ``when.regexp`` matches) take from the path."""
    found: dict[str, str] = {}
    for processor in input_config["processors"]:
        condition = processor["dissect"].get("when", {}).get("regexp", {}).get("log.file.path")
        if condition is not None and not re.search(condition, str(path)):
            continue
        fields = dissect(expand(processor["dissect"]["tokenizer"], env), str(path))
        if fields is None:
            return None
        found.update(fields)
    return found


def _matches(path: Path, input_config: dict[str, Any], env: dict[str, str]) -> bool:
    """Whether the input, enabled under ``env``, reads ``path``: Filebeat's glob semantics, `*`
    stays within one path segment (Go filepath.Match)."""
    if expand(str(input_config.get("enabled", "true")), env).lower() != "true":
        return False
    return any(PurePosixPath(path).match(expand(pattern, env)) for pattern in input_config["paths"])



# --- configuration ------------------------------------------------------------------------


class TestConfig:
    """The inputs of shipper/filebeat.yml."""

    def test_inputs(self) -> None:
        """Four filestream inputs with distinct, stable ids; TLS output load-balanced over hosts."""
        assert [i["id"] for i in CONFIG["filebeat.inputs"]] == ["hvdlog-events", "hvdlog-native", "hvdlog-launcher", "hvdlog-timeline"]
        assert all(i["type"] == "filestream" for i in CONFIG["filebeat.inputs"])
        output = CONFIG["output.logstash"]
        assert output["loadbalance"] is True and output["ssl.enabled"] is True
        assert output["ssl.verification_mode"] == "full"
        assert "queue.disk" in CONFIG and CONFIG["queue.disk"]["max_size"]

    def test_shared_filesystem_safety(self) -> None:
        """No input forgets offsets when files vanish for a moment; clean_inactive is consistent."""
        for config in INPUTS.values():
            assert config["clean_removed"] is False and config["close.on_state_change.removed"] is False
            if config["id"] == "hvdlog-launcher":  # a job's folder, no node's: off unless this node is told to ship it
                assert config["enabled"] == "${HVDLOG_SHIP_LAUNCHER:false}"
            else:
                assert all("${NODE_NAME}" in p for p in config["paths"]), "each node must read only its own directory"
            hours = {k: int(str(config[k]).rstrip("h")) for k in ("ignore_older", "clean_inactive")}
            assert hours["clean_inactive"] > hours["ignore_older"]

    def test_multiline_patterns_are_generated_from_the_grammar(self) -> None:
        """The multiline patterns are hvdlog/parse/assets/blocks.json's (python -m
        hvdlog.elastic.generate writes them), the file is otherwise untouched, and every rule
        Filebeat can follow has a piece of the `after` pattern or of a `before` stage."""
        text = FILEBEAT_YML.read_text()
        assert render_filebeat(text) == text, "shipper/filebeat.yml is stale: run python -m hvdlog.elastic.generate"
        assert [parser.pattern.pattern for parser in NATIVE_PARSERS] == list(filebeat_patterns())
        from hvdlog.parse.blocks import load_blocks

        data = load_blocks()
        served = {name for row in data["filebeat"]["after"]["continues"] for name in row["for"]}
        served |= {name for stage in data["filebeat"]["before"] for name in stage["for"]}
        followed = {row["name"] for rows in data["states"].values() for row in rows if row.get("filebeat", True)}
        assert followed <= served, f"rules with no Filebeat pattern: {sorted(followed - served)}"

    def test_patterns_in_re2_and_python(self) -> None:
        """Go's regexp and Python's re give the same answer for every corpus line -- also coloured,
        behind tqdm's ``\\r`` progress, before or after its launcher tag, and behind each prefix no
        list names -- and for the joined events each later parser sees."""
        go = shutil.which("go") or pytest.fail("Go is needed to check the patterns with RE2 (it builds composecheck too)")
        plain = [line for path in _native_files() for line in path.read_text(errors="replace").splitlines()]
        progress = " 45%|####5     | 45/100 [00:12<00:15,  3.61it/s]\r"
        lines = [*plain, *(f"\x1b[36m{line}\x1b[0m" for line in plain), *(progress + line for line in plain),
                 *(_TAGGED.sub(lambda tag: tag[0] + progress, line, count=1) for line in plain)]
        groups = [list(group) for path in _native_files() for group in streams(path).values()]
        # and behind each prefix no list names (what the `before` stages are for)
        unlisted = [[PREFIXES[name](number) + line for number, line in enumerate(group)] for group in groups for name in UNLISTED_PREFIXES]
        lines += [line for group in unlisted for line in group]
        groups = ["\n".join(group) + "\n" for group in groups + unlisted]
        # each stage's input: raw lines, then the events the stages before it joined
        inputs = [lines, *([e for text in groups for e in join_lines(text, NATIVE_PARSERS[:stage])] for stage in range(1, len(NATIVE_PARSERS)))]
        for parser, samples in zip(NATIVE_PARSERS, inputs, strict=True):
            result = subprocess.run(
                [go, "run", str(SHIPPING / "re2match.go"), parser.pattern.pattern],
                input="".join(json.dumps(s) + "\n" for s in samples), capture_output=True, text=True, timeout=120, check=False,
            )
            assert result.returncode == 0, result.stderr
            go_answers = [answer == "1" for answer in result.stdout.split()]
            python_answers = [bool(parser.pattern.search(s)) for s in samples]
            differ = [s for s, g, p in zip(samples, go_answers, python_answers, strict=False) if g != p]  # lengths asserted below
            assert len(go_answers) == len(samples) and not differ, f"RE2 and Python disagree on: {differ[:3]}"
            assert any(python_answers) and not all(python_answers)


class TestPaths:
    """Which files each input reads, and what it derives from their paths."""

    def test_layout_kinds(self, tmp_path: Path) -> None:
        """Every kind of per-rank file (and its rotations) goes to exactly one input, the right one."""
        env = _env(tmp_path, "node1")
        expected = {"events": "hvdlog-events", "stdout": "hvdlog-native", "stderr": "hvdlog-native"}
        for kind, input_id in expected.items():
            path = layout.rank_file(tmp_path, "job-1", "node1", 12, kind)
            for candidate in (path, Path(f"{path}.1"), Path(f"{path}.12")):
                readers = [i for i, config in INPUTS.items() if _matches(candidate, config, env)]
                assert readers == [input_id], f"{candidate.name}: read by {readers}"
        assert not any(_matches(layout.rank_file(tmp_path, "job-1", "node2", 0, k), c, env) for k in expected for c in INPUTS.values())
        assert not any(_matches(tmp_path / "job-1" / "node1" / "notes.txt", c, env) for c in INPUTS.values())

    def test_consoles_shipped(self, tmp_path: Path) -> None:
        """The only console an input reads is the launcher's that ``hvdlog run`` keeps
        (``<job>/launcher.log``), and only where HVDLOG_SHIP_LAUNCHER=true; never horovodrun's
        ``--output-filename`` tree or a scheduler's output file put beside the ranks'. That
        console, like the ranks' captures, is written from a pipe with no terminal between, so a
        terminal's wraps (hvdlog parse joins them back in a console, hvdlog/parse/wraps.py) never
        reach Logstash: test_logstash_ruby_filter.py's ``VARIANT_ANSWERS_RIGHT_THROUGH_LOGSTASH``
        counts the wrap variants without requiring them."""
        job, node = tmp_path / "job-1", tmp_path / "job-1" / "node1"
        others = [node / "launcher.log", node / "rank.0" / "stderr", node / "rank.00" / "stdout", node / "slurm-1234.out",
                  node / "console.log", node / "rank-0.log", job / "slurm-1234.out"]
        for ship, readers in (({}, []), ({"HVDLOG_SHIP_LAUNCHER": "true"}, ["hvdlog-launcher"])):
            env = {**_env(tmp_path, "node1"), **ship}
            assert [name for name, config in INPUTS.items() if _matches(job / "launcher.log", config, env)] == readers
            assert not [(path.name, name) for path in others for name, config in INPUTS.items() if _matches(path, config, env)]

    def test_launcher_input_leaves_the_workers_lines_out(self) -> None:
        """hvdlog-launcher's ``exclude_lines`` is ``hvdlog run``'s own rule for a worker's line
        (:data:`hvdlog.cli.run.WORKER_LINE` after the arrival time), in Python and in Go's RE2:
        Gloo's and Open MPI's tags go, the launcher's own lines (and a tag-like text further in) stay."""
        from hvdlog.cli.run import WORKER_LINE

        (pattern,) = INPUTS["hvdlog-launcher"]["exclude_lines"]
        at = "2026-12-05T07:38:46.381819Z "
        payloads = ["[1]<stdout>:[2026-12-05 07:38:46.381292: I operations.cc:689] [1]: Horovod initialized", "[0]<stderr>:Terminated",
                    "[1,0]<stderr>:Traceback (most recent call last):", "[12,3]<stdout>:", "Process 1 exit with status code 137.",
                    "Terminating remaining workers after failure of Process 1.", "INFO:root:reset workers: 2", "[1] <stdout>: spaced",
                    "Process name: 1", "RuntimeError: [1]<stderr>: inside", "[1]<stdin>: no", " [1]<stderr>: indented"]
        samples = [at + payload for payload in payloads] + ["[1]<stderr>:no arrival time"]
        python = [bool(re.search(pattern, sample)) for sample in samples]
        assert python == [bool(WORKER_LINE.match(sample.encode(), len(at))) and sample.startswith(at) for sample in samples]
        assert python[:4] == [True] * 4 and not any(python[4:])
        go = shutil.which("go") or pytest.fail("Go is needed to check the pattern with RE2")
        result = subprocess.run([go, "run", str(SHIPPING / "re2match.go"), pattern], input="".join(json.dumps(s) + "\n" for s in samples),
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        assert [answer == "1" for answer in result.stdout.split()] == python

    def test_real_files(self, rank_root: tuple[Path, str]) -> None:
        """Every file hvdlog wrote on this node is read once; the dissect gives parse_path's answer."""
        root, host = rank_root
        env = _env(root, host)
        files = sorted(p for p in root.rglob("*") if p.is_file())
        mine = [p for p in files if p.parent.name == host]
        assert len(mine) >= 12
        for path in files:
            readers = [i for i, config in INPUTS.items() if _matches(path, config, env)]
            assert len(readers) == (1 if path.parent.name == host else 0), f"{path}: read by {readers}"
            if not readers:
                continue
            fields = _path_fields(INPUTS[readers[0]], path, env)
            if path.name == "launcher.jsonl":  # hvdlog run's exit record: the job's and the node's, no rank's
                assert (fields["job"], fields["host.name"]) == (path.parent.parent.name, path.parent.name) and "rank" not in fields
                continue
            truth = layout.parse_path(path)
            assert fields and truth, path
            assert (fields["job"], fields["host.name"]) == (truth.job, truth.host)
            if truth.kind != "events":
                assert fields["horovod.launcher.stream"] == truth.kind and fields["rank"] == truth.rank
            else:  # a rank file's name gives the rank (horovod_app.rb keeps it over the event's)
                assert fields.get("rank") == truth.rank, path

    @pytest.mark.parametrize("name", ["pid-4242", "rank-unknown-pid4242"])
    def test_process_files(self, tmp_path: Path, name: str) -> None:
        """Per-process files go to the same inputs: elastic jobs' ``pid-<N>`` and ``rank-unknown-pid<N>``
        (a process no launcher gave a rank). No rank from their path (unknown by absence); their native
        events get job, host, stream and the pid instead."""
        env = _env(tmp_path, "node1")
        expected = {"events": "hvdlog-events", "stdout": "hvdlog-native", "stderr": "hvdlog-native"}
        for kind, input_id in expected.items():
            path = tmp_path / "job-1" / "node1" / f"{name}.{layout.KINDS[kind]}"
            for candidate in (path, Path(f"{path}.3")):
                readers = [i for i, config in INPUTS.items() if _matches(candidate, config, env)]
                assert readers == [input_id], f"{candidate.name}: read by {readers}"
                fields = _path_fields(INPUTS[input_id], candidate, env)
                assert fields is not None and "rank" not in fields and (fields["job"], fields["host.name"]) == ("job-1", "node1")
                if kind != "events":
                    assert (fields["process.pid"], fields["horovod.launcher.stream"]) == (4242, kind)

    def test_process_file_names_are_the_writers(self, tmp_path: Path) -> None:
        """The elastic name above is the one the runtime writes."""
        assert layout.process_file(tmp_path, "job-1", "node1", 4242, "events").name == "pid-4242.jsonl"


class TestMultiline:
    """The native input's multiline parsers, applied as Filebeat applies them."""

    def test_blocks_are_single_events(self) -> None:
        """Every stall block and traceback of the corpus and captures is one event, starting an event."""
        counts = {"stall": 0, "traceback": 0, "chained": 0}
        for path in _native_files():
            for tag, lines in streams(path).items():
                spans = event_spans(lines)
                starts = dict(spans)
                for kind, first, last in blocks(lines):
                    assert first in starts, f"{path.name} {tag}: the {kind} at line {first} does not start an event"
                    assert starts[first] >= last, (
                        f"{path.name} {tag}: the {kind} at lines {first}-{last} is split:\n" + "\n".join(lines[first : last + 1])
                    )
                    counts[kind] += 1
                    counts["chained"] += kind == "traceback" and any(_CHAINED.match(_split(line)[1]) for line in lines[first:last])
        assert counts["stall"] >= 10 and counts["traceback"] >= 5 and counts["chained"] >= 1, counts

    def test_tracebacks_behind_an_unlisted_prefix_join_as_without_it(self) -> None:
        """Behind a scheduler's or CI system's prefix, a traceback's source lines (and Python
        3.11's marker lines) cannot continue an event by themselves; the `before` stages still
        make the same events as the bare lines make: a traceback whole up to its exception
        line, a `<string>` frame's traceback (no source line) too, and the prints around them
        alone."""
        console = [
            "epoch 1 done", "Traceback (most recent call last):", '  File "/app/train.py", line 40, in <module>', "    main()",
            '  File "/app/train.py", line 33, in main', "    loss = step(model, batch)", "           ^^^^^^^^^^^^^^^^^^",
            '  File "/app/train.py", line 21, in step', '    hvd.allreduce(x, name="loss")', "    ~~~~~~~~~~~~~^^^^^^^^^^^^^^^^",
            "RuntimeError: Horovod has been shut down.", "epoch 2 start", "Traceback (most recent call last):",
            '  File "<string>", line 1, in <module>', "NameError: name 'x' is not defined", "next print",
        ]
        bare = join_lines("\n".join(console) + "\n", NATIVE_PARSERS)
        assert [event.count("\n") + 1 for event in bare] == [1, 10, 1, 3, 1]
        for name in UNLISTED_PREFIXES:
            prefixes = [PREFIXES[name](number) for number in range(len(console))]
            joined = join_lines("".join(prefix + line + "\n" for prefix, line in zip(prefixes, console, strict=True)), NATIVE_PARSERS)
            each = iter(prefixes)
            assert ["\n".join(line.removeprefix(next(each)) for line in event.split("\n")) for event in joined] == bare, name

    def test_no_overjoining(self) -> None:
        """Each Horovod header line and each new traceback begins its own event."""
        checked = 0
        for path in _native_files():
            for lines in streams(path).values():
                starts = {first for first, _ in event_spans(lines)}
                chained = {first for kind, first, _ in blocks(lines) if kind == "traceback"}
                for index, line in enumerate(lines):
                    body = _split(line)[1]
                    if _HOROVOD_HEADER.match(body) or (_TRACEBACK.match(body) and (index in chained or index == 0)):
                        assert index in starts, f"{path.name}: line {index} was glued to the event before it:\n{line}"
                        checked += 1
        assert checked >= 100, checked


# --- a real Filebeat --------------------------------------------------------------------------


def _run_filebeat(root: Path, host: str, out: Path, expected: int, *, patience: float = 180,
                  settings: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run Filebeat with shipper/filebeat.yml (output switched to a file) until it has written
    ``expected`` events, or ``patience`` seconds have passed (a file's last events wait out the
    three multiline timeouts, 5 + 10 + 15 s, after Filebeat's own start on a loaded machine);
    ``settings``: more of the environment the configuration reads."""
    binary = _tool("HVDLOG_FILEBEAT", "install-filebeat.sh")
    env = {**os.environ, **_env(root, host), **(settings or {})}
    command = [
        binary, "-e", "-c", str(FILEBEAT_YML), "--strict.perms=false",
        "--path.home", str(out), "--path.data", str(out / "data"), "--path.logs", str(out / "logs"),
        "-E", "output.logstash.enabled=false", "-E", f"output.file.path={out / 'events'}",
        "-E", "output.file.filename=events", "-E", "queue.disk.max_size=256MB", "-E", "http.enabled=false",
    ]
    events_file = out / "events" / "events"
    with open(out / "filebeat.log", "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + patience
            while time.monotonic() < deadline and process.poll() is None:
                if events_file.exists() and len(events_file.read_text().splitlines()) >= expected:
                    break
                time.sleep(0.5)
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert events_file.exists(), f"Filebeat wrote nothing:\n{(out / 'filebeat.log').read_text()[-3000:]}"
    return _as_logstash_app([json.loads(line) for line in events_file.read_text().splitlines()])


def _as_logstash_app(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON events (hvdlog-events, hvdlog-timeline) as horovod-app.conf's (horovod-timeline.conf's)
    date and ruby filters leave them
    (Filebeat decodes each line under ``hvdlog_event``; the pipeline puts it at the root except
    the fields the real path gives); the other inputs' events as Filebeat wrote them."""
    app = [index for index, event in enumerate(events) if {"hvdlog_events", "hvdlog_timeline"} & set(event.get("tags", []))]
    for index, document in zip(app, through_app([events[index] for index in app]) if app else [], strict=True):
        events[index] = document
    return events


@pytest.mark.tools
class TestRealFilebeat:
    """A real Filebeat build over real per-rank files."""

    def test_ships_rank_files(self, rank_root: tuple[Path, str], tmp_path: Path) -> None:
        """One event per JSON line and per emulated native event, fields from the path, nothing
        from the other node, and native messages exactly as the emulation joins them."""
        root, host = rank_root
        # the ranks' files and hvdlog run's exit record (<job>/<host>/launcher.jsonl) ship as ever
        mine = sorted(p for p in [*root.rglob("rank-*"), *root.rglob("launcher.jsonl")] if p.parent.name == host)
        json_lines = {p: [json.loads(line) for line in p.read_text().splitlines()] for p in mine if p.suffix == ".jsonl"}
        native = {p: join_lines(p.read_text(), NATIVE_PARSERS) for p in mine if p.suffix == ".log"}
        expected = sum(map(len, json_lines.values())) + sum(map(len, native.values()))
        events = _run_filebeat(root, host, tmp_path, expected)
        assert len(events) == expected, f"expected {expected} events, Filebeat wrote {len(events)}"
        by_file: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            by_file.setdefault(event["log"]["file"]["path"], []).append(event)
        assert "other-node" not in "".join(by_file)
        for path, records in json_lines.items():
            shipped = sorted(by_file[str(path)], key=lambda e: e["log"]["offset"])
            truth = layout.parse_path(path)
            assert [e["message"] for e in shipped] == [r["message"] for r in records]
            for event, record in zip(shipped, records, strict=True):
                if truth is None:  # hvdlog run's exit record, <job>/<host>/launcher.jsonl: the job's and the node's, no rank's
                    assert (event["job"], event["host"]["name"], event.get("rank")) == (path.parent.parent.name, path.parent.name, None)
                else:
                    assert (event["job"], event["host"]["name"], event["rank"]) == (truth.job, truth.host, record["rank"])
                assert event["log"]["level"] == record["log.level"] and event["tags"] == ["hvdlog_events"]
                assert event.get("step") == record.get("step") and event["event"]["dataset"] == record["event.dataset"]
                # Filebeat keeps the event's own time (to the millisecond), not the read time.
                assert event["@timestamp"][:23] == record["@timestamp"][:23]
        for path, joined in native.items():
            shipped = sorted(by_file.get(str(path), []), key=lambda e: e["log"]["offset"])
            truth = layout.parse_path(path)
            assert [e["message"] for e in shipped] == joined, path.name
            for event in shipped:
                assert (event["job"], event["host"]["name"], event["rank"]) == (truth.job, truth.host, truth.rank)
                assert event["horovod"]["launcher"]["stream"] == truth.kind and event["tags"] == ["hvdlog_native"]
        tracebacks = [e for e in events if _split(e["message"])[1].startswith("Traceback")]  # after the tee's arrival time
        assert any("injected fault on rank 1" in e["message"] for e in tracebacks)
        assert any("During handling of the above exception" in e["message"] and e["message"].count("Traceback (most recent call last):") == 2
                   for e in tracebacks)
        assert sum("Missing ranks:" in e["message"] for e in events) >= 3


    def test_an_event_cannot_choose_its_job_host_or_rank(self, tmp_path: Path) -> None:
        """Events that claim another job's ``log.file.path``, ``job``, ``host.name`` and ``rank``
        (through hvdlog's logger, and as raw lines a user writes into their own file) reach the
        index with the real path's job and host; the rank of a rank-<rank> file is its name's,
        a rank-unknown-pid file's documents carry none, and only a pid-<pid> file (elastic jobs)
        keeps the event's own rank. A string ``tags`` joins the routing tag, so the event stays
        in horovod-app with its level. (Filebeat decoded at the root: the event's log.file.path
        replaced the real one and the dissect made it ``job: victimjob``.)"""
        root = tmp_path / "root"
        victim = str(root / "victimjob" / "victimhost" / "rank-0.jsonl")
        claims = {"log.file.path": victim, "job": "victimjob", "host.name": "victimhost", "rank": 0}
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "HVDLOG_", "OMPI_", "PMI", "SLURM_"))}
        script = ("import json, sys, hvdlog\n"
                  "hvdlog.configure(root=sys.argv[1], job='myjob', stall_after=None)\n"
                  "log = hvdlog.get_logger()\n"
                  "log.error('forged failure', **json.loads(sys.argv[2]))\n"
                  "log.error('cuda failed', tags='cuda')\nhvdlog.shutdown()\n")
        result = subprocess.run([sys.executable, "-c", script, str(root), json.dumps(claims)],
                                env={**clean, "PYTHONPATH": str(REPO), "HOROVOD_RANK": "3", "HOROVOD_SIZE": "4"},
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        (node,) = (root / "myjob").iterdir()
        host = node.name
        raw = {"@timestamp": "2026-12-06T01:02:03.456789Z", "log.level": "error", "message": "raw forgery", **claims,
               "host": {"name": "victimhost"}, "log": {"file": {"path": victim}, "offset": 0}, "tags": ["x"]}
        with open(node / "rank-3.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps(raw) + "\n")
        (node / "pid-77.jsonl").write_text(json.dumps({**raw, "message": "elastic", "rank": 5}) + "\n")
        (node / "rank-unknown-pid9.jsonl").write_text(json.dumps({**raw, "message": "no launcher", "rank": 2}) + "\n")
        for native in node.glob("*.log"):  # this test is about the JSON events alone
            native.unlink()
        lines = sum(len(p.read_text().splitlines()) for p in node.glob("*.jsonl"))
        assert lines == 6, lines  # hvdlog's forged, cuda and exit events, and the three raw lines
        (tmp_path / "fb").mkdir()
        documents = [d for d in _run_filebeat(root, host, tmp_path / "fb", lines) if "hvdlog_events" in d["tags"]]
        for document in documents:
            assert (document["job"], document["host"]["name"]) == ("myjob", host), document
            assert document["log"]["file"]["path"].startswith(str(node) + "/"), document
            assert "victim" not in json.dumps({k: v for k, v in document.items() if k != "extra"}), document
        assert len(documents) == lines, [d["message"] for d in documents]
        by_message = {d["message"]: d for d in documents}
        assert {m: by_message[m].get("rank") for m in ("forged failure", "raw forgery", "elastic", "no launcher")} == {
            "forged failure": 3, "raw forgery": 3, "elastic": 5, "no launcher": None}
        cuda = by_message["cuda failed"]
        assert cuda["log"]["level"] == "error" and cuda["tags"] == ["hvdlog_events", "cuda"], cuda
        assert by_message["raw forgery"]["tags"] == ["hvdlog_events", "x"]
        assert by_message["raw forgery"]["@timestamp"].startswith("2026-12-06T01:02:03.456")

    def test_ships_the_launchers_own_lines(self, rank_root: tuple[Path, str], tmp_path: Path) -> None:
        """With HVDLOG_SHIP_LAUNCHER=true the job's launcher.log goes too: the events the emulation
        joins, less those a worker's tagged line starts (its capture ships it), with the job from
        the path and no rank (the ruby filter reads the rank a line is about); horovodrun's
        verdict on rank 1 is among them. (test_ships_rank_files ships the same root without the
        setting: nothing of launcher.log.)"""
        from hvdlog.cli.run import WORKER_LINE

        root, host = rank_root
        launcher = root / "gloo-crash" / "launcher.log"
        text = launcher.read_text()
        joined = join_lines(text, NATIVE_PARSERS)
        kept = [event for event in joined if not excluded(INPUTS["hvdlog-launcher"], event)]
        assert len(kept) < len(joined), "the real job's console had no worker line to leave out"
        # the ranks' files and hvdlog run's exit record (<job>/<host>/launcher.jsonl) ship as ever
        mine = sorted(p for p in [*root.rglob("rank-*"), *root.rglob("launcher.jsonl")] if p.parent.name == host)
        theirs = sum(len(p.read_text().splitlines()) if p.suffix == ".jsonl" else len(join_lines(p.read_text(), NATIVE_PARSERS)) for p in mine)
        events = _run_filebeat(root, host, tmp_path, theirs + len(kept), settings={"HVDLOG_SHIP_LAUNCHER": "true"})
        shipped = sorted((e for e in events if e["log"]["file"]["path"] == str(launcher)), key=lambda e: e["log"]["offset"])
        assert [e["message"] for e in shipped] == kept
        assert len(events) == theirs + len(kept)
        assert all(e["job"] == "gloo-crash" and e["tags"] == ["hvdlog_native"] and "rank" not in e for e in shipped)
        assert not any(WORKER_LINE.match(e["message"].encode(), len("2026-12-05T07:38:46.381819Z ")) for e in shipped)
        assert any("Process 1 exit with status code" in e["message"] for e in shipped), [e["message"][:80] for e in shipped]

    def test_ships_what_terminals_and_schedulers_add(self, tmp_path: Path) -> None:
        """Real-world consoles coloured, glued to tqdm's progress and behind prefixes no list
        names (tests/support/variants.py), one per-rank file per stream: a real Filebeat joins
        their lines exactly as the emulation does (the Logstash path's variant test uses it),
        horovodrun's own traceback behind Determined's prefix included (the `before` stages)."""
        from corpus.realworld import real_cases
        from support.native_events import streams_of
        from support.variant_expectations import case_files
        from support.variants import variants

        chosen = {"gloo-nccl-init-chained", "legacy-stall-leading-space", "openmpi-cxx-terminate", "gloo-first-exit-is-victim"}
        kinds = {"ansi", "tqdm-glued", "prefix-determined"}
        root, host, expected = tmp_path / "root", "node-v", {}
        for case in (case for case in real_cases() if case.id in chosen):
            for variant in (v for v in variants(case.id, case_files(case)) if v.name in kinds):
                for name, data in variant.files.items():
                    scratch = tmp_path / "scratch" / case.id / variant.name / name
                    scratch.parent.mkdir(parents=True, exist_ok=True)
                    scratch.write_bytes(data)
                    for index, stream in enumerate(streams_of(scratch)):
                        path = root / f"{case.id}-{variant.name}" / host / f"rank-{index}.stderr.log"
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_text("\n".join(stream) + "\n", encoding="utf-8")
                        expected[str(path)] = join_lines("\n".join(stream) + "\n", NATIVE_PARSERS)
        assert len({path.split("/")[-3] for path in expected}) == len(chosen) * len(kinds)
        (tmp_path / "out").mkdir()
        started = time.monotonic()
        events = _run_filebeat(root, host, tmp_path / "out", sum(map(len, expected.values())), patience=360)
        print(f"{len(expected)} files, {len(events)} events in {time.monotonic() - started:.0f} s")
        by_file: dict[str, list[str]] = {}
        for event in sorted(events, key=lambda e: (e["log"]["file"]["path"], e["log"]["offset"])):
            by_file.setdefault(event["log"]["file"]["path"], []).append(event["message"])
        differ = {path: next((pair for pair in itertools.zip_longest(by_file.get(path, []), joined) if pair[0] != pair[1]), None)
                  for path, joined in expected.items() if by_file.get(path) != joined}  # the first event that differs
        assert not differ, differ
        assert any("\x1b[" in m and "\n" in m for ms in by_file.values() for m in ms)  # a coloured multi-line event
        assert any("\r" in m and "\n" in m for ms in by_file.values() for m in ms)  # one glued to progress

    def test_ships_a_process_without_rank(self, tmp_path: Path) -> None:
        """A plain `python` run through hvdlog (no launcher: rank-unknown-pid<N> files): every event
        shipped with the job and host, none with a rank (the template's integer field stays absent,
        never a word that Elasticsearch would refuse), native ones with the process's pid and stream."""
        root = tmp_path / "root"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("HOROVOD_", "HVDLOG_", "OMPI_", "PMI", "SLURM_"))}
        script = ("import sys, hvdlog\n"
                  "hvdlog.configure(root=sys.argv[1], job='solo', stall_after=None)\n"
                  "hvdlog.get_logger().info('hello', step=1)\nprint('a plain print', flush=True)\n"
                  "print('an error line', file=sys.stderr, flush=True)\nhvdlog.shutdown()\n")
        result = subprocess.run([sys.executable, "-c", script, str(root)], env={**clean, "PYTHONPATH": str(REPO)},
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        (node,) = (root / "solo").iterdir()
        host = node.name
        files = sorted(node.glob("rank-unknown-pid*"))
        assert [p.name.split(".", 1)[1] for p in files] == ["jsonl", "stderr.log", "stdout.log"], files
        pid = int(files[0].name.split(".")[0].removeprefix("rank-unknown-pid"))
        (tmp_path / "fb").mkdir()
        events = _run_filebeat(root, host, tmp_path / "fb", 4)
        by_message = {e["message"].split("Z ", 1)[-1]: e for e in events}
        ended = "process exit: status 0 (the script ended)"  # the process's own exit record
        assert set(by_message) == {"hello", "a plain print", "an error line", ended}, [e["message"] for e in events]
        for event in events:
            assert (event["job"], event["host"]["name"]) == ("solo", host), event
            assert event.get("rank") is None, event  # absent (native) or null (the event's own: no rank)
        for message, stream in (("a plain print", "stdout"), ("an error line", "stderr")):
            native = by_message[message]
            assert (native["process"]["pid"], native["horovod"]["launcher"]["stream"]) == (pid, stream)
            assert "rank" not in native and "error" not in native and "log.flags" not in json.dumps(native)
        # hvdlog's own reader of the same files says the same: job and host from the path, no rank, the pid
        from click.testing import CliRunner

        from hvdlog.cli.main import cli

        parsed = [json.loads(line) for line in CliRunner().invoke(cli, ["parse", str(root)]).output.splitlines()]
        assert {doc["message"].split("Z ", 1)[-1] for doc in parsed} == set(by_message), parsed
        for doc in parsed:
            assert (get_field(doc, "job"), get_field(doc, "host.name"), get_field(doc, "rank")) == ("solo", host, None), doc
        assert {get_field(doc, "process.pid") for doc in parsed} == {pid}


def stall_report(ranks: int) -> list[str]:
    """The stall inspector's report on rank 0 of a ``ranks``-rank job where every other rank
    is missing (Horovod 0.28 format, ARCHITECTURE.md): one line per missing rank."""
    header = (
        "[2026-11-30 14:00:00.123456: W /tmp/horovod-0.28.1/horovod/common/stall_inspector.cc:107] One or more tensors were"
        " submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for"
        " more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that"
        " only subset of ranks is submitting tensors, which will cause deadlock. "
    )
    return [header, "Missing ranks:", *(f"{rank}: [allreduce.grad.layer{rank % 7}, allreduce.grad.bias{rank % 5}]" for rank in range(1, ranks))]


@pytest.mark.tools
class TestLargeJobs:
    """A stall block of a 4,096-rank job through the real Filebeat and the parsing pieces."""

    def test_4096_rank_stall_block_arrives_whole(self, tmp_path: Path) -> None:
        """Filebeat (shipper/filebeat.yml, real build) ships the 4,097-line block as ONE event,
        and parsing that event names all 4,095 missing ranks."""
        from hvdlog.parse import parse_lines

        root, host = tmp_path / "root", "node1"
        rank_dir = root / "big-job" / host
        rank_dir.mkdir(parents=True)
        block = stall_report(4096)
        after = "[2026-11-30 14:00:05.000001: I /tmp/horovod-0.28.1/horovod/common/operations.cc:600] after the stall"
        (rank_dir / "rank-0.stderr.log").write_text("\n".join([*block, after]) + "\n")
        out = tmp_path / "fb"
        out.mkdir()
        events = _run_filebeat(root, host, out, expected=2)
        assert len(events) == 2, [e["message"][:80] for e in events]
        shipped = sorted(events, key=lambda e: e["log"]["offset"])
        assert shipped[0]["message"].split("\n") == block, "the stall block was cut or split"
        assert shipped[1]["message"] == after
        documents = list(parse_lines(shipped[0]["message"].split("\n"), path=str(rank_dir / "rank-0.stderr.log"), timezone="UTC"))
        stalls = [doc for doc in documents if (doc.get("horovod") or {}).get("stall")]
        assert len(stalls) == 1, documents[:3]
        assert sorted(stalls[0]["horovod"]["stall"]["missing_ranks"]) == list(range(1, 4096))

    def test_max_lines_covers_large_jobs(self) -> None:
        """Both multiline parsers allow a block for 16,384+ ranks (one line per missing rank)."""
        for parser in INPUTS["hvdlog-native"]["parsers"]:
            assert parser["multiline"]["max_lines"] >= 16_384 + 2


@pytest.mark.tools
class TestTimelineInput:
    """The input for documents derived from Horovod's timeline (hvdlog/timeline_format/documents.py)."""

    def test_paths(self, tmp_path: Path) -> None:
        """The export and its rotations go to the timeline input only; the raw timeline and rank files do not."""
        env = _env(tmp_path, "node1")
        host = tmp_path / "job-1" / "node1"
        for name, expected in [("horovod-timeline.ndjson", ["hvdlog-timeline"]), ("horovod-timeline.ndjson.2", ["hvdlog-timeline"]),
                               ("horovod-timeline.json", []), ("horovod-timeline.3.json", []),
                               ("horovod-timeline-p42.ndjson", ["hvdlog-timeline"]), ("horovod-timeline-p42-e1.json", [])]:
            assert [i for i, c in INPUTS.items() if _matches(host / name, c, env)] == expected, name
        assert not _matches(tmp_path / "job-1" / "node2" / "horovod-timeline.ndjson", INPUTS["hvdlog-timeline"], env)
        assert not _matches(layout.rank_file(tmp_path, "job-1", "node1", 0), INPUTS["hvdlog-timeline"], env)
        tokenizer = expand(INPUTS["hvdlog-timeline"]["processors"][0]["dissect"]["tokenizer"], env)
        assert dissect(tokenizer, str(host / "horovod-timeline.ndjson")) == {"job": "job-1", "host.name": "node1"}

    def test_real_filebeat_ships_the_export(self, tmp_path: Path) -> None:
        """A real Filebeat ships every exported document, keys expanded, job and host from the path."""
        from hvdlog.timeline_format.documents import documents, export_line
        from hvdlog.timeline_format.records import negotiations_and_runs

        root, host = tmp_path / "root", "node1"
        target = root / "job-tl" / host / "horovod-timeline.ndjson"
        target.parent.mkdir(parents=True)
        records = negotiations_and_runs([Path(__file__).resolve().parents[1] / "timeline" / "gloo-straggler-rank1-nocache.json"])
        docs = list(documents(records, None, None))
        # A line the job's user wrote into their own folder, claiming another job's path, job and host.
        forged = {**docs[0], "log.file.path": str(root / "victimjob" / "victimhost" / "horovod-timeline.ndjson"),
                  "job": "victimjob", "host.name": "victimhost"}
        target.write_bytes(b"".join(map(export_line, docs)) + json.dumps(forged).encode() + b"\n")
        (tmp_path / "fb").mkdir()
        events = _run_filebeat(root, host, tmp_path / "fb", len(docs) + 1)
        assert len(events) == len(docs) + 1
        shipped = sorted(events, key=lambda e: e["log"]["offset"])
        assert (shipped[-1]["job"], shipped[-1]["host"]["name"], shipped[-1]["log"]["file"]["path"]) == ("job-tl", host, str(target))
        shipped = shipped[:-1]
        for event, doc in zip(shipped, docs, strict=True):
            assert (event["job"], event["host"]["name"], event["tags"]) == ("job-tl", host, ["hvdlog_timeline"])
            assert event["horovod"]["timeline"]["tensor"] == doc["horovod.timeline.tensor"]
            assert event["horovod"]["timeline"].get("last_rank") == doc.get("horovod.timeline.last_rank")
            assert event["@timestamp"][:23] == doc["@timestamp"][:23]

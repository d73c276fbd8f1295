"""Every command example in README.md and docs/cli.md runs, on the very logs `make demo` makes.

The demo's two real trainings (scripts/demo-train.sh: a stall, a crash) write ``demo-logs/``;
each ``hvdlog …`` line of a ``sh`` code block then runs as a shell command in that folder
(pipes included) and must exit 0 with output and no traceback. Examples with ``--es`` run
against the session's real Elasticsearch, after ``hvdlog install`` and the demo's documents
are indexed into the data streams; ``--kibana`` is dropped (no Kibana can run here). The
synopsis blocks are checked the other way: every option they show exists in ``--help``.
So the docs cannot drift from the tool again.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = (REPO / "README.md", REPO / "docs" / "cli.md")
ENV = {**os.environ, "PYTHONPATH": str(REPO), "TZ": "UTC", "NO_COLOR": "1"}
_BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
#: Options in the docs that belong to other programs.
_FOREIGN_OPTIONS = {"--output-filename"}


def _blocks(lang: str) -> Iterator[tuple[str, str]]:
    for doc in DOCS:
        for block in _BLOCK.finditer(doc.read_text()):
            if block["lang"] == lang:
                yield doc.name, block["body"]


def _examples() -> list[tuple[str, str]]:
    """(document, command line) for every ``hvdlog …`` line of a sh block, trailing comment removed."""
    found = []
    for name, body in _blocks("sh"):
        for line in body.splitlines():
            if line.startswith("hvdlog "):
                found.append((name, re.split(r"\s{2,}#|\s#\s", line, maxsplit=1)[0].strip()))
    return found


EXAMPLES = _examples()
FILE_EXAMPLES = [example for example in EXAMPLES if "--es" not in example[1]]
ES_EXAMPLES = [example for example in EXAMPLES if "--es" in example[1]]


@pytest.fixture(name="demo", scope="module")
def fixture_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``demo-logs/`` from the demo's real trainings."""
    where = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo-train.sh"), str(where / "demo-logs"), "quiet"],
        capture_output=True, text=True, env=ENV, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (where / "demo-logs").iterdir()) == ["demo-crash", "demo-stall"]
    return where


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The example as a user types it: ``hvdlog`` is this checkout's CLI, pipes fail the line."""
    hvdlog = f"{shlex.quote(sys.executable)} -m hvdlog"
    script = "set -o pipefail\n" + re.sub(r"^hvdlog ", hvdlog + " ", command)
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, env=ENV, timeout=300, check=False)


def _assert_ran(result: subprocess.CompletedProcess[str], command: str) -> None:
    assert "Traceback" not in result.stderr, (command, result.stderr)
    assert result.returncode == 0, (command, result.returncode, result.stderr)
    assert result.stdout.strip() or result.stderr.strip(), command


@pytest.mark.horovod
@pytest.mark.parametrize(("doc", "command"), FILE_EXAMPLES, ids=[f"{doc}: {command}" for doc, command in FILE_EXAMPLES])
def test_file_example_runs(doc: str, command: str, demo: Path) -> None:
    """The example exits 0 with output on the demo's logs."""
    _assert_ran(_shell(command, demo), command)


@pytest.fixture(name="demo_indexed", scope="module")
def fixture_demo_indexed(demo: Path, es_url: str) -> Path:
    """The demo's documents in the data streams `hvdlog install` made on the real server."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.parse import parse_paths
    from hvdlog.query.files import discover

    installed = _shell(f"hvdlog install --es {es_url}", demo)
    assert installed.returncode == 0, installed.stderr
    docs = [doc for doc in parse_paths([str(p) for p in discover([demo / "demo-logs"], print)], timezone="UTC") if doc.get("@timestamp")]
    es = Elasticsearch(es_url, request_timeout=60)
    actions = ({"_op_type": "create", "_index": f"logs-{doc['event']['dataset']}-docs", "_source": doc} for doc in docs)
    ok, errors = bulk(es, actions, refresh="wait_for", raise_on_error=False)
    es.close()
    assert not errors and ok == len(docs), errors[:3]
    return demo


@pytest.mark.horovod
@pytest.mark.elasticsearch
@pytest.mark.parametrize(("doc", "command"), ES_EXAMPLES, ids=[f"{doc}: {command}" for doc, command in ES_EXAMPLES])
def test_elasticsearch_example_runs(doc: str, command: str, demo_indexed: Path, es_url: str) -> None:
    """The example exits 0 with output against the real server holding the demo's documents."""
    command = re.sub(r"https://es:9200", es_url, command)
    command = re.sub(r"\s--kibana\s+\S+", "", command)
    _assert_ran(_shell(command, demo_indexed), command)


def test_examples_were_found() -> None:
    """The extraction sees the examples (an empty list would pass everything above)."""
    commands = {command.split()[1] for _, command in EXAMPLES}
    assert {"grep", "stalls", "stragglers", "first-failure", "parse", "install", "report", "jobs", "timeline"} <= commands, commands
    assert ES_EXAMPLES and len(FILE_EXAMPLES) >= 8


def test_synopsis_options_exist() -> None:
    """Every option a synopsis or table shows is one the command has (``--help``)."""
    helps: dict[str, str] = {}

    def help_of(command: str) -> str:
        if command not in helps:
            result = subprocess.run([sys.executable, "-m", "hvdlog", command, "--help"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
            assert result.returncode == 0, (command, result.stderr)
            helps[command] = result.stdout
        return helps[command]

    for _, body in _blocks(""):
        for line in body.splitlines():
            if match := re.match(r"hvdlog ([a-z-]+)", line.strip()):
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
                    assert option in help_of(match[1]), (match[1], option)
    text = (REPO / "docs" / "cli.md").read_text()
    every_help = "".join(help_of(command) for command in ("grep", "stalls", "stragglers", "first-failure", "parse", "timeline", "install"))
    unknown = {option for option in re.findall(r"`(--[a-z][a-z-]*)", text) if option not in every_help} - _FOREIGN_OPTIONS
    assert not unknown, unknown


#: Every hand-written Markdown file (CHANGELOG keeps old names on purpose).
MARKDOWN = sorted(p for p in REPO.rglob("*.md") if not {".git", "node_modules", "corpus"} & set(p.parts) and p.name != "CHANGELOG.md")
_LINK = re.compile(r"\]\(([^)\s]*)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"`|\*|_(?=\w)|(?<=\w)_", "", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    body = _BLOCK.sub("", path.read_text())
    return {_slug(found) for found in _HEADING.findall(body)}


def test_links_and_anchors_resolve() -> None:
    """Every relative link names a file that exists, and every #anchor a heading of its file."""
    broken = []
    for doc in MARKDOWN:
        for target in _LINK.findall(_BLOCK.sub("", doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (doc.parent / file_part).resolve() if file_part else doc
            if not linked.exists():
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{doc.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, broken


_NAMED_PATH = re.compile(r"(?<![\w/.-])((?:tests|scripts|setup|docs|hvdlog)/[\w./-]+\.(?:py|sh|md|json))\b")


def test_named_files_exist() -> None:
    """The repository paths the docs and comments name exist (no `scripts/setup.sh` after a rename)."""
    history = REPO / "bench" / "results"  # dated runs name the files of their day, as the CHANGELOG does
    written = [doc for doc in MARKDOWN if history not in doc.parents]
    texts = [*written, *REPO.glob("scripts/*.sh"), *REPO.glob("setup/*.sh"), REPO / "Makefile", REPO / "elk-compose.yml"]
    missing = sorted({f"{path.relative_to(REPO)}: {name}" for path in texts for name in _NAMED_PATH.findall(path.read_text())
                      if not (REPO / name).exists() and "*" not in name})
    assert not missing, missing


def test_no_machine_paths_in_docs() -> None:
    """Docs name paths relative to the clone or the cache, never one machine's absolute paths."""
    written = [doc for doc in MARKDOWN if doc.name != "fields.md"]  # generated: quotes real log lines
    found = [f"{doc.relative_to(REPO)}: {m}" for doc in written for m in re.findall(r"(?<![\w~$])/(?:root|home|work|tmp/tmp)\S*", doc.read_text())]
    assert not found, found


def test_certificate_example_names_are_accepted() -> None:
    """The node names of docs/deploy.md's `certs filebeat` example, as bash expands them, pass certs.sh's own check."""
    (line,) = [line for line in (REPO / "docs" / "deploy.md").read_text().splitlines() if "run --rm certs filebeat node" in line]
    arguments = line.split("certs filebeat ", 1)[1].split("#", 1)[0]
    expanded = subprocess.run(["bash", "-c", f"printf '%s\\n' {arguments}"], capture_output=True, text=True, timeout=30, check=True).stdout.split()
    rule = re.search(r'\[\[ "\$node" =~ (\S+) \]\]', (REPO / "setup" / "certs.sh").read_text())
    assert rule and len(expanded) >= 3, (rule, expanded)
    for name in expanded:
        accepted = subprocess.run(["bash", "-c", f'node="$1"; [[ "$node" =~ {rule[1]} ]]', "_", name], timeout=30, check=False)
        assert accepted.returncode == 0, f"certs.sh refuses the documented node name {name!r}"


def test_docs_index_lists_every_page() -> None:
    """docs/README.md links every page under docs/ (and only pages that exist): the index is the way in."""
    index = REPO / "docs" / "README.md"
    listed = {target.partition("#")[0] for target in _LINK.findall(_BLOCK.sub("", index.read_text())) if not re.match(r"[a-z]+:", target)}
    pages = {page.name for page in (REPO / "docs").glob("*.md") if page != index}
    assert pages - listed == set(), f"pages missing from docs/README.md: {sorted(pages - listed)}"
    assert {name for name in listed if name.endswith(".md")} - pages == set(), f"docs/README.md lists pages that do not exist: {sorted(listed - pages)}"


_DOC_REFERENCE = re.compile(r"docs/([a-z-]+\.md)(?:,\s*\"?([A-Z][\w ]*[\w]))?")
_SOURCES = {".py", ".rb", ".conf", ".yml", ".json", ".txt", ".sh", ".toml", ".md"}


def test_docs_named_in_code_exist() -> None:
    """A comment or docstring naming ``docs/PAGE.md`` (", Section") names a page and a heading that exist (pages were split by question)."""
    texts = [p for p in REPO.rglob("*") if p.suffix in _SOURCES and p.is_file() and not {".git", "node_modules", "corpus", "results"} & set(p.parts)
             and p.name != "CHANGELOG.md"]
    headings = {page.name: {h.lower() for h in _HEADING.findall(_BLOCK.sub("", page.read_text()))} for page in (REPO / "docs").glob("*.md")}
    wrong = []
    for path in texts:
        for page, section in _DOC_REFERENCE.findall(path.read_text(errors="replace")):
            if page not in headings:
                wrong.append(f"{path.relative_to(REPO)}: docs/{page} (no such page)")
            elif section and not any(heading.replace("`", "").startswith(section.lower()) for heading in headings[page]):
                wrong.append(f"{path.relative_to(REPO)}: docs/{page}, {section} (no such heading)")
    assert texts and not wrong, wrong


def test_every_compose_variable_is_in_env_example() -> None:
    """Each variable elk-compose.yml reads (`${NAME...}`) is explained in .env.example, the operator's only list of them."""
    compose = (REPO / "elk-compose.yml").read_text()
    example = (REPO / ".env.example").read_text()
    read = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", compose))
    listed = set(re.findall(r"^(?:#\s*)?([A-Z_][A-Z0-9_]*)=", example, re.MULTILINE))
    assert read and not read - listed, f"in elk-compose.yml, not in .env.example: {sorted(read - listed)}"

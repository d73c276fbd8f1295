"""What each folder may import, and what each entry point may load.

Two tables. ``FOLDER_RULES``: what no module under a folder of the package may import,
read from the source (every import statement, also those inside functions), so a new module
is covered the moment it is added. ``CASES``: entry points run in a fresh interpreter, and
the modules that must not be in ``sys.modules`` afterwards (a fresh process per row, because
``sys.modules`` of this one already holds everything the other tests imported).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hvdlog"
CLI_SIDE = ("click", "rich", "elasticsearch", "elastic_transport", "yaml", "hvdlog.cli")
TRAINING_SIDE = ("structlog", "orjson", "hvdlog.runtime", "torch", "horovod")
READ_SIDE = ("hvdlog.parse", "hvdlog.query", "hvdlog.analyses", "hvdlog.watch", "hvdlog.elastic", "hvdlog.timeline", "hvdlog.cli")
LIBRARIES_OF_THE_CLI = ("click", "rich", "elasticsearch", "elastic_transport", "yaml")
#: Everything of ours above the shared modules.
ABOVE_SHARED = ("hvdlog.runtime", "hvdlog.query", "hvdlog.analyses", "hvdlog.watch", "hvdlog.elastic", "hvdlog.timeline", "hvdlog.cli")

#: (files, relative to hvdlog/, as a glob) -> module prefixes none of them may import.
FOLDER_RULES: dict[str, tuple[str, ...]] = {
    # The training side: stdlib, structlog, orjson (and Horovod/torch when present), never the read side.
    "runtime/**/*.py": (*READ_SIDE, *LIBRARIES_OF_THE_CLI),
    # The field contract imports nothing of ours.
    "fields.py": ("hvdlog",),
    # What every side shares stays below every side.
    "documents.py": (*ABOVE_SHARED, *LIBRARIES_OF_THE_CLI),
    "layout.py": (*ABOVE_SHARED, *LIBRARIES_OF_THE_CLI),
    "types.py": ("hvdlog",),
    # Horovod's timeline format is shared by the rank's export and the read side's analysis.
    "timeline_format/**/*.py": ("hvdlog.runtime", *READ_SIDE, *LIBRARIES_OF_THE_CLI),
    # Parsing never imports the CLI, the query layer or the training side.
    "parse/**/*.py": ("hvdlog.runtime", "hvdlog.query", "hvdlog.analyses", "hvdlog.watch", "hvdlog.cli", "hvdlog.timeline", *LIBRARIES_OF_THE_CLI),
    # The reading layer reads; what is asked of the documents sits above it.
    "query/**/*.py": ("hvdlog.runtime", "hvdlog.cli", "hvdlog.analyses", "hvdlog.watch", "hvdlog.timeline", "click", "rich"),
    # The analyses run in a process that never trains, and know nothing of the watcher.
    "analyses/**/*.py": ("hvdlog.runtime", "hvdlog.cli", "hvdlog.watch", "click", "rich"),
    # The watcher's detectors and delivery: below the command line.
    "watch/**/*.py": ("hvdlog.runtime", "hvdlog.cli", "click", "rich"),
    "timeline/**/*.py": ("hvdlog.runtime", "hvdlog.cli", "click", "rich"),
}


def _imported(path: Path) -> set[str]:
    """Every module an import statement of the file names (``from . import x`` resolved in hvdlog)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize(("pattern", "forbidden"), FOLDER_RULES.items(), ids=list(FOLDER_RULES))
def test_folder_imports_nothing_forbidden(pattern: str, forbidden: tuple[str, ...]) -> None:
    """No module matched by the folder's glob imports anything its row forbids."""
    files = sorted(PACKAGE.glob(pattern))
    assert files, f"{pattern} matches no file: the table is stale"
    offences = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in files
        for name in _imported(path)
        if any(_matches(name, prefix) for prefix in forbidden)
    }
    assert not offences, sorted(offences)


def test_top_level_is_the_facade_and_the_shared_modules() -> None:
    """hvdlog/*.py is the lazy facade plus at most five shared modules; everything else has a folder."""
    shared = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in {"__init__.py", "__main__.py"})
    assert len(shared) <= 5, shared

#: (id, code run in a fresh interpreter, modules it must not load)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("package", "import hvdlog", (*TRAINING_SIDE, *CLI_SIDE)),
    # Templates and fingerprints (hvdlog.analyses) are the read side's: training never loads them.
    ("package-no-templates", "import hvdlog", ("hvdlog.analyses", "hvdlog.analyses.templates", "hvdlog.analyses.fingerprint")),
    ("fields", "import hvdlog.fields", (*TRAINING_SIDE, *CLI_SIDE, "hvdlog.parse")),
    ("generate", "import hvdlog.elastic.generate", (*TRAINING_SIDE, *CLI_SIDE)),
    ("timeline-format", "import hvdlog.timeline_format.documents", ("structlog", "hvdlog.runtime", "torch", "horovod", *CLI_SIDE, *READ_SIDE)),
    ("layout", "import hvdlog.layout", (*TRAINING_SIDE, *CLI_SIDE)),
    (
        "configure",
        "import hvdlog, sys; hvdlog.configure(root=sys.argv[1], job='imports'); hvdlog.get_logger().info('hello'); hvdlog.shutdown()",
        CLI_SIDE,
    ),
    (
        "parse",
        "import sys; from hvdlog.parse import parse_paths; list(parse_paths([sys.argv[2]]))",
        (*CLI_SIDE, "structlog", "hvdlog.runtime", "torch"),
    ),
    ("query-files", "import hvdlog.query.files", (*CLI_SIDE, "structlog", "hvdlog.runtime", "torch")),
    ("query-analyses", "import hvdlog.analyses.stalls, hvdlog.analyses.failures, hvdlog.analyses.stragglers", (*CLI_SIDE, "structlog")),
    ("cli-entry", "import hvdlog.cli.main", ("rich", "elasticsearch", "structlog", "hvdlog.runtime", "hvdlog.parse", "torch")),
    (
        "cli-parse",  # its start-up is part of its throughput (issue #14): no query, output or timeline modules
        (
            "import contextlib, sys\nfrom hvdlog.cli.main import main\nsys.argv[1:] = ['parse', '-q', sys.argv[2]]\n"
            "with contextlib.suppress(SystemExit):\n    main()"
        ),
        (
            "rich", "elasticsearch", "elastic_transport", "structlog", "torch",
            # the progress line (hvdlog.query.progress, stdlib only) is all it takes of the reading layer
            "hvdlog.query.files", "hvdlog.query.spec", "hvdlog.query.source", "hvdlog.analyses",
            "hvdlog.timeline", "hvdlog.cli.output", "hvdlog.cli.options",
        ),
    ),
]


@pytest.mark.parametrize(("code", "forbidden"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_entry_point_does_not_load(code: str, forbidden: tuple[str, ...], tmp_path: Path) -> None:
    """The entry point runs and leaves none of the forbidden modules loaded."""
    sample = tmp_path / "rank-0.stdout.log"
    sample.write_text("[2026-11-30 14:35:49.123456: D /tmp/horovod/common/operations.cc:654] [0]: Started Horovod\nplain text\n")
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "logs"), str(sample)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert not {name for name in forbidden if name in loaded}, f"{code!r} loaded {sorted(name for name in forbidden if name in loaded)}"


def test_lazy_names_resolve() -> None:
    """Every public name of the lazy package resolves, and unknown names raise AttributeError."""
    import hvdlog

    for name in hvdlog.__all__:
        assert getattr(hvdlog, name) is not None, name
    with pytest.raises(AttributeError):
        hvdlog.no_such_name  # noqa: B018

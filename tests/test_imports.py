"""What each entry point may load: the training side stays light, parsing stays CLI-free.

One row per entry point: the Python run in a fresh interpreter, and the modules that must
not be in ``sys.modules`` afterwards. A fresh process per row, because ``sys.modules`` of
this one already holds everything the other tests imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CLI_SIDE = ("click", "rich", "elasticsearch", "elastic_transport", "yaml", "hvdlog.cli")
TRAINING_SIDE = ("structlog", "orjson", "hvdlog.config", "hvdlog.capture", "hvdlog.watchdog", "torch", "horovod")

#: (id, code run in a fresh interpreter, modules it must not load)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("package", "import hvdlog", (*TRAINING_SIDE, *CLI_SIDE)),
    ("fields", "import hvdlog.fields", (*TRAINING_SIDE, *CLI_SIDE, "hvdlog.parse")),
    ("fields-doc", "import hvdlog.fields_doc", (*TRAINING_SIDE, *CLI_SIDE)),
    ("layout", "import hvdlog.layout", (*TRAINING_SIDE, *CLI_SIDE)),
    (
        "configure",
        "import hvdlog, sys; hvdlog.configure(root=sys.argv[1], job='imports'); hvdlog.get_logger().info('hello'); hvdlog.shutdown()",
        CLI_SIDE,
    ),
    (
        "parse",
        "import sys; from hvdlog.parse import parse_paths; list(parse_paths([sys.argv[2]]))",
        (*CLI_SIDE, "structlog", "hvdlog.config", "hvdlog.capture", "hvdlog.watchdog", "torch"),
    ),
    ("query-files", "import hvdlog.query.files", (*CLI_SIDE, "structlog", "hvdlog.config", "torch")),
    ("query-analyses", "import hvdlog.query.stalls, hvdlog.query.failures, hvdlog.query.stragglers", (*CLI_SIDE, "structlog")),
    ("cli-entry", "import hvdlog.cli.main", ("rich", "elasticsearch", "structlog", "hvdlog.config", "hvdlog.parse", "torch")),
    (
        "cli-parse",  # its start-up is part of its throughput (issue #14): no query, output or timeline modules
        (
            "import contextlib, sys\nfrom hvdlog.cli.main import main\nsys.argv[1:] = ['parse', '-q', sys.argv[2]]\n"
            "with contextlib.suppress(SystemExit):\n    main()"
        ),
        (
            "rich", "elasticsearch", "elastic_transport", "structlog", "torch",
            "hvdlog.query", "hvdlog.timeline", "hvdlog.cli.output", "hvdlog.cli.options",
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

"""The real package: build the wheel, install it into a fresh venv outside the checkout, use it.

Nothing of the checkout is on ``sys.path`` there (no PYTHONPATH, the working directory is a
temporary folder): the parser must find its pattern file inside the installed package,
and every command must work on real captures from ``tests/corpus`` copied next to it.
Dependencies come from the wheelhouse ``scripts/bootstrap.sh test`` fills from PyPI once
(``$HVDLOG_CACHE/wheelhouse-*``), so the test itself needs no network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.tools


REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "corpus"


def _wheelhouse() -> Path:
    cache = Path(os.environ.get("HVDLOG_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hvdlog")
    found = sorted(cache.glob(f"wheelhouse-py{sys.version_info[0]}.{sys.version_info[1]}"))
    if not found or not any(found[0].glob("*.whl")):
        pytest.fail(f"no wheelhouse under {cache}: run `bash scripts/bootstrap.sh test` (it downloads the dependencies' wheels once)")
    return found[0]


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a user who never saw the checkout."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    return {**env, "HOME": str(home), "TZ": "UTC", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1"}


@pytest.fixture(name="installed", scope="module")
def fixture_installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(venv, working directory with captures, environment): hvdlog[cli] installed from its wheel."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"  # a copy, so the build leaves nothing in the checkout
    shutil.copytree(REPO / "hvdlog", source / "hvdlog", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    dist = base / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(source)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("hvdlog-*.whl")
    venv = base / "venv"
    env = _clean_env(base / "home")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(_wheelhouse()), f"{wheel}[cli]"],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )
    assert install.returncode == 0, install.stderr
    work = base / "work"
    for config in CORPUS.glob("*/*.log-config.yml"):
        match = re.search(r"^path: (.+)$", config.read_text(), re.MULTILINE)
        assert match, config
        target = work / config.parent.name / config.name.removesuffix("-config.yml").removesuffix(".log") / match[1].strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(config.with_name(config.name.removesuffix("-config.yml")), target)
    shutil.copy2(wheel, base / wheel.name)
    return venv, work, env


def test_training_node_install_says_what_the_command_needs(installed: tuple[Path, Path, dict[str, str]], tmp_path: Path) -> None:
    """`pip install hvdlog` (no [cli]) ships the command; without click it says what to install, exit 2, no traceback."""
    (wheel,) = installed[0].parent.glob("hvdlog-*.whl")
    env = _clean_env(tmp_path / "home")
    venv = tmp_path / "node"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=env)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links", str(_wheelhouse()), str(wheel)],
        capture_output=True, text=True, timeout=600, check=False, env=env,
    )
    assert install.returncode == 0, install.stderr
    for command in ([str(venv / "bin" / "hvdlog"), "grep", "x"], [str(venv / "bin" / "python"), "-m", "hvdlog", "--help"]):
        result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120, check=False)
        assert result.returncode == 2, result
        assert result.stderr.strip().splitlines() == [result.stderr.strip()], result.stderr  # one line
        assert "pip install 'hvdlog[cli]'" in result.stderr and "Traceback" not in result.stderr, result.stderr


def _hvdlog(installed: tuple[Path, Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    venv, work, env = installed
    return subprocess.run([str(venv / "bin" / "hvdlog"), *args], capture_output=True, text=True, cwd=work, env=env, timeout=300, check=False)


def test_wheel_holds_the_runtime_files_and_light_requirements(installed: tuple[Path, Path, dict[str, str]]) -> None:
    """The wheel carries the pattern file and py.typed; plain `pip install hvdlog` needs only structlog and orjson."""
    (wheel,) = installed[0].parent.glob("hvdlog-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(name).decode() for name in names if name.endswith(".dist-info/METADATA"))
    assert {"hvdlog/parse/assets/patterns/horovod", "hvdlog/py.typed", "hvdlog/__main__.py"} <= names
    assert not any(name.startswith(("tests/", "bench/", "training/")) for name in names)
    requirements = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    required = {re.split(r"[<>=!~; \[]", requirement)[0] for requirement in requirements if "extra ==" not in requirement}
    assert required == {"structlog", "orjson"}, required


def test_runs_from_the_venv_not_the_checkout(installed: tuple[Path, Path, dict[str, str]]) -> None:
    """The installed package is the one imported, and configure() works without the CLI side."""
    venv, work, env = installed
    probe = (
        "import sys, hvdlog; hvdlog.configure(root='logs', job='wheel'); hvdlog.get_logger().info('hi'); hvdlog.shutdown();"
        "print(hvdlog.__file__); print(sorted(m for m in ('click', 'rich', 'elasticsearch') if m in sys.modules))"
    )
    result = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, cwd=work, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    location, loaded = result.stdout.splitlines()[-2:]
    assert location.startswith(str(venv)) and str(REPO) not in location, location
    assert loaded == "[]"


def test_parse_every_capture(installed: tuple[Path, Path, dict[str, str]]) -> None:
    """`hvdlog parse` reads every real capture (consoles named one by one, trees walked)."""
    _, work, _ = installed
    files = sorted(str(path.relative_to(work)) for path in work.rglob("*") if path.is_file())
    result = _hvdlog(installed, "parse", "--tz", "UTC", *files)
    assert result.returncode == 0, result.stderr
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(docs) > 100 and {"horovod.app", "horovod.core", "horovod.launcher"} <= {d["event"]["dataset"] for d in docs}


def test_grep_stalls_first_failure_stragglers(installed: tuple[Path, Path, dict[str, str]]) -> None:
    """The query commands answer from real captures, offline."""
    grep = _hvdlog(installed, "grep", "--level", "error", "horovod.launcher")
    assert grep.returncode == 0 and "ERROR" in grep.stdout, grep.stderr
    stalls = _hvdlog(installed, "stalls", "--json", "horovod.core/mpi-stall-tree-rank0-stderr")
    assert stalls.returncode == 0, stalls.stderr
    assert any(json.loads(line)["missing_ranks"] for line in stalls.stdout.splitlines())
    failure = _hvdlog(installed, "first-failure", "horovod.launcher/gloo-crash-tree-rank1-stderr")
    assert failure.returncode == 0 and "first failure on rank 1" in failure.stdout, failure.stdout + failure.stderr
    assert "None" not in failure.stdout
    progress = _hvdlog(installed, "stragglers", "horovod.app")
    assert progress.returncode in (0, 1) and "last step" in progress.stdout, progress.stderr
    module = subprocess.run(
        [str(installed[0] / "bin" / "python"), "-m", "hvdlog", "--version"], capture_output=True, text=True, env=installed[2], timeout=60, check=False
    )
    assert module.returncode == 0 and "0.1.0" in module.stdout

"""The documented permissions for real: the watcher is another user, reading the trainer's job
through the group (issue 45, Medium 11).

Job folders are 0750 and files 0640, owned by the trainer (uid 4242, group 4242); the watcher runs
as uid 4243 with 4242 as a supplementary group and no capability (``setpriv``), without
``--spool-dir``. It can read the job but not write into it, so its spool must be its own.

The venv lives under root's 0700 home: the watcher runs in a private mount namespace
(``unshare --mount``) where ``/root`` is a 0755 tmpfs holding bind mounts of the venv and its
interpreter; nothing outside that process sees it. Needs root, ``unshare`` and ``setpriv``
(util-linux): the suite runs as root, and without them the test fails, never skips.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.watch_harness import ENV, IN_TREE, Receiver, crashed_job

TRAINER, WATCHER = 4242, 4243
REPO = Path(__file__).resolve().parents[2]
#: In a private mount namespace: /root becomes a 0755 tmpfs showing only the venv and the interpreter, then the user changes.
AS_WATCHER = """set -e
base=$(mktemp -d)
mkdir "$base/cache" "$base/pyenv"
mount --bind /root/.cache "$base/cache"
[ -d /root/.pyenv ] && mount --bind /root/.pyenv "$base/pyenv"
mount -t tmpfs -o mode=0755,size=1m tmpfs /root
mkdir /root/.cache /root/.pyenv
mount --bind "$base/cache" /root/.cache
mount --bind "$base/pyenv" /root/.pyenv
exec setpriv --reuid={uid} --regid={uid} --groups={group} --inh-caps=-all --bounding-set=-all -- "$@"
"""


def as_watcher(base: Path, *command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    tools = [shutil.which(name) for name in ("unshare", "setpriv")]
    if os.geteuid() != 0 or None in tools:
        pytest.fail("running the watcher as another user needs root, unshare and setpriv (util-linux)")
    script = base / "as-watcher.sh"
    script.write_text(AS_WATCHER.format(uid=WATCHER, group=TRAINER))
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(script), *command],
                          capture_output=True, text=True, timeout=240, env=env, check=False)


@pytest.fixture(name="base")
def fixture_base() -> Iterator[Path]:
    """A directory every user may traverse (pytest's tmp_path is root's, 0700)."""
    base = Path(tempfile.mkdtemp(prefix="hvdlog-other-user-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def trainers_job(root: Path) -> None:
    """A finished, failed job as the trainer's files are: folders 0750, files 0640, owned by the trainer."""
    crashed_job(root)
    for path in [root, *root.rglob("*")]:
        os.chown(path, TRAINER, TRAINER)
        path.chmod(0o750 if path.is_dir() else 0o640)


def test_the_watcher_as_another_user_spools_in_its_own_state(base: Path) -> None:
    root, home = base / "logs", base / "home"
    trainers_job(root)
    home.mkdir(mode=0o700)
    os.chown(home, WATCHER, WATCHER)
    # The watcher's own copy of hvdlog: the checkout may sit in a 0700 directory (a fresh clone in mktemp -d).
    shutil.copytree(REPO / "hvdlog", base / "src" / "hvdlog", ignore=shutil.ignore_patterns("__pycache__"))
    env = {key: value for key, value in ENV.items() if key != "XDG_STATE_HOME"} | {"HOME": str(home), "PYTHONPATH": str(base / "src")}
    # The permissions are real: the watcher reads the job through the group and cannot write into it.
    rank_file, planted = root / "job7" / "node1" / "rank-1.jsonl", root / "job7" / "x"
    code = f"import os; print(os.getuid(), sorted(os.getgroups()), len(open({str(rank_file)!r}).read()) > 0); open({str(planted)!r}, 'w')"
    probe = as_watcher(base, sys.executable, "-c", code, env=env)
    assert probe.stdout.split("\n")[0] == f"{WATCHER} [{TRAINER}] True" and "PermissionError" in probe.stderr, (probe.stdout, probe.stderr)
    receiver = Receiver(up=False)  # the webhook is down: every alert must be spooled
    result = as_watcher(base, *IN_TREE, "watch", "--json", "--from-start", "--exit-when-finished", "--silent-after", "1", "--interval", "0.3",
                        "--retries", "1", "--webhook", receiver.url, str(root), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nor spooled" not in result.stderr, result.stderr[-3000:]
    alerts = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [alert["kind"] for alert in alerts] == ["failure", "job_finished"] and alerts[0]["ranks"] == [1], result.stdout
    spool_dir = home / ".local" / "state" / "hvdlog" / "watch-spool"
    spooled = [json.loads(line)["alert"]["kind"] for line in (spool_dir / "job7.hvdlog-watch.spool").read_text().splitlines()]
    assert spooled == ["failure", "job_finished"]
    info = spool_dir.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (WATCHER, 0o700)
    assert not list(root.rglob("*spool*")), "nothing is written into the trainer's job"
    with contextlib.suppress(FileNotFoundError):
        (root / "job7" / "x").unlink()

"""Keep each rank's native stdout and stderr in files next to its JSON file.

Horovod's C++ core writes DEBUG/INFO to fd 1 and WARNING+ to fd 2 of each process,
below Python. We point fds 1 and 2 at pipes read by a small tee process
(:mod:`hvdlog._tee`) that appends to ``rank-N.stdout.log`` / ``rank-N.stderr.log`` and
still writes to the original console, so ``horovodrun`` shows (and tags) everything
as before. The tee outlives a killed rank long enough to drain the pipe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NativeCapture"]


@dataclass
class NativeCapture:
    """Redirects fds 1 and 2 through tee processes; ``console_fds`` keeps the originals."""

    stdout_path: Path
    stderr_path: Path
    max_bytes: int = 0
    backups: int = 5
    console_fds: dict[int, int] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        """Start both tees and swap the file descriptors (idempotent)."""
        if self.console_fds:
            return
        for stream, fd, path in ((sys.stdout, 1, self.stdout_path), (sys.stderr, 2, self.stderr_path)):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
            self.console_fds[fd] = os.dup(fd)
            os.set_inheritable(self.console_fds[fd], False)
            read_end, write_end = os.pipe()
            tee = subprocess.Popen(
                [sys.executable, "-m", "hvdlog._tee", str(path), str(self.max_bytes), str(self.backups)],
                stdin=read_end,
                stdout=self.console_fds[fd],
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C and launcher kills reach the rank, not the tee
                env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_package_parent(), os.environ.get("PYTHONPATH")]))},
            )
            os.close(read_end)
            os.dup2(write_end, fd)
            os.close(write_end)
            self.processes.append(tee)
        # Python's own prints should reach the file line by line, not at exit.
        for stream in (sys.stdout, sys.stderr):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(line_buffering=True)

    def stop(self, timeout: float = 5.0) -> None:
        """Restore the original fds, let the tees drain and exit."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for fd, original in self.console_fds.items():
            os.dup2(original, fd)
            os.close(original)
        self.console_fds.clear()
        for tee in self.processes:
            try:
                tee.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                tee.kill()
        self.processes.clear()

    def console_fd(self, fd: int) -> int:
        """The fd that reaches the original console for ``fd`` (itself when not captured)."""
        return self.console_fds.get(fd, fd)


def _package_parent() -> str:
    """So the tee finds this very hvdlog, even when run from a source checkout."""
    return str(Path(__file__).resolve().parent.parent)

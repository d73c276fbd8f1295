"""A real small filesystem for the full-disk tests (root only): it fills up for real."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "256k", mode: str | None = None) -> Iterator[Path]:
    """A real small filesystem at ``path`` (needs root): fills up for real; always unmounted."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",mode={mode}" if mode else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def read_only(path: Path) -> None:
    """Remount the tmpfs at ``path`` read-only: a real read-only directory, even for root."""
    subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)

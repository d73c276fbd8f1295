"""A writer process for ``grep -f`` rotation tests: numbered JSON events, rotated while written.

``python rotating_writer.py MODE FILE COUNT GO`` writes ``probe`` events until the file ``GO``
exists (the test creates it once ``grep -f`` printed a probe: following has started), then
events ``line 0`` .. ``line COUNT-1``, and exits. MODE ``ours``: hvdlog's own writer
(:class:`hvdlog.runtime.writer.RankFileWriter`, rename rotation, small ``max_bytes``).
MODE ``copytruncate``: plain appends, each line in two writes (a reader can see half a line),
and every 150 lines the file is copied to ``FILE.1`` (older copies shifted, as logrotate
does) and truncated in place.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path


def event(message: str) -> bytes:
    return json.dumps({"@timestamp": "2026-12-01T12:00:00.000000Z", "log.level": "info", "message": message, "rank": 1}).encode() + b"\n"


def copy_truncate(path: Path, backups: int = 30) -> None:
    for index in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{index}")
        if older.exists():
            older.rename(path.with_name(f"{path.name}.{index + 1}"))
    shutil.copyfile(path, path.with_name(f"{path.name}.1"))
    os.truncate(path, 0)


def main(mode: str, file: str, count: int, go: str) -> None:
    path = Path(file)
    if mode == "ours":
        from hvdlog.runtime.writer import RankFileWriter

        writer = RankFileWriter(path, max_bytes=30_000, backups=40)
        write = writer.write
    else:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def write(line: bytes) -> bool:
            os.write(fd, line[:40])
            time.sleep(0.0005)
            os.write(fd, line[40:])
            return True

    probe = 0
    while not os.path.exists(go):
        write(event(f"probe {probe}"))
        probe += 1
        time.sleep(0.1)
    for number in range(count):
        write(event(f"line {number}"))
        if mode == "copytruncate" and number % 150 == 149:
            copy_truncate(path)
        time.sleep(0.002)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])

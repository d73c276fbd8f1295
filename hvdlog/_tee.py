"""``python -m hvdlog._tee FILE [MAX_BYTES BACKUPS]``: copy stdin to stdout and to FILE.

Runs as a separate process so a rank that dies — even by SIGKILL — loses nothing it
wrote: the tee drains the pipe and exits at EOF. It ignores SIGINT/SIGTERM/SIGHUP for the
same reason (Ctrl-C or a launcher's kill reach the rank, which closes the pipe). Secrets
(see hvdlog.secrets) are redacted; up to one secret's length is held back for at most
50 ms so a secret split across two reads is still caught. Imports nothing heavy.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import sys

from hvdlog.secrets import Redactor, secret_values
from hvdlog.writer import RankFileWriter

_HOLD_SECONDS = 0.05


def _write_console(fd: int, data: bytes) -> int:
    """Write to the original console; when it is gone, stop trying (-1) but keep the file."""
    if fd < 0:
        return fd
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        if exc.errno in (errno.EPIPE, errno.EBADF, errno.EIO):
            return -1
        raise
    return fd


def main(argv: list[str]) -> int:
    """Tee until EOF on stdin."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    path = argv[0]
    max_bytes = int(argv[1]) if len(argv) > 1 else 0
    backups = int(argv[2]) if len(argv) > 2 else 5
    writer = RankFileWriter(path, max_bytes=max_bytes, backups=backups)
    redact = Redactor(secret_values())
    hold = max(redact.longest - 1, 0)
    console, pending = 1, b""
    while True:
        if pending:
            ready, _, _ = select.select([0], [], [], _HOLD_SECONDS)
            if not ready:  # quiet for a moment: release what we held back
                writer.write(pending)
                console = _write_console(console, pending)
                pending = b""
                continue
        chunk = os.read(0, 65536)
        if not chunk:
            break
        data = redact(pending + chunk) if redact else chunk
        cut = len(data) - hold if hold and len(data) > hold else (0 if hold else len(data))
        out, pending = data[:cut], data[cut:]
        if out:
            writer.write(out)
            console = _write_console(console, out)
    if pending:
        writer.write(pending)
        _write_console(console, pending)
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

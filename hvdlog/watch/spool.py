"""Where ``hvdlog watch`` keeps the alerts it could not deliver yet: the watcher's own, signed.

The spool is a directory of the watcher's user (by default ``$XDG_STATE_HOME/hvdlog/watch-spool``,
``~/.local/state/hvdlog/watch-spool`` without it), never a job's folder: a job's user cannot
write there, and the job's permissions never stop the watcher from writing. A directory that
another user owns, or that others may write, is refused. One file per job
(``<job>.hvdlog-watch.spool``, JSON lines); each entry carries an id and an HMAC over it made
with a key only the watcher reads (``hvdlog-watch.key``, mode 0600, made on first use). An entry
that does not verify (planted, damaged, half written) is skipped, kept, and counted, never sent.

Ids delivered are remembered for the watcher's life, so a spool that cannot be rewritten (a
read-only directory) is still delivered once. An append that fails is undone (the file cut
back to its old size), and an append after a half line starts on a new line, so a full disk
never glues two entries together.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from hvdlog.layout import safe_job_id

__all__ = ["KEY_NAME", "SPOOL_SUFFIX", "Spool", "SpoolError", "default_spool_dir"]

#: The end of each job's spool file name (not ``.jsonl``/``.log``: no walker takes it for a rank's log).
SPOOL_SUFFIX: Final = ".hvdlog-watch.spool"
#: The signing key's file name in the spool directory.
KEY_NAME: Final = "hvdlog-watch.key"


class SpoolError(RuntimeError):
    """The spool cannot be used as asked; the message is one sentence."""


def default_spool_dir() -> Path:
    """``$XDG_STATE_HOME/hvdlog/watch-spool``, or ``~/.local/state/hvdlog/watch-spool``: the watcher's own state."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "hvdlog" / "watch-spool"


class Spool:
    """The signed spool in ``directory``; safe to use from several delivery workers at once."""

    def __init__(self, directory: Path, warn: Callable[[str], None]) -> None:
        self.dir, self.warn = directory, warn
        self._lock = threading.Lock()
        self._secret: bytes | None = None
        #: Why nothing can be spooled (a read-only directory, say), once known.
        self.unusable: str | None = None
        self.sent: set[str] = set()
        self.skipped = 0
        self._skipped_at: dict[Path, int] = {}
        self._stuck: set[Path] = set()

    def open(self) -> None:
        """Make the directory (0700) and the key (0600) if missing; refuse a directory or key others may write.

        Raises :class:`SpoolError` for a directory that is not the watcher's own; a directory that
        merely cannot be written (read-only) is said once and kept for delivering what it holds.
        """
        try:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            self.unusable = f"cannot create {self.dir}: {exc.strerror}"
        with contextlib.suppress(FileNotFoundError):
            _own(self.dir, "directory")
        key = self.dir / KEY_NAME
        try:
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32))
        except FileExistsError:
            pass
        except OSError as exc:
            self.unusable = self.unusable or f"cannot write {key}: {exc.strerror}"
        with contextlib.suppress(OSError):
            _own(key, "key")
            if key.stat().st_mode & 0o077:
                raise SpoolError(f"the spool key {key} is readable by others: chmod 600 it (or remove it to make a new one)")
            try:
                self._secret = bytes.fromhex(key.read_text().strip())
            except ValueError:
                raise SpoolError(f"the spool key {key} is not one hvdlog made: remove it to make a new one") from None
        if self._secret is None:
            self.unusable = self.unusable or f"cannot read {key}"
        if self.unusable is None and not os.access(self.dir, os.W_OK):
            self.unusable = f"{self.dir} is not writable"
        if self.unusable:
            self.warn(f"spool: {self.unusable}; an alert that cannot be delivered cannot be spooled either")

    def path_of(self, job: object) -> Path:
        return self.dir / f"{safe_job_id(str(job))}{SPOOL_SUFFIX}"

    def _sign(self, *parts: Any) -> str:
        assert self._secret is not None
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def _name(self, target_key: str) -> str:
        """A target as the spool names it: keyed, so the file does not tell which URL it was for."""
        return self._sign("target", target_key)[:32]

    def append(self, target_key: str, alert: dict[str, Any]) -> Path:
        """One signed entry at the end of the job's file; raises :class:`SpoolError` with the reason."""
        path = self.path_of(alert.get("job"))
        if self._secret is None:
            raise SpoolError(self.unusable or "no key")
        entry_id, target = uuid.uuid4().hex, self._name(target_key)
        line = json.dumps({"id": entry_id, "target": target, "alert": alert, "sig": self._sign(entry_id, target, alert)}) + "\n"
        with self._lock:
            try:
                fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            except OSError as exc:
                raise SpoolError(f"cannot open {path}: {exc.strerror}") from None
            try:
                size = os.fstat(fd).st_size
                data = line.encode()
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a half line left by a full disk stays alone on its line
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(28, os.strerror(28))
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # no half entry stays behind
                raise SpoolError(f"cannot write {path}: {exc.strerror}") from None
            finally:
                os.close(fd)
        return path

    def pending(self, target_key: str) -> list[tuple[Path, str, dict[str, Any]]]:
        """The verified entries for one target not delivered yet: ``(file, id, alert)``."""
        if self._secret is None:
            return []
        target = self._name(target_key)
        found: list[tuple[Path, str, dict[str, Any]]] = []
        with self._lock:
            for path in sorted(self.dir.glob(f"*{SPOOL_SUFFIX}")):
                bad = 0
                for line in _lines(path):
                    entry = self._verified(line)
                    if entry is None:
                        bad += 1
                    elif entry["target"] == target and entry["id"] not in self.sent:
                        found.append((path, entry["id"], entry["alert"]))
                if bad != self._skipped_at.get(path, 0):
                    self.skipped += max(0, bad - self._skipped_at.get(path, 0))
                    self.warn(f"spool: {bad} entr{'y' if bad == 1 else 'ies'} of {path} malformed or not signed by this watcher: "
                              "skipped, never delivered")
                self._skipped_at[path] = bad
        return found

    def _verified(self, line: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("target"), str)
                and isinstance(entry.get("alert"), dict) and isinstance(entry.get("sig"), str)):
            return None
        expected = self._sign(entry["id"], entry["target"], entry["alert"])
        return entry if hmac.compare_digest(expected, entry["sig"]) else None

    def done(self, path: Path, ids: set[str]) -> None:
        """These entries were delivered: never again in this run, and out of the file if it can be rewritten."""
        with self._lock:
            self.sent |= ids
            kept = [line for line in _lines(path) if (_id_of(line) not in self.sent)]
            try:
                if kept:
                    temporary = path.with_name(path.name + ".tmp")
                    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                    with os.fdopen(fd, "w", encoding="utf-8") as handle:
                        handle.write("".join(line + "\n" for line in kept))
                    os.replace(temporary, path)
                else:
                    path.unlink()
            except OSError as exc:
                if path not in self._stuck:
                    self._stuck.add(path)
                    self.warn(f"spool: cannot rewrite {path} ({exc.strerror}): its delivered alerts are not sent again by this "
                              "watcher, but a restarted one would send them again")


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()]


def _id_of(line: str) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        value = json.loads(line).get("id")
        return value if isinstance(value, str) else None
    return None


def _own(path: Path, what: str) -> None:
    """Refuse a spool directory or key that another user owns or that others may write."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise SpoolError(f"the spool {what} {path} is a symbolic link: give a real directory (--spool-dir)")
    if info.st_uid != os.geteuid():
        raise SpoolError(f"the spool {what} {path} belongs to another user (uid {info.st_uid}): give one of your own (--spool-dir)")
    if info.st_mode & 0o022:
        raise SpoolError(f"the spool {what} {path} is writable by others (mode {stat.S_IMODE(info.st_mode):o}): chmod go-w it")

"""hvdlog.runtime.writer: one write per line, rotation by rename, never losing a line."""

from __future__ import annotations

import os
from pathlib import Path

from hvdlog.runtime.writer import RankFileWriter


class TestRankFileWriter:
    def test_lines_reach_the_file_immediately(self, tmp_path: Path) -> None:
        """A line is in the file as soon as write() returns (no user-space buffer)."""
        writer = RankFileWriter(tmp_path / "a" / "rank-0.jsonl")
        writer.info(b'{"n":1}\n')
        assert (tmp_path / "a" / "rank-0.jsonl").read_bytes() == b'{"n":1}\n'
        writer.close()

    def test_rotation_by_rename(self, tmp_path: Path) -> None:
        """Past max_bytes the file becomes .1, .1 becomes .2, and no line is lost or split."""
        path = tmp_path / "rank-0.jsonl"
        writer = RankFileWriter(path, max_bytes=100, backups=3)
        lines = [f'{{"n":{i:03d}}}\n'.encode() for i in range(40)]
        for line in lines:
            writer.write(line)
        writer.close()
        files = sorted(tmp_path.iterdir())
        assert [f.name for f in files] == ["rank-0.jsonl", "rank-0.jsonl.1", "rank-0.jsonl.2", "rank-0.jsonl.3"]
        kept = b"".join(p.read_bytes() for p in (path.with_name(path.name + s) for s in (".3", ".2", ".1", "")))
        assert kept.endswith(b"".join(lines[-len(kept.splitlines()):]))
        assert all(len(p.read_bytes()) <= 100 + len(lines[0]) for p in files)

    def test_closed_writer_falls_back_to_stderr(self, tmp_path: Path, capfd) -> None:
        """After close(), lines go to stderr instead of vanishing."""
        writer = RankFileWriter(tmp_path / "x.jsonl")
        writer.close()
        writer.write(b"late line\n")
        assert "late line" in capfd.readouterr().err

    def test_reopen_keeps_the_object(self, tmp_path: Path) -> None:
        """open() re-points the same writer, so cached loggers follow a reconfiguration."""
        writer = RankFileWriter(tmp_path / "one.jsonl")
        writer.write(b"1\n")
        writer.open(tmp_path / "two.jsonl")
        writer.write(b"2\n")
        writer.close()
        assert (tmp_path / "one.jsonl").read_bytes() == b"1\n"
        assert (tmp_path / "two.jsonl").read_bytes() == b"2\n"
        assert os.listdir(tmp_path) != []


class TestDeletedFile:
    """A file deleted while open (``rm -r`` of the job folder) is noticed once a second, or at
    once for a line written with ``look_first`` (a report of lost lines must not go to it)."""

    def test_a_report_written_right_after_the_deletion_reaches_the_new_file(self, tmp_path: Path, capfd) -> None:
        folder = tmp_path / "job"
        path = folder / "rank-0.jsonl"
        writer = RankFileWriter(path)
        writer.drop_note = lambda count, reason: f'{{"dropped":{count},"reason":"{reason}"}}\n'.encode()
        writer.write(b'{"n":1}\n')
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()
        writer.write(b'{"n":2}\n')  # within the second: still goes to the deleted file
        assert writer.write(b'{"report":1}\n', count_drop=False, look_first=True)
        writer.close()
        # Both lines written since the file was seen in place are counted; the report follows the note.
        assert path.read_bytes() == b'{"dropped":2,"reason":"deleted"}\n{"report":1}\n'
        assert "rank-0.jsonl was deleted while in use" in capfd.readouterr().err

    def test_without_look_first_a_line_goes_to_the_deleted_file(self, tmp_path: Path) -> None:
        """The once-a-second rule: what ``look_first`` changes (the case the fix is for)."""
        path = tmp_path / "job" / "rank-0.jsonl"
        writer = RankFileWriter(path)
        writer.write(b'{"n":1}\n')
        path.unlink()
        assert writer.write(b'{"report":1}\n', count_drop=False)
        writer.close()
        assert not path.exists()

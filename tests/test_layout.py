"""hvdlog.layout: the per-rank path contract, and the grok pattern that reads it agrees with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hvdlog import layout
from hvdlog.documents import get_field
from hvdlog.parse.launcher import path_fields

PATHS = [
    "/logs/job-1/node1/rank-0.jsonl",
    "logs/mnist-20261129-1547/gpu-node-07.cluster/rank-15.stdout.log",
    "/a/b/j/h/rank-3.stderr.log.2",
    "/shared/runs/exp_a/host_b/rank-128.jsonl.1",
    "/logs/plain/node1/rank-unknown-pid4242.stdout.log",  # a process no launcher gave a rank: job and host, no rank
    "/logs/plain/node1/rank-unknown-pid4242.jsonl",
]
NOT_PER_RANK = ["/logs/job-1/node1/rank-x.jsonl", "/logs/j/h/rank-unknown.jsonl", "/logs/rank-0.jsonl", "/logs/j/h/rank-1.txt", "/logs/j/h/notes.jsonl"]


class TestLayout:
    def test_round_trip(self, tmp_path) -> None:
        """rank_file() builds what parse_path() reads back."""
        path = layout.rank_file(tmp_path, "job-7", "node3", 12, "stderr")
        assert layout.parse_path(path) == layout.RankFile("job-7", "node3", 12, "stderr")

    @pytest.mark.parametrize("path", PATHS)
    def test_grok_pattern_agrees(self, path: str) -> None:
        """hvdlog/parse/assets/patterns/horovod's HOROVOD_LAYOUT_PATH finds the same job, host and rank as parse_path()."""
        truth = layout.parse_path(path)
        assert truth is not None
        fields = path_fields(path)
        assert (get_field(fields, "job"), get_field(fields, "host.name"), get_field(fields, "rank")) == (truth.job, truth.host, truth.rank)

    @pytest.mark.parametrize("path", NOT_PER_RANK)
    def test_other_paths_are_not_per_rank(self, path: str) -> None:
        """Paths outside the layout give no job or host, from either definition."""
        assert layout.parse_path(path) is None
        assert get_field(path_fields(path), "job") is None


def test_job_ids_are_bounded_and_unique() -> None:
    """A long or non-ASCII job name keeps a readable part plus a short hash (issue #23): it fits
    in one path component, and different names never share a directory."""
    from hvdlog.layout import MAX_JOB_ID, safe_job_id

    long_a, long_b = "exp-" + "a" * 300, "exp-" + "a" * 299 + "b"
    names = [long_a, long_b, "训练", "测试", "café-run", "cafe-run", "ünïcode job", "plain-job_1.2"]
    ids = [safe_job_id(name) for name in names]
    assert len(set(ids)) == len(ids), ids
    assert all(0 < len(job.encode()) <= MAX_JOB_ID + 11 and re.fullmatch(r"[A-Za-z0-9_.-]+", job) for job in ids), ids
    assert ids[0].startswith("exp-aaaa") and ids[2].startswith("job-") and ids[4].startswith("cafe-run-")
    assert ids[5] == "cafe-run" and ids[7] == "plain-job_1.2"  # safe names are left as they are
    assert safe_job_id("训练") == safe_job_id("训练")  # every rank derives the same id


def test_names_that_differ_only_in_unsafe_characters_get_distinct_directories() -> None:
    """``resnet 50``, ``resnet/50``, ``resnet:50`` and ``resnet-50`` shared one directory, as ``../../etc`` and ``etc`` did."""
    from hvdlog.layout import safe_job_id

    names = ["resnet 50", "resnet/50", "resnet:50", "resnet-50", "../../etc", "etc", "-c", "c"]
    ids = [safe_job_id(name) for name in names]
    assert len(set(ids)) == len(ids), ids
    assert ids[3] == "resnet-50" and ids[5] == "etc" and ids[0].startswith("resnet-50-") and ids[4].startswith("etc-"), ids
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", job) for job in ids), ids


def test_a_long_job_name_still_gets_its_files(tmp_path: Path) -> None:
    """A job name beyond NAME_MAX used to mean no log files at all for the run."""
    import subprocess
    import sys

    code = "import hvdlog; c = hvdlog.configure(root=%r, job=%r, stall_after=None, capture_native=False); hvdlog.get_logger().info('hi'); print(c.path)"
    out = subprocess.run([sys.executable, "-c", code % (str(tmp_path), "j" * 400)], capture_output=True, text=True, check=True, timeout=120)
    assert b'"message":"hi"' in Path(out.stdout.strip()).read_bytes()


def test_gzip_rotations_are_named_not_skipped_silently(tmp_path: Path) -> None:
    """A rotation compressed with gzip is not read, and the walk says so naming the file (issue #23)."""
    import gzip

    job = tmp_path / "job" / "vm"
    job.mkdir(parents=True)
    (job / "rank-0.jsonl").write_text('{"message": "x"}\n')
    with gzip.open(job / "rank-0.jsonl.1.gz", "wt") as handle:
        handle.write('{"message": "old"}\n')
    (job / "notes.txt.gz").write_bytes(b"")
    warned: list[str] = []
    assert list(layout.walk([tmp_path], warned.append)) == [job / "rank-0.jsonl"]
    assert warned == [f"{job / 'rank-0.jsonl.1.gz'}: a compressed rotation, not read (decompress it, e.g. with gunzip -k, to search it)"]
    warned.clear()
    assert list(layout.walk([job / "rank-0.jsonl.1.gz"], warned.append)) == [] and len(warned) == 1


def test_output_filename_copies_beside_the_layout_are_left_out(tmp_path: Path) -> None:
    """horovodrun's `--output-filename` tree beside hvdlog's files holds the same lines again:
    `hvdlog parse` (and parse_paths) leave its copies out, as the query commands do; a tree alone is read."""
    from hvdlog.parse import parse_paths

    job = tmp_path / "job-1"
    (job / "node1").mkdir(parents=True)
    (job / "node1" / "rank-1.stderr.log").write_text("2026-11-30T10:20:02.300871Z ValueError: boom\n")
    for stream in ("stderr", "stdout"):
        (job / "output" / "rank.1").mkdir(parents=True, exist_ok=True)
        (job / "output" / "rank.1" / stream).write_text("ValueError: boom\n")
    (job / "output" / "rank.2").mkdir()
    (job / "output" / "rank.2" / "stderr").write_text("KeyError: 'x'\n")
    kept = layout.without_launcher_copies([*sorted(layout.walk([tmp_path], print)), "-"])
    assert kept == [job / "node1" / "rank-1.stderr.log", job / "output" / "rank.1" / "stdout", job / "output" / "rank.2" / "stderr", "-"]
    messages = [doc["message"] for doc in parse_paths([tmp_path])]
    assert sorted(messages) == ["KeyError: 'x'", "ValueError: boom", "ValueError: boom"]  # rank 1's stdout copy is its own stream


def test_listed_job_one_rule_per_kind_of_file(tmp_path: Path) -> None:
    """`hvdlog jobs` lists our layout's files under their job, hvdlog run's launcher.log under its
    job, a timeline's .ndjson beside the ranks' files under the folder (its events are JSON), and
    each console outside the layout under itself (two consoles of one folder are two jobs)."""
    root = tmp_path / "logs"
    files = {
        root / "j1" / "vm" / "rank-0.jsonl": "j1",
        root / "j1" / "launcher.log": "j1",
        root / "j1" / "vm" / "horovod-timeline.ndjson": "j1",
        root / "j1" / "vm" / "horovod-timeline.ndjson.1": "j1",
        root / "consoles" / "a.log": str(root / "consoles" / "a.log"),
        root / "consoles" / "b.log": str(root / "consoles" / "b.log"),
        root / "out" / "rank.0" / "stdout": str(root / "out"),
    }
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    assert {path: layout.listed_job(path, root) for path in files} == files

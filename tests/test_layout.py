"""hvdlog.layout: the per-rank path contract, and the grok pattern that reads it agrees with it."""

from __future__ import annotations

import pytest

from hvdlog import layout
from hvdlog.documents import get_field
from hvdlog.parse.launcher import path_fields

PATHS = [
    "/logs/job-1/node1/rank-0.jsonl",
    "logs/mnist-20261129-1547/gpu-node-07.cluster/rank-15.stdout.log",
    "/a/b/j/h/rank-3.stderr.log.2",
    "/shared/runs/exp_a/host_b/rank-128.jsonl.1",
]
NOT_PER_RANK = ["/logs/job-1/node1/rank-x.jsonl", "/logs/rank-0.jsonl", "/logs/j/h/rank-1.txt", "/logs/j/h/notes.jsonl"]


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

"""Starter checks that the ground the rest stands on is real: package, CLI, Elasticsearch, Horovod."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from corpus.tools_required import horovodrun

ALLREDUCE_SCRIPT = textwrap.dedent(
    """
    import horovod.torch as hvd
    import torch

    hvd.init()
    total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum, name="starter")
    expected = hvd.size() * (hvd.size() + 1) / 2
    assert total.item() == expected, (total.item(), expected)
    print(f"rank {hvd.rank()} of {hvd.size()} allreduce ok {total.item()}", flush=True)
    """
)


class TestPackage:
    def test_imports_with_version(self) -> None:
        """The package imports and says its version."""
        import hvdlog

        assert hvdlog.__version__

    def test_cli_help(self) -> None:
        """`hvdlog --help` runs from the installed console script and exits 0."""
        exe = Path(sys.executable).with_name("hvdlog")
        assert exe.exists(), f"no console script {exe}: is the package installed in this venv?"
        result = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert "Usage: hvdlog" in result.stdout


@pytest.mark.elasticsearch
class TestElasticsearch:
    def test_index_and_term_query(self, es) -> None:
        """The fixture's real server creates an index, indexes documents and finds one by a term query."""
        es.indices.create(index="starter", mappings={"properties": {"rank": {"type": "integer"}, "message": {"type": "text"}}})
        for rank in range(4):
            es.index(index="starter", document={"rank": rank, "message": f"hello from rank {rank}"})
        es.indices.refresh(index="starter")
        hits = es.search(index="starter", query={"term": {"rank": 3}})["hits"]["hits"]
        assert [hit["_source"]["message"] for hit in hits] == ["hello from rank 3"]
        es.indices.delete(index="starter")

    def test_server_is_the_major_asked_for(self, es, es_major: str) -> None:
        """The server is a real Elasticsearch of the fixture's major, 8.x or 9.x (the client checks the product header itself)."""
        version = es.cluster.stats()["nodes"]["versions"]
        assert version and version[0].startswith(f"{es_major}."), version


def _horovodrun(tmp_path: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE_SCRIPT)
    launcher_exe = Path(horovodrun())
    cmd = [str(launcher_exe), "-np", "2", "-H", "localhost:2", *launcher, sys.executable, str(script)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env={**os.environ})


@pytest.mark.horovod
class TestHorovodrun:
    def test_gloo_two_ranks(self, tmp_path: Path) -> None:
        """A real 2-rank `horovodrun --gloo` job allreduces across both ranks."""
        result = _horovodrun(tmp_path, "--gloo")
        assert result.returncode == 0, result.stdout + result.stderr
        for rank in (0, 1):
            assert f"rank {rank} of 2 allreduce ok 3.0" in result.stdout

    def test_mpi_two_ranks(self, tmp_path: Path) -> None:
        """The same job under Open MPI (`--mpi`, root needs --allow-run-as-root)."""
        extra = ["--mpi-args=--allow-run-as-root --oversubscribe"] if os.geteuid() == 0 else []
        result = _horovodrun(tmp_path, "--mpi", *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        for rank in (0, 1):
            assert f"rank {rank} of 2 allreduce ok 3.0" in result.stdout

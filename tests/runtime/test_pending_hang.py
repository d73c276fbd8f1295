"""Which tensor: a real 2-rank hang under hvd.DistributedOptimizer, Gloo and MPI, named by the watchdog and by `hvdlog stalls`.

Gloo: rank 1 hangs before its step-3 forward pass, so rank 0 waits for every gradient and
rank 1 has submitted none. MPI: rank 1 hangs inside loss.backward() after the dense layers'
gradients, so both ranks' dense allreduces complete and rank 0 waits for exactly the conv
layers' — which Horovod's own stall inspector (MPI only) names too, the ground truth.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner
from test_training import Run, horovodrun

from hvdlog.cli.main import cli

pytestmark = pytest.mark.horovod

#: Horovod's names for the gradients of training/train.py's SmallCNN.
DENSE = {f"allreduce.{layer}.{kind}" for layer in ("fc1", "fc2") for kind in ("weight", "bias")}
CONV = {f"allreduce.{layer}.{kind}" for layer in ("conv1", "conv2") for kind in ("weight", "bias")}
HANG_SECONDS = 10
HANG = ("--hang-rank", "1", "--hang-at-step", "3", "--hang-seconds", str(HANG_SECONDS), "--stall-after", "2")


@pytest.fixture(name="gloo_hang", scope="module")
def fixture_gloo_hang(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return horovodrun(tmp_path_factory, "gloo-hang-tensors", *HANG)


@pytest.fixture(name="mpi_hang", scope="module")
def fixture_mpi_hang(tmp_path_factory: pytest.TempPathFactory) -> Run:
    # The inspector checks every 2 s (default 60) and must not shut the job down.
    env = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "2", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "0"}
    return horovodrun(tmp_path_factory, "mpi-hang-tensors", *HANG, "--hang-phase", "backward", mpi=True, env=env)


def _stalls(run: Run, rank: int) -> list[dict[str, Any]]:
    """The rank's watchdog reports while rank 1 surely still hangs at step 3.

    Not a slow hvd.init on a loaded machine (no step), and not a report taken as rank 1
    resumes: that one may rightly find some allreduces done.
    """
    assert run.result.returncode == 0, run.result.stdout[-3000:] + run.result.stderr[-3000:]
    stalls = [e for e in run.events(rank) if e.get("event.action") == "stall" and e.get("step") == 3]
    during = [e for e in stalls if e["horovod.stall.seconds"] <= HANG_SECONDS - 2]
    assert len(during) >= 2, f"rank {rank}: {len(stalls)} stall reports at step 3, {len(during)} during the hang"
    return during


def _late_tensors(run: Run) -> set[str]:
    """Tensors the step-3 reports name only after the hang (see :func:`_stalls`), not during it."""
    during, late = set(), set()
    for rank in (0, 1):
        for event in run.events(rank):
            if event.get("event.action") == "stall" and event.get("step") == 3:
                named = {*event.get("horovod.stall.tensors", ()), *event.get("horovod.stall.unsubmitted_tensors", ())}
                (during if event["horovod.stall.seconds"] <= HANG_SECONDS - 2 else late).update(named)
    return late - during


def _episodes(run: Run, *args: str) -> tuple[str, list[dict[str, Any]]]:
    """`hvdlog stalls` text and --json on the run's files."""
    text = CliRunner().invoke(cli, ["stalls", *args, str(run.root / run.job)], catch_exceptions=False)
    assert text.exit_code == 0, text.output
    as_json = CliRunner().invoke(cli, ["stalls", "--json", *args, str(run.root / run.job)], catch_exceptions=False)
    return text.stdout, [json.loads(line) for line in as_json.stdout.splitlines()]


@pytest.mark.horovod
class TestGlooHangBeforeForward:
    def test_victim_names_every_gradient_it_waits_for(self, gloo_hang: Run) -> None:
        """Rank 0 waits in the optimizer's synchronize for all 8 gradient allreduces, by name."""
        for event in _stalls(gloo_hang, 0):
            assert "synchronize" in event["horovod.stall.operation"]
            assert set(event["horovod.stall.tensors"]) == DENSE | CONV
            assert "horovod.stall.unsubmitted_tensors" not in event, "synchronize submitted every gradient"
            assert "horovod.stall.inspection_error" not in event
            assert " for allreduce." in event["message"] and "and 5 more" in event["message"]

    def test_culprit_names_what_it_never_submitted(self, gloo_hang: Run) -> None:
        """Rank 1, stuck before its forward pass, waits for nothing and has submitted none of the 8."""
        for event in _stalls(gloo_hang, 1):
            assert "horovod.stall.operation" not in event and "horovod.stall.tensors" not in event
            assert set(event["horovod.stall.unsubmitted_tensors"]) == DENSE | CONV
            assert "outside any horovod collective; not submitted: allreduce." in event["message"]

    def test_stalls_command_blames_rank_1_for_the_tensors(self, gloo_hang: Run) -> None:
        """`hvdlog stalls`: the tensors rank 0 waits for are those rank 1 never submitted."""
        text, episodes = _episodes(gloo_hang)
        (episode,) = [e for e in episodes if e["step"] == 3]
        # As in the MPI test: reports taken as rank 1 resumed may rightly name the next allreduce
        # (the metric's) on a loaded machine; a fresh clone under load failed on exactly that.
        late = _late_tensors(gloo_hang)
        assert set(episode["tensors"]) - late == set(episode["unsubmitted_tensors"]) - late == DENSE | CONV
        assert episode["unsubmitted_ranks"] == [1] and episode["missing_ranks"] == [1] and 0 in episode["waiting_ranks"]
        assert "never submitted by rank 1: allreduce." in text


@pytest.mark.horovod
class TestMpiHangInsideBackward:
    def test_victim_waits_for_exactly_the_conv_gradients(self, mpi_hang: Run) -> None:
        """Both ranks submitted the dense gradients (complete); rank 0 still waits for the conv ones only."""
        for event in _stalls(mpi_hang, 0):
            assert "synchronize" in event["horovod.stall.operation"]
            assert set(event["horovod.stall.tensors"]) == CONV

    def test_culprit_submitted_dense_not_conv(self, mpi_hang: Run) -> None:
        """Rank 1 hangs in a gradient hook: its dense allreduces finished, its conv ones never started."""
        for event in _stalls(mpi_hang, 1):
            assert "horovod.stall.operation" not in event and "horovod.stall.tensors" not in event
            assert set(event["horovod.stall.unsubmitted_tensors"]) == CONV

    def test_horovods_inspector_names_the_same_tensors(self, mpi_hang: Run) -> None:
        """Horovod's own stall inspector (rank 0's stderr) and our watchdog agree on the tensors and the rank."""
        text, episodes = _episodes(mpi_hang)
        # The hang's inspector episode names the conv gradients; on a loaded node a rank lagging on a
        # later allreduce is reported too, a stall of its own (its tensors are none of the hang's).
        (inspector,) = [e for e in episodes if e["source"] == "inspector" and set(e["tensors"]) & CONV]
        (watchdog,) = [e for e in episodes if e["source"] == "watchdog" and e["step"] == 3]
        assert inspector["missing_ranks"] == watchdog["missing_ranks"] == watchdog["unsubmitted_ranks"] == [1]
        # The episode also holds the reports taken as rank 1 resumed: on a loaded machine rank 0 may
        # by then wait for the next allreduce (the metric's), rightly. Those are not the hang's.
        late = _late_tensors(mpi_hang)
        assert set(inspector["tensors"]) == set(watchdog["tensors"]) - late == set(watchdog["unsubmitted_tensors"]) - late == CONV
        assert "never submitted by rank 1: allreduce.conv" in text


@pytest.mark.elasticsearch
def test_stalls_from_elasticsearch_name_the_same_tensors(mpi_hang: Run, es_url: str) -> None:
    """The MPI run, parsed and indexed into the real server: `stalls --es` answers exactly as on the files."""
    from elasticsearch.helpers import bulk

    from elasticsearch import Elasticsearch
    from hvdlog.elastic.templates import mappings
    from hvdlog.parse import parse_paths
    from hvdlog.query.files import discover

    index = "hvdlog-pending-hang"
    files = [str(path) for path in discover([mpi_hang.root / mpi_hang.job], lambda message: None)]
    docs = list(parse_paths(files, timezone="UTC"))
    es = Elasticsearch(es_url, request_timeout=60)
    es.options(ignore_status=404).indices.delete(index=index)
    es.indices.create(index=index, mappings=mappings(), settings={"number_of_shards": 1, "number_of_replicas": 0})
    try:
        ok, errors = bulk(es, ({"_index": index, "_source": doc} for doc in docs), refresh="wait_for", raise_on_error=False)
        assert not errors and ok == len(docs)
        _, from_files = _episodes(mpi_hang)
        result = CliRunner().invoke(cli, ["stalls", "--json", "--es", es_url, "--index", index], catch_exceptions=False)
        from_es = [json.loads(line) for line in result.stdout.splitlines()]
        assert from_es == from_files
        assert any(set(e["unsubmitted_tensors"]) == CONV for e in from_es)
    finally:
        es.indices.delete(index=index)
        es.close()


"""hvdlog.runtime.pending: naming the tensors a stalled rank waits for and those it has not submitted.

The optimizer cases run a real hvd.DistributedOptimizer in its own process (see
tests/support/pending_states.py); the 2-rank hangs are in tests/runtime/test_pending_hang.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from hvdlog.runtime import pending
from hvdlog.runtime.watchdog import describe_wait

HARNESS = Path(__file__).resolve().parents[1] / "support" / "pending_states.py"
BODY = ["allreduce.body.bias", "allreduce.body.weight"]
ALL = [*BODY, "allreduce.head.bias", "allreduce.head.weight"]
_SPEC = importlib.util.find_spec("horovod")  # where Horovod really lives (not imported here)
HOROVOD_PACKAGE = next(iter(_SPEC.submodule_search_locations or ()), "/nonexistent/horovod") if _SPEC is not None else "/nonexistent/horovod"


@pytest.fixture(name="states", scope="module")
def fixture_states() -> dict[str, Any]:
    result = subprocess.run([sys.executable, str(HARNESS)], capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.horovod
class TestRealOptimizer:
    def test_unsubmitted_follows_the_gradient_hooks(self, states: dict[str, Any]) -> None:
        """Before backward every gradient is unsubmitted; after a head-only backward only the body's, in name order."""
        assert states["fresh"] == {"waiting": [], "unsubmitted": ALL, "started": False}
        assert states["head only"] == {"waiting": [], "unsubmitted": BODY, "started": True}, "completed allreduces are not waited for"
        assert states["after synchronize"] == {"waiting": [], "unsubmitted": ALL, "started": False}, "a finished step starts over"

    def test_unsubmitted_told_in_a_collective_only_mid_step(self, states: dict[str, Any]) -> None:
        """Waiting in some collective mid-step: the missing gradients count. Between steps: nothing of the next step is 'missing'."""
        assert states["mid-step, in a collective"]["horovod.stall.unsubmitted_tensors"] == BODY
        assert states["between steps, in a collective"] == {"horovod.stall.operation": "broadcast_parameters > synchronize"}

    def test_handles_cleared_by_synchronize_count_as_complete(self, states: dict[str, Any]) -> None:
        """Polling a handle synchronize() already cleared raises in Horovod; that means done, not a failure."""
        assert states["cleared handles"] == {"waiting": [], "unsubmitted": BODY, "started": True}

    def test_found_whether_made_before_or_after_configure(self, states: dict[str, Any]) -> None:
        """Made after: registered by the wrapped factory. Made before: found on the stalled stack, as a local or an attribute."""
        assert states["factory wrapped"] and states["wrapped once"] and states["one wrapper"]
        assert states["registered"] == [True]
        assert states["early"] == {"no frame": [False], "as a local": [True], "as trainer.optimizer": [True]}

    def test_watchdog_names_unsubmitted_gradients(self, states: dict[str, Any]) -> None:
        """The real watchdog, its thread stuck mid-step: the stall event and message name the body's gradients."""
        report = states["stall outside"]
        assert report["thread"]
        assert report["fields"]["horovod.stall.unsubmitted_tensors"] == BODY
        assert "horovod.stall.tensors" not in report["fields"] and "horovod.stall.inspection_error" not in report["fields"]
        assert report["message"].endswith("outside any horovod collective; not submitted: allreduce.body.bias, allreduce.body.weight")

    def test_inspection_races_training_harmlessly(self, states: dict[str, Any]) -> None:
        """Thousands of inspections while the optimizer mutates its dicts: no failure, training still learns."""
        race = states["race"]
        assert race["inspections"] > 100 and race["errors"] == [] and race["failures counted"] == 0
        assert race["loss fell"]

    def test_unreadable_optimizer_is_named_and_counted(self, states: dict[str, Any]) -> None:
        """An optimizer whose state cannot be read: error named in the event, counted, the others still reported."""
        broken = states["broken"]
        assert broken["fields"]["horovod.stall.inspection_error"].startswith("AttributeError: ")
        assert broken["fields"]["horovod.stall.unsubmitted_tensors"] == ALL
        assert broken["failures counted"] == 1


@pytest.mark.parametrize(
    ("function", "name", "expected"),
    [
        ("allreduce", "metric.loss", "allreduce.metric.loss"),
        ("allreduce_", "x", "allreduce.x"),
        ("allreduce_async_", "x", "allreduce.x"),
        ("_allreduce_async", "x", "allreduce.x"),
        ("grouped_allreduce", "g", "grouped_allreduce.g"),
        ("broadcast_", "p.sz", "broadcast.p.sz"),
        ("allgather", "ids", "allgather.ids"),
        ("forward", "x", None),
        ("broadcast_parameters", "fc1.weight", None),
    ],
)
def test_horovod_op_name(function: str, name: str, expected: str | None) -> None:
    """Horovod's core prefixes a named op's tensor with the op; helpers that loop over many tensors name none."""
    assert pending.horovod_op_name(function, name) == expected


def test_summarize() -> None:
    """Messages show a few names and how many more."""
    assert pending.summarize(["a"]) == "a"
    assert pending.summarize(["a", "b", "c", "d", "e"]) == "a, b, c and 2 more"


class Lazy:
    """An object whose every attribute access runs code (a lazy proxy): the stack scan must never trigger it."""

    touched = False

    def __init__(self) -> None:
        object.__setattr__(self, "target", None)

    def __getattribute__(self, name: str) -> Any:
        Lazy.touched = True
        raise AttributeError(name)


def test_stack_scan_runs_no_user_code() -> None:
    """Finding optimizers on a stack reads class and instance dicts only (no properties, no __getattr__)."""
    holder = Lazy()
    assert not pending.is_distributed_optimizer(holder)
    assert all(pending.is_distributed_optimizer(found) for found in pending.find_optimizers(sys._getframe()))
    assert not Lazy.touched and holder is not None


def test_no_horovod_means_no_fields() -> None:
    """Without any DistributedOptimizer, a stall event gets nothing from this module (and nothing raises)."""
    fields: dict[str, Any] = {}
    pending.add_pending_tensors(fields, sys._getframe())
    assert fields == {}


def test_describe_wait_names_a_direct_op_like_horovod() -> None:
    """A thread blocked under a function named like Horovod's op reports the core's tensor name, not the bare argument."""
    ready, release = threading.Event(), threading.Event()
    code = compile("def allreduce(name):\n    ready.set()\n    release.wait(5)\n", os.path.join(HOROVOD_PACKAGE, "torch", "mpi_ops.py"), "exec")
    namespace: dict[str, Any] = {"ready": ready, "release": release}
    exec(code, namespace)  # noqa: S102 - a function whose code object lives in a horovod path, as Horovod's does
    thread = threading.Thread(target=namespace["allreduce"], args=("metric.loss",))
    thread.start()
    ready.wait(5)
    fields = describe_wait(sys._current_frames()[thread.ident])
    release.set()
    thread.join()
    assert fields["horovod.stall.tensors"] == ["allreduce.metric.loss"]
    assert fields["horovod.stall.operation"] == "allreduce"


def _report(rank: int, second: int, **fields: Any) -> dict[str, Any]:
    return {
        "@timestamp": f"2026-11-30T10:00:{second:02d}.000Z", "job": "j", "rank": rank, "size": 3, "step": 3,
        "event.action": "stall", "horovod.stall.source": "watchdog", "horovod.stall.seconds": 2.0,
        **{f"horovod.stall.{key}": value for key, value in fields.items()},
    }


def test_stalls_blames_only_what_others_wait_for() -> None:
    """A rank is blamed for the unsubmitted tensors another rank waits for, not for the rest of its list."""
    from hvdlog.analyses.stalls import stall_episodes

    docs = [
        _report(0, 10, operation="_DistributedOptimizer.step > synchronize", tensors=["allreduce.a", "allreduce.b"]),
        _report(1, 10, unsubmitted_tensors=["allreduce.b", "allreduce.c"]),  # mid-backward: a done, b and c not
        _report(2, 10, operation="_DistributedOptimizer.step > synchronize", tensors=["allreduce.b"]),
    ]
    (episode,) = stall_episodes(docs)
    assert episode.unsubmitted_tensors == ["allreduce.b"] and episode.unsubmitted_ranks == [1]
    assert episode.missing_ranks == [1] and episode.waiting_ranks == [0, 2]
    # The same rank waiting in a collective with its own list of unsubmitted gradients, nobody waiting for them: no blame.
    quiet = [_report(0, 10, operation="allreduce", tensors=["allreduce.metric"]), _report(1, 10, operation="allreduce", unsubmitted_tensors=["allreduce.a"])]
    (episode,) = stall_episodes(quiet)
    assert episode.unsubmitted_tensors == [] and episode.unsubmitted_ranks == []


def test_a_hung_rank_that_moves_on_into_the_allreduce_stays_the_culprit() -> None:
    """Rank 1 hangs outside any collective (first report: no operation); its watchdog's repeat
    report, made after it woke and entered the step's allreduce under load, does not turn it
    into a waiting rank: rank 1 is still the one missing, rank 0 the one waiting."""
    from hvdlog.analyses.stalls import stall_episodes

    docs = [
        _report(0, 10, operation="_DistributedOptimizer.step > synchronize", tensors=["allreduce.a"]),
        _report(1, 10),
        _report(0, 12, operation="_DistributedOptimizer.step > synchronize", tensors=["allreduce.a"]),
        _report(1, 12, operation="_DistributedOptimizer.step > synchronize", tensors=["allreduce.a"]),
    ]
    for doc in docs:
        doc["size"] = 2
    (episode,) = stall_episodes(docs)
    assert episode.missing_ranks == [1] and episode.waiting_ranks == [0], episode.to_json()
    # A rank that was waiting from its first report stays a waiting rank.
    (episode,) = stall_episodes([docs[0], _report(1, 10, operation="allreduce") | {"size": 2}])
    assert episode.waiting_ranks == [0, 1]

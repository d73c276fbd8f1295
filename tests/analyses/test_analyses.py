"""Stalls, stragglers and first failure on real horovodrun output read from files."""

from __future__ import annotations

import pytest
from support.query_corpus import FAULTS, STRAGGLER, STRAGGLER_RANKS, STRAGGLER_STEPS, Corpus, corpus
from support.query_corpus import REPO as REPO_ROOT

from hvdlog.analyses.failures import FAILURE_EVENTS, first_failure
from hvdlog.analyses.stalls import STALL_EVENTS, find_stalls, progress_filter, stall_episodes
from hvdlog.analyses.stragglers import STEP_EVENTS, stragglers
from hvdlog.documents import get_field
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter


@pytest.fixture(name="runs", scope="module")
def fixture_runs() -> Corpus:
    """The shared real runs (one hang-then-crash job, one straggler job)."""
    return corpus()


def _docs(runs: Corpus, job: str, any_of: tuple) -> list[dict]:  # type: ignore[type-arg]
    return list(FileSource([runs.logs]).search(Filter(jobs=(job,), any_of=any_of)))


@pytest.mark.horovod
class TestStalls:
    def test_hang_is_one_episode_naming_the_hung_rank(self, runs: Corpus) -> None:
        """Rank 1 hangs 4 s at step 3: one episode, rank 1 missing, rank 0 waiting in the optimizer's allreduce."""
        found = find_stalls(FileSource([runs.logs]).search, Filter(jobs=(FAULTS,)))
        episodes = [e for e in found if e.step == 3]
        assert len(episodes) == 1, [e.to_json() for e in found]
        episode = episodes[0]
        assert episode.missing_ranks == [1]
        assert episode.waiting_ranks == [0]
        assert any("synchronize" in op for op in episode.operations)
        assert 3.0 <= episode.duration_s <= 10.0
        assert episode.resolved and not episode.shutdown

    def test_without_the_progress_the_job_seems_to_die_of_the_stall(self, runs: Corpus) -> None:
        """The hung rank crashed before its watchdog said "resumed": only its later steps (the second fetch) show it moved on.
        (On a loaded machine the watchdog sometimes does say "resumed" before the crash: that is progress too, so it is
        left out here, where the reports alone are judged.)"""
        reports = [d for d in _docs(runs, FAULTS, STALL_EVENTS) if get_field(d, "event.action") != "stall_resolved"]
        reports_only = [e for e in stall_episodes(reports) if e.step == 3]
        assert [e.shutdown for e in reports_only] == [True]
        assert progress_filter(reports, Filter(jobs=(FAULTS,))) is not None  # the same reports: the stall looks open

    def test_straggler_job_has_no_stall(self, runs: Corpus) -> None:
        """A job that is slow but never stops has no stall episode (its watchdog is off)."""
        assert stall_episodes(_docs(runs, STRAGGLER, STALL_EVENTS)) == []


@pytest.mark.horovod
class TestStragglers:
    def test_slow_rank_is_flagged_fast_ranks_are_not(self, runs: Corpus) -> None:
        """Rank 1 of 3 sleeps before each step: flagged on its own samples/s, likely; ranks 0 and 2 are not."""
        rows = {row.rank: row for row in stragglers(_docs(runs, STRAGGLER, STEP_EVENTS))}
        assert set(rows) == set(range(STRAGGLER_RANKS))
        assert rows[1].outlier and rows[1].evidence == ["samples"] and rows[1].confidence == "likely"
        assert "below the median" in rows[1].reasons[0]
        assert not rows[0].outlier and not rows[2].outlier
        assert {row.last_step for row in rows.values()} == {STRAGGLER_STEPS}
        assert rows[1].steps_per_sec and rows[1].steps_per_sec < 8  # 0.15 s sleep per step bounds the rate

    def test_two_rank_job_is_not_enough_data(self, runs: Corpus) -> None:
        """The faults job: both ranks reach step 6, and 2 ranks without a timeline cannot name a straggler."""
        rows = stragglers(_docs(runs, FAULTS, STEP_EVENTS))
        assert {row.last_step for row in rows} == {6}
        assert all(row.lag_steps == 0 and not row.outlier for row in rows)
        assert rows[0].verdict.startswith("not enough data to call a straggler: 2 ranks")


@pytest.mark.horovod
class TestFirstFailure:
    def test_culprit_is_the_raising_rank_and_the_other_is_collateral(self, runs: Corpus) -> None:
        """Rank 1 raised InjectedFault; rank 0's HorovodInternalError is collateral, not blamed."""
        (report,) = first_failure(_docs(runs, FAULTS, FAILURE_EVENTS))
        assert report.culprit is not None and report.culprit["rank"] == 1
        assert report.error_type is not None and report.error_type.endswith("InjectedFault")
        assert "inject_faults" in (report.stack_trace or "")
        assert [item["rank"] for item in report.collateral] == [0]
        assert "HorovodInternalError" in report.collateral[0]["reason"] or "shut down" in report.collateral[0]["reason"]
        assert report.other_errors == []

    def test_output_filename_tree_gives_the_same_culprit(self, runs: Corpus) -> None:
        """horovodrun --output-filename captures alone still name rank 1 and its traceback."""
        docs = list(FileSource([runs.output]).search(Filter(any_of=FAILURE_EVENTS)))
        (report,) = first_failure(docs)
        assert report.culprit is not None and report.culprit["rank"] == 1
        assert "InjectedFault" in (report.error_type or "")
        assert [item["rank"] for item in report.collateral] == [0]

    def test_no_failure_in_a_clean_job(self, runs: Corpus) -> None:
        """The straggler job ended cleanly: no report."""
        assert first_failure(_docs(runs, STRAGGLER, FAILURE_EVENTS)) == []


MPI_CORPUS = REPO_ROOT / "tests" / "corpus" / "horovod.core"


class TestHorovodStallInspector:
    """Real Open MPI captures of Horovod's own stall inspector (recorded by tests/corpus/tools/record.sh)."""

    def _docs(self, name: str, any_of: tuple) -> list[dict]:  # type: ignore[type-arg]
        source = FileSource([MPI_CORPUS / name], timezone="UTC", warn=lambda message: None)
        return list(source.search(Filter(any_of=any_of)))

    def test_repeated_warnings_are_one_episode(self) -> None:
        """Three warnings 2 s apart about rank 1 are one inspector episode, without shutdown."""
        source = FileSource([MPI_CORPUS / "mpi-stall-console.log"], timezone="UTC", warn=lambda message: None)
        (episode,) = find_stalls(source.search, Filter())
        assert (episode.source, episode.missing_ranks, episode.tensors) == ("inspector", [1], ["allreduce.grad.step1"])
        assert episode.reports == 3 and not episode.shutdown
        assert 5.0 <= episode.duration_s <= 7.0

    def test_shutdown_episode(self) -> None:
        """The `!` warning and "Will shutdown": the episode ended in shutdown."""
        (episode,) = stall_episodes(self._docs("mpi-stall-shutdown-console.log", STALL_EVENTS))
        assert episode.shutdown and episode.missing_ranks == [1]

    def test_stall_shutdown_blames_the_stalled_rank_not_the_reporter(self) -> None:
        """Rank 0 printed the stall error and then died: rank 1 (marked `!`) is blamed, rank 0 is collateral."""
        (report,) = first_failure(self._docs("mpi-stall-shutdown-console.log", FAILURE_EVENTS))
        assert report.culprit is None and report.blamed_ranks == [1]
        assert report.stall is not None and report.stall["reported_by"] == 0
        assert [item["rank"] for item in report.collateral] == [0]


def _inspector_report(at: str, missing: int, tensor: str) -> list[str]:
    """Horovod 0.28's stall inspector on rank 0's stderr (the form of tests/corpus/horovod.core/mpi-stall-*)."""
    header = (f"[1,0]<stderr>:[2026-11-29 {at}: W /opt/horovod/common/stall_inspector.cc:107] One or more tensors were submitted "
              "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than "
              "2 seconds. This may indicate that different ranks are trying to submit different tensors or that only subset of "
              "ranks is submitting tensors, which will cause deadlock. ")
    return [header,
            "[1,0]<stderr>:Missing ranks:", f"[1,0]<stderr>:{missing}: [{tensor}]"]


def test_a_lagging_rank_after_a_hang_is_a_stall_of_its_own() -> None:
    """Rank 1 hangs on the conv gradient (3 reports); 6 s after the last, on a loaded node, rank 0 lags on the next
    allreduce (a report naming none of the hang's tensors): two episodes, the hang's naming rank 1 only (a loaded
    fresh-clone run named ranks 0 and 1 when the two were one episode)."""
    from hvdlog.parse import parse_lines

    lines = [*_inspector_report("16:01:44.104960", 1, "allreduce.conv1.weight"), *_inspector_report("16:01:46.105951", 1, "allreduce.conv1.weight"),
             *_inspector_report("16:01:48.117744", 1, "allreduce.conv1.weight"), *_inspector_report("16:01:54.120001", 0, "allreduce.metric.loss")]
    hang, lag = stall_episodes(parse_lines(lines, path="mpi-stall/1/rank.0/stderr", timezone="UTC"))
    assert (hang.missing_ranks, hang.tensors, hang.reports) == ([1], ["allreduce.conv1.weight"], 3)
    assert (lag.missing_ranks, lag.tensors, lag.reports) == ([0], ["allreduce.metric.loss"], 1)

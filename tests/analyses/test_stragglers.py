"""stragglers: flag only when the data supports it (plain step events), and the streaming reader's
answers equal a full read (every corpus tree, -j 2 and -j 1)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from hvdlog.analyses.resources import RESOURCE_EVENTS
from hvdlog.analyses.step_read import read_steps
from hvdlog.analyses.stragglers import STEP_EVENTS, Tally, stragglers
from hvdlog.query import files
from hvdlog.query.files import FileSource
from hvdlog.query.spec import Filter, parse_ranks

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "corpus"
BASE = "2026-12-01T10:00:{:02d}.{:06d}Z"


def _events(rank: int, rate: float, steps: int = 40, seconds: float = 0.5, *, size: int | None = None,
            epoch: int | None = None, job: str = "j", start: int = 1) -> list[dict[str, Any]]:
    """A rank's ``train step`` events: one per step, ``seconds`` apart, at ``rate`` samples/s."""
    docs = []
    for index in range(steps):
        whole = index * seconds
        doc: dict[str, Any] = {"@timestamp": BASE.format(int(whole), int((whole % 1) * 1e6)), "rank": rank, "step": start + index,
                               "job": job, "samples_per_sec": rate * (1 + 0.02 * ((index * 7 + rank) % 5 - 2)), "host": {"name": "n"}}
        if size is not None:
            doc["size"] = size
        if epoch is not None:
            doc["horovod"] = {"elastic": {"epoch": epoch}}
        docs.append(doc)
    return docs


def _job(*rates: float, **kwargs: Any) -> list[dict[str, Any]]:
    return [doc for rank, rate in enumerate(rates) for doc in _events(rank, rate, **kwargs)]


def _flagged(docs: list[dict[str, Any]], **kwargs: Any) -> list[int]:
    return [row.rank for row in stragglers(docs, **kwargs) if row.outlier]


class TestJudgement:
    def test_a_rank_at_a_third_of_the_speed_is_flagged_with_how_much_and_how_sure(self) -> None:
        rows = stragglers(_job(1000, 1010, 330, 990, 1005))
        (row,) = [row for row in rows if row.outlier]
        assert row.rank == 2 and row.evidence == ["samples"] and row.confidence == "likely"
        assert "below the median" in row.reasons[0] and "robust deviations" in row.reasons[0] and "other 4 ranks" in row.reasons[0]
        assert row.verdict.startswith("straggler: rank 2 (likely, on samples)")

    def test_three_ranks_are_enough(self) -> None:
        assert _flagged(_job(1000, 300, 1050)) == [1]

    def test_the_slow_rank_is_judged_against_the_others_spread_not_its_own(self) -> None:
        """Measured under contention: 25 samples/s against 107 and 210. With the slow rank in the
        spread (3 ranks: half of it) nothing could be flagged; against the other two it is."""
        assert _flagged(_job(107, 210, 25)) == [2]
        assert _flagged(_job(107, 210, 70)) == []  # within the others' spread

    def test_two_ranks_never_flag_on_step_figures(self) -> None:
        """With 2 ranks the median is their mean: only timeline evidence may decide."""
        rows = stragglers(_job(1000, 100))
        assert not any(row.outlier for row in rows)
        assert rows[0].verdict.startswith("not enough data to call a straggler: 2 ranks")

    def test_a_short_crashed_job_says_not_enough_data(self) -> None:
        """3 steps of a job that crashed: no speed can be told, however different the figures."""
        rows = stragglers(_job(1000, 100, 1000, 1000, steps=3))
        assert not any(row.outlier for row in rows)
        assert "not enough data to call a straggler" in rows[0].verdict and "need 3" in rows[0].verdict

    def test_too_few_seconds_is_not_enough_either(self) -> None:
        assert _flagged(_job(1000, 100, 1000, seconds=0.01)) == []
        assert _flagged(_job(1000, 100, 1000, seconds=0.01), min_seconds=0.1) == [1]

    def test_ranks_all_over_the_place_flag_nobody(self) -> None:
        """A wide spread across ranks: the slowest is within it, not an outlier."""
        rows = stragglers(_job(300, 500, 700, 1000, 1400, 2000))
        assert not any(row.outlier for row in rows)
        assert rows[0].verdict.startswith("no straggler")

    def test_within_tolerance_is_not_flagged_even_when_the_others_agree(self) -> None:
        assert _flagged(_job(1000, 1000, 700, 1000)) == []
        assert _flagged(_job(1000, 1000, 700, 1000), tolerance=0.2) == [2]

    def test_a_rank_that_stopped_is_behind_and_a_silent_one_is_named(self) -> None:
        docs = _job(1000, 1000, 1000, size=5) + _events(3, 1000, steps=20, size=5)
        rows = {row.rank: row for row in stragglers(docs)}
        assert rows[3].outlier and rows[3].evidence == ["steps"] and "20 steps behind" in rows[3].reasons[0]
        assert rows[4].outlier and rows[4].last_step is None and "no step events" in rows[4].reasons[0]
        assert not any(rows[rank].outlier for rank in (0, 1, 2))

    def test_only_the_last_incarnation_is_compared(self) -> None:
        """Elastic: rank 3 was removed by a scale-down after epoch 0; the survivors are compared in epoch 1."""
        before = _job(1000, 1000, 1000, 1000, size=4)
        after = [doc for rank in range(3) for doc in _events(rank, 1000, size=3, epoch=1, start=41)]
        rows = stragglers(before + after)
        assert [(row.rank, row.epoch) for row in rows] == [(0, 1), (1, 1), (2, 1)]
        assert not any(row.outlier for row in rows) and all(row.lag_steps == 0 for row in rows)
        assert [row.rank for row in stragglers(before + after, epoch=0)] == [0, 1, 2, 3]


    def test_timeline_flag_stands_only_when_the_rank_is_slow_by_its_own_figures(self) -> None:
        """2 ranks: the timeline names rank 1, but its own samples/s are the others' (a scheduling bias): dropped."""
        from hvdlog.analyses.stragglers import corroborate, settle

        for rates, kept in (((1000, 990), False), ((1000, 300), True)):
            rows = stragglers(_job(*rates))
            rows[1].reasons.append("timeline: last ready in 90/100 negotiations")
            rows[1].evidence.append("timeline")
            rows[1].outlier = True
            corroborate(rows)
            settle(rows)
            assert rows[1].outlier is kept
            assert rows[1].verdict.startswith("straggler: rank 1 (likely, on timeline)" if kept else "no straggler: rank 1: timeline")

    def test_a_median_gap_between_overlapping_ranks_does_not_keep_a_timeline_flag(self) -> None:
        """2 noisy ranks whose medians are half apart (450 and 900 samples/s, which the median rule
        alone took as slow) but whose steps overlap (rank 1 between 150 and 750, rank 0 between 300
        and 1,500): not steadily slower, so the flag is dropped; the same medians, steady, keep it."""
        from hvdlog.analyses.stragglers import corroborate, settle

        def noisy(rank: int, values: list[float]) -> list[dict[str, Any]]:
            docs = _events(rank, 1.0, steps=len(values))
            for doc, value in zip(docs, values, strict=True):
                doc["samples_per_sec"] = value
            return docs

        spread = [0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0] * 4
        for steady, kept in ((False, False), (True, True)):
            fast = [900.0 * (1 if steady else f / 1.2) for f in spread]
            slow = [450.0 * (1 if steady else f / 1.2) for f in spread]
            rows = stragglers(noisy(0, fast) + noisy(1, slow))
            rows[1].reasons.append("timeline: last ready in 90/100 negotiations")
            rows[1].evidence.append("timeline")
            rows[1].outlier = True
            corroborate(rows)
            settle(rows)
            assert rows[1].outlier is kept, rows[1].discounted
            assert kept or "not steadily 40% below" in rows[1].discounted


class TestTally:
    def test_the_newest_of_one_millisecond_is_chosen_by_its_microseconds_in_any_order(self) -> None:
        """Elasticsearch sorts by the millisecond; files and merges must not depend on the order either."""
        early, late = (dict(_events(0, 1000, steps=1)[0], **{"@timestamp": f"2026-12-01T10:00:01.287{micros}Z", "step": step})
                       for micros, step in (("007", 7), ("794", 6)))
        for order in ((early, late), (late, early)):
            tally = Tally()
            for doc in order:
                tally.add_document(doc)
            halves = [Tally(), Tally()]
            halves[0].add_document(order[0])
            halves[1].add_document(order[1])
            merged = Tally()
            for half in reversed(halves):
                merged.merge(half)
            assert {t.last_seen for t in (*tally.tracks.values(), *merged.tracks.values())} == {late["@timestamp"]}

    def test_merging_in_any_order_is_the_single_pass(self) -> None:
        docs = _job(1000, 1010, 330, 990, size=4)
        whole = Tally()
        parts = [Tally(), Tally(), Tally()]
        for index, doc in enumerate(docs):
            whole.add_document(doc)
            parts[index % 3].add_document(doc)
        merged = Tally()
        for part in reversed(parts):
            merged.merge(part)
        assert [row.to_json() for row in stragglers(merged)] == [row.to_json() for row in stragglers(whole)]

    def test_median_is_within_half_a_percent_and_memory_is_bins_not_events(self) -> None:
        tally = Tally()
        for index in range(100_000):
            tally.add("j", 0, 0, index, None, None, 500 + (index % 101) + 0.37, None)
        (track,) = tally.tracks.values()
        assert abs((track.median_samples() or 0) - 550) <= 550 * 0.006
        assert len(track.samples) <= 101

    @pytest.mark.parametrize("value", [0.0123456, 0.1, 1.0, 9.999, 10.0, 99.95, 100.0, 913.7, 1000.0, 12345.6, 1e300])
    def test_bins_cut_to_three_significant_digits(self, value: float) -> None:
        from hvdlog.analyses.stragglers import decade, sample_bin

        assert 10.0 ** decade(value) <= value < 10.0 ** (decade(value) + 1)
        low = sample_bin(value)
        assert low <= value < low + 10.0 ** (decade(value) - 2) * 1.000001


def _corpus_trees() -> list[Path]:
    """Every folder of the corpus holding events files, and every real-world case's inputs."""
    trees = sorted({path.parent for path in CORPUS.rglob("*.jsonl")})
    for case in sorted((CORPUS / "realworld").glob("*/case.yml")):
        trees += [case.parent / name for name in yaml.safe_load(case.read_text())["inputs"]]
    return trees


def _full(paths: list[Path], spec: Filter) -> list[dict[str, Any]]:
    source = FileSource(paths, warn=lambda _m: None)
    docs = [doc for doc in source.search(spec) if doc.get("step") is not None]
    return [row.to_json() for row in stragglers(docs)]


def _streamed(paths: list[Path], spec: Filter, workers: int = 1) -> list[dict[str, Any]]:
    return [row.to_json() for row in stragglers(read_steps(FileSource(paths, warn=lambda _m: None), spec, workers).tally)]


@pytest.mark.parametrize("tree", _corpus_trees(), ids=lambda path: str(path.relative_to(CORPUS)))
def test_streaming_reader_answers_as_a_full_read(tree: Path) -> None:
    """The byte-prefiltered reader that decodes a few fields gives the rows a full parse gives."""
    spec = Filter(any_of=STEP_EVENTS + RESOURCE_EVENTS)
    assert _streamed([tree], spec) == _full([tree], spec)


def test_filters_keep_their_meaning_on_the_short_path(tmp_path: Path) -> None:
    """--rank, --step and --job on the shortcut; --level and --host through the parser: same as a full read."""
    folder = tmp_path / "j" / "n"
    folder.mkdir(parents=True)
    for rank in range(4):
        lines = [orjson.dumps({**doc, "host.name": f"h{rank % 2}", "log.level": "warning" if doc["step"] % 3 else "info"})
                 for doc in _events(rank, 1000 if rank != 2 else 300, size=4)]
        (folder / f"rank-{rank}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for spec in (Filter(ranks=parse_ranks("0-2")), Filter(steps=(5, 30)), Filter(jobs=("j",)), Filter(jobs=("other",)),
                 Filter(min_level="warning"), Filter(hosts=("h0",))):
        spec = Filter(**{**{name: getattr(spec, name) for name in ("ranks", "steps", "jobs", "min_level", "hosts")},
                         "any_of": STEP_EVENTS + RESOURCE_EVENTS})
        assert _streamed([tmp_path], spec) == _full([tmp_path], spec), spec


def test_parallel_reading_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """-j 2 (forced past the size threshold) against -j 1 on the whole corpus."""
    monkeypatch.setattr(files, "PARALLEL_MIN_BYTES", 0)
    spec = Filter(any_of=STEP_EVENTS + RESOURCE_EVENTS)
    trees = _corpus_trees()
    assert _streamed(trees, spec, workers=2) == _streamed(trees, spec, workers=1)


def test_rank_captures_are_never_read_for_steps() -> None:
    """The shortcut skips a rank's native captures: the parser never gives their lines a step."""
    from hvdlog.parse import parse_paths

    captures = [str(path) for path in CORPUS.rglob("*.log") if ".stdout." in path.name or ".stderr." in path.name]
    assert captures
    assert not [doc for doc in parse_paths(captures) if doc.get("step") is not None]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""Horovod's autotune log (HOROVOD_AUTOTUNE_LOG) as documents, on a real recorded log.

tests/corpus/autotune/autotune.csv was written by Horovod 0.28.1 (Gloo, 2 ranks) under
``horovodrun --autotune --autotune-warmup-samples 1 --autotune-steps-per-sample 2
--autotune-bayes-opt-max-samples 3``: 16 samples, then the kept setting repeated.
"""

from __future__ import annotations

from pathlib import Path

from hvdlog.analyses.autotune import autotune_line, autotune_result
from hvdlog.documents import get_field
from hvdlog.parse.autotune import autotune_documents

CSV = Path(__file__).resolve().parents[1] / "corpus" / "autotune" / "autotune.csv"


def test_documents() -> None:
    """One document per line, numbers and booleans typed; only the final repeat of the best is chosen."""
    docs = list(autotune_documents(CSV))
    assert len(docs) == 17
    assert all(get_field(d, "event.action") == "autotune_sample" and d["job"] == "autotune" for d in docs)
    assert [get_field(d, "horovod.autotune.chosen") for d in docs] == [False] * 16 + [True]
    best = max(docs[:16], key=lambda d: get_field(d, "horovod.autotune.score"))
    assert {k: v for k, v in docs[-1]["horovod"]["autotune"].items() if k not in ("sample", "chosen")} == {
        k: v for k, v in best["horovod"]["autotune"].items() if k not in ("sample", "chosen")
    }
    assert get_field(docs[0], "horovod.autotune.fusion_threshold_mb") == 4.0 and get_field(docs[0], "horovod.autotune.cache_enabled") is False


def test_unfinished_and_cut(tmp_path: Path) -> None:
    """A log cut mid-tuning (last line torn): the best so far, not finished; the torn line is skipped."""
    lines = CSV.read_text().splitlines()
    cut = tmp_path / "job-x" / "autotune.csv"
    cut.parent.mkdir()
    cut.write_text("\n".join(lines[:6]) + "\n0,0,0, 1,5\n")
    result = autotune_result(cut)
    assert result is not None and not result.finished and result.samples == 5
    expected = (
        f"autotune (job job-x): best so far (tuning not finished) fusion threshold {result.fusion_threshold_mb:g} MB,"
        f" cycle time {result.cycle_time_ms:g} ms (score {result.score:g} after 5 samples)"
    )
    assert autotune_line([tmp_path]) == [expected]


def test_line() -> None:
    """The kept setting, in one line for stragglers/report."""
    assert autotune_line([CSV.parent]) == ["autotune (job autotune): kept fusion threshold 4 MB, cycle time 5 ms (score 0.0720579 after 16 samples)"]

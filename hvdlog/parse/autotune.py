"""``HOROVOD_AUTOTUNE_LOG`` (``horovodrun --autotune --autotune-log-file``) as ``autotune`` documents.

Horovod's autotuner (rank 0) writes a CSV: a header naming the parameters
(``hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,
tensor_fusion_threshold,score``; older releases have fewer columns), then one line per sample
with the values tried and their score (bytes per microsecond). When tuning ends it writes the
best sample once more: that last line, repeating the best score, is the setting it kept. The
fusion threshold is in MB. ``hvdlog run`` puts the file at ``<root>/<job>/autotune.csv``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from hvdlog.documents import Document
from hvdlog.fields import APP_DATASET
from hvdlog.parse.jsonl import nest

__all__ = ["AUTOTUNE_FILE", "autotune_documents"]

AUTOTUNE_FILE: Final = "autotune.csv"
_BOOLEANS: Final = ("hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce", "cache_enabled")
_NUMBERS: Final = {"cycle_time_ms": "cycle_time_ms", "tensor_fusion_threshold": "fusion_threshold_mb", "score": "score"}


def _sample(row: dict[str, str], number: int) -> dict[str, Any] | None:
    """The flat fields of one CSV line, or None when it is not a whole sample (a cut last line)."""
    fields: dict[str, Any] = {"horovod.autotune.sample": number}
    try:
        for name in _BOOLEANS:
            if row.get(name) not in (None, ""):
                fields[f"horovod.autotune.{name}"] = int(row[name].strip()) != 0
        for name, field in _NUMBERS.items():
            fields[f"horovod.autotune.{field}"] = float(row[name].strip())
    except (KeyError, ValueError, AttributeError):
        return None
    return fields


def autotune_documents(path: str | os.PathLike[str], job: str | None = None) -> Iterator[Document]:
    """One document per sample (``event.action: autotune_sample``), the kept setting marked ``chosen``.

    ``job`` defaults to the directory holding the file (``<root>/<job>/autotune.csv``). Raises
    OSError when the file cannot be read; lines that are not whole samples are skipped.
    """
    path = Path(path)
    job = job or path.parent.name
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        samples = [fields for number, row in enumerate(csv.DictReader(handle), 1) if (fields := _sample(row, number))]
    best = max((sample["horovod.autotune.score"] for sample in samples), default=None)
    for index, sample in enumerate(samples):
        is_last = index == len(samples) - 1
        repeats = any(other == {**sample, "horovod.autotune.sample": other["horovod.autotune.sample"]} for other in samples[:index])
        chosen = is_last and repeats and sample["horovod.autotune.score"] == best
        yield nest({
            "message": f"autotune sample {sample['horovod.autotune.sample']}: score {sample['horovod.autotune.score']}",
            "log.level": "info",
            "event.dataset": APP_DATASET,
            "event.action": "autotune_sample",
            "job": job,
            "log.file.path": str(path),
            **sample,
            "horovod.autotune.chosen": chosen,
        })

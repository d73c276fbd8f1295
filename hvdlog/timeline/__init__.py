"""Horovod's timeline, turned into a per-rank answer: who made the collective wait, and how long.

* :mod:`~hvdlog.timeline.reader`: stream the Chrome-trace file as Horovod writes it (cut files too);
* :mod:`~hvdlog.timeline.analysis`: negotiations, rank readiness, wait caused, phase times;
* :mod:`~hvdlog.timeline.discover`: find timelines under a job directory by content;
* :mod:`~hvdlog.timeline.capture`: the training side (``configure(timeline=True)``), bounded on disk.

The reading side imports nothing heavy; the training side imports Horovod only if it is loaded.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__: list[str] = []

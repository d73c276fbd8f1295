"""Horovod's timeline, turned into a per-rank answer: who made the collective wait, and how long.

The read side only: the file format (reading, records, documents) is shared in
:mod:`hvdlog.timeline_format`, and the rank's export is :mod:`hvdlog.runtime.timeline_export`.

* :mod:`~hvdlog.timeline.analysis`: rank readiness, wait caused, phase times;
* :mod:`~hvdlog.timeline.discover`: find timelines under a job directory by content;
* :mod:`~hvdlog.timeline.wait_evidence`: the analysis as straggler evidence;
* :mod:`~hvdlog.timeline.load`: one job's timeline from files or Elasticsearch.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__: list[str] = []

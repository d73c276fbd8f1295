"""The reading layer: events from per-rank files and from Elasticsearch, in one shape and order.

* :mod:`~hvdlog.query.spec`: the filter (ranks, level, job, host, time, step, pattern) and its
  semantics, shared by every source;
* :mod:`~hvdlog.query.source`: the source interface and merging; :mod:`~hvdlog.query.files`
  (with :mod:`~hvdlog.query.follow`, :mod:`~hvdlog.query.prefilter`, :mod:`~hvdlog.query.scan`,
  :mod:`~hvdlog.query.copies`, :mod:`~hvdlog.query.progress_files`) and :mod:`~hvdlog.query.es`
  (with :mod:`~hvdlog.query.es_query`) implement it.

What is asked of the documents lives elsewhere: the analyses in :mod:`hvdlog.analyses`, the
watcher's detectors and alert delivery in :mod:`hvdlog.watch`. Nothing here imports them, the
Elasticsearch client, click or rich at import time.
"""

from __future__ import annotations

__all__: list[str] = []

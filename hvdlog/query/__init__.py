"""Questions asked of a job's logs, answered the same from per-rank files and from Elasticsearch.

* :mod:`~hvdlog.query.spec`: the filter (ranks, level, job, host, time, step, pattern) and its
  semantics, shared by every source;
* :mod:`~hvdlog.query.source`: the source interface and merging; :mod:`~hvdlog.query.files`
  and :mod:`~hvdlog.query.es` (with :mod:`~hvdlog.query.es_query`) implement it;
* :mod:`~hvdlog.query.stalls`, :mod:`~hvdlog.query.stragglers`, :mod:`~hvdlog.query.failures`:
  analyses as pure functions over documents.

Nothing here imports the Elasticsearch client, click or rich at import time.

.. versionadded:: 0.1.0
"""

from __future__ import annotations

__all__: list[str] = []

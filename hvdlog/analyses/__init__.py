"""Questions asked of a job's documents, answered the same over files and Elasticsearch.

Pure functions over documents of the field contract (read through :mod:`hvdlog.query`):
:mod:`~hvdlog.analyses.failures` (the failure model, with :mod:`~hvdlog.analyses.failure_evidence`,
:mod:`~hvdlog.analyses.explain` and :mod:`~hvdlog.analyses.resets` for elastic jobs),
:mod:`~hvdlog.analyses.stalls`, :mod:`~hvdlog.analyses.stragglers` (with its step readers),
:mod:`~hvdlog.analyses.report` and :mod:`~hvdlog.analyses.jobs`.
"""

from __future__ import annotations

__all__: list[str] = []

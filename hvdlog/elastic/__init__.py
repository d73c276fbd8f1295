"""Elasticsearch and Kibana assets generated from the field contract, and their installer.

``templates`` builds the component/index templates and the ILM policy, ``views`` defines
the Kibana views and ``kibana`` renders them as saved objects, ``generate`` writes both into ``elasticsearch/`` and ``kibana/``, and
``install`` / ``kibana_api`` put them on a live cluster (``hvdlog install``). Nothing here
is imported by the training side.
"""

from __future__ import annotations

__all__: list[str] = []

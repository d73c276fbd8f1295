"""Elasticsearch templates and ILM policy for our data streams, built from the field contract.

Every mapped field comes from :mod:`hvdlog.fields`; the root is ``dynamic: false`` so
shipper metadata (``agent.*``, ``input.*``, ``log.offset``...) stays in ``_source`` without
growing the mapping, and undeclared user keys go to the ``extra`` flattened catch-all.
The lifecycle setting sits in its own component template because ``index.lifecycle.name``
only exists where ILM is installed: the index template lists that component as
``ignore_missing_component_templates`` so it works with or without it.
"""

from __future__ import annotations

import re
from typing import Any, Final

from hvdlog.fields import DATASETS, ECS_VERSION, FIELDS

__all__ = [
    "COMPONENT_LIFECYCLE",
    "COMPONENT_MAPPINGS",
    "COMPONENT_SETTINGS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_REPLICAS",
    "DEFAULT_RETENTION_DAYS",
    "ILM_POLICY",
    "INDEX_MODE",
    "INDEX_PATTERN",
    "INDEX_TEMPLATE",
    "ROLLOVER_MAX_AGE",
    "ROLLOVER_MAX_PRIMARY_SHARD_SIZE",
    "component_templates",
    "data_stream_name",
    "ilm_policy",
    "index_template",
    "mappings",
    "validate_namespace",
]

ILM_POLICY: Final = "hvdlog-logs"
COMPONENT_MAPPINGS: Final = "hvdlog-mappings"
COMPONENT_SETTINGS: Final = "hvdlog-settings"
COMPONENT_LIFECYCLE: Final = "hvdlog-lifecycle"
INDEX_TEMPLATE: Final = "logs-horovod"
#: Data streams are ``logs-<dataset>-<namespace>``; every dataset starts with ``horovod.``.
INDEX_PATTERN: Final = "logs-horovod.*-*"
#: Standard, not 9.x's LogsDB default for ``logs-*-*``: see :func:`component_templates`.
INDEX_MODE: Final = "standard"
#: Above the built-in ``logs`` template (priority 100, ``logs-*-*``), which would otherwise win.
PRIORITY: Final = 200

DEFAULT_NAMESPACE: Final = "default"
#: A single node cannot place replicas; a multi-node cluster should use ``--replicas 1``.
DEFAULT_REPLICAS: Final = 0
DEFAULT_RETENTION_DAYS: Final = 14
ROLLOVER_MAX_AGE: Final = "1d"
ROLLOVER_MAX_PRIMARY_SHARD_SIZE: Final = "10gb"

#: Same cap as ECS: longer keywords stay in _source but are not indexed (Lucene's term limit is 32 KiB).
KEYWORD_IGNORE_ABOVE: Final = 1024

_META: Final = {"managed_by": "hvdlog", "ecs_version": ECS_VERSION}
#: ECS and Elastic's data stream naming scheme: no dash, no upper case, at most 100 bytes.
_NAMESPACE_RE: Final = re.compile(r"^[a-z0-9_]{1,100}$")


def _field_mapping(type_: str) -> dict[str, Any]:
    """The mapping of one leaf; keyword-like types get the ECS ``ignore_above``."""
    if type_ in ("keyword", "flattened"):
        return {"type": type_, "ignore_above": KEYWORD_IGNORE_ABOVE}
    return {"type": type_}


def mappings() -> dict[str, Any]:
    """The ``mappings`` object: every contract field, nested by its dotted name."""
    properties: dict[str, Any] = {}
    for field in FIELDS:
        *parents, leaf = field.name.split(".")
        node = properties
        for part in parents:
            node = node.setdefault(part, {"properties": {}})["properties"]
        node[leaf] = _field_mapping(field.type)
    return {"dynamic": False, "date_detection": False, "properties": properties}


def component_templates(replicas: int = DEFAULT_REPLICAS, policy: str = ILM_POLICY) -> dict[str, dict[str, Any]]:
    """Component template bodies by name; ``replicas`` is the only per-cluster knob."""
    if replicas < 0:
        raise ValueError(f"replicas must be 0 or more, not {replicas}")
    return {
        COMPONENT_MAPPINGS: {
            "template": {"mappings": mappings()},
            "_meta": {**_META, "description": "hvdlog: field contract of hvdlog/fields.py"},
        },
        COMPONENT_SETTINGS: {
            # ignore_malformed, as Elastic's logs@settings does: a bad value (rank "n/a") loses that
            # field (listed in _ignored), never the event.
            # index.mode standard, said explicitly: 9.x makes every new logs-*-* data stream LogsDB
            # (synthetic _source, sorted by host.name) unless the template names a mode. hvdlog
            # reads back _source as Logstash sent it and keeps one behaviour on 8.19 and 9.x.
            "template": {"settings": {"index": {"mode": INDEX_MODE, "number_of_shards": "1", "number_of_replicas": str(replicas),
                                                "mapping": {"ignore_malformed": "true"}}}},
            "_meta": {**_META, "description": "hvdlog: shards, replicas, keep events with malformed values"},
        },
        COMPONENT_LIFECYCLE: {
            "template": {"settings": {"index": {"lifecycle": {"name": policy}}}},
            "_meta": {**_META, "description": "hvdlog: ILM policy (installed only where ILM exists)"},
        },
    }


def index_template() -> dict[str, Any]:
    """The composable index template that turns ``logs-horovod.*-*`` writes into data streams."""
    return {
        "index_patterns": [INDEX_PATTERN],
        "data_stream": {"hidden": False, "allow_custom_routing": False},
        "priority": PRIORITY,
        "composed_of": [COMPONENT_MAPPINGS, COMPONENT_SETTINGS, COMPONENT_LIFECYCLE],
        "ignore_missing_component_templates": [COMPONENT_LIFECYCLE],
        "_meta": {**_META, "description": "hvdlog: data streams logs-<dataset>-<namespace> of Horovod training logs"},
    }


def ilm_policy(retention_days: int = DEFAULT_RETENTION_DAYS) -> dict[str, Any]:
    """Hot phase with rollover by size and age, then delete ``retention_days`` after rollover."""
    if retention_days < 1:
        raise ValueError(f"retention must be at least 1 day, not {retention_days}")
    return {
        "policy": {
            "_meta": {**_META, "description": f"hvdlog: roll over daily or at {ROLLOVER_MAX_PRIMARY_SHARD_SIZE}, delete after {retention_days} days"},
            "phases": {
                "hot": {
                    "min_age": "0ms",
                    "actions": {
                        "rollover": {"max_age": ROLLOVER_MAX_AGE, "max_primary_shard_size": ROLLOVER_MAX_PRIMARY_SHARD_SIZE}
                    },
                },
                # delete_searchable_snapshot is the documented default; spelled out so GET compares equal.
                "delete": {"min_age": f"{retention_days}d", "actions": {"delete": {"delete_searchable_snapshot": True}}},
            },
        }
    }


def validate_namespace(namespace: str) -> str:
    """Return ``namespace`` or raise ``ValueError`` saying what Elasticsearch would reject."""
    if not _NAMESPACE_RE.match(namespace):
        raise ValueError(
            f"namespace {namespace!r} is not valid: use lower-case letters, digits and '_' only (no '-'), at most 100"
        )
    return namespace


def data_stream_name(dataset: str, namespace: str = DEFAULT_NAMESPACE) -> str:
    """``logs-<dataset>-<namespace>``, the name Logstash writes to for that dataset."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}: one of {', '.join(DATASETS)}")
    return f"logs-{dataset}-{validate_namespace(namespace)}"

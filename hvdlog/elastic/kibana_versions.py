"""Which shape of the saved objects each Kibana version imports, and the per-version transforms.

Kibana's import runs every migration *above* an object's ``typeMigrationVersion`` and refuses
an object whose version is above the newest it knows ("belongs to a more recent version of
Kibana"; ``document_migrator.ts``). So a shape is a set of version stamps, one per type, that
the oldest Kibana of its range knows, plus the attribute changes those stamps promise.
Facts from Kibana's source (elastic/kibana; see kibana/README.md "Versions" for the files):

- core: the only core transform is ``8.8.0`` (``document_migrator/migrations/index.ts``) in 8.19 and 9.x.
- ``index-pattern``: legacy migrations 6.5.0, 7.6.0, 7.11.0 and the 8.0.0 namespace conversion;
  no model versions through 9.x.
- ``lens``: legacy migrations up to 8.9.0 in both; 9.x later adds model version 1 (a mapping only).
- ``dashboard``: model version 2 (``showApplySelections``, Kibana 8.14) in both; 3 (``sections``)
  is in 8.19 and 9.1 but not 9.0. ``controlGroupInput`` stays the controls' home through 9.2.
- ``search``: model version 5 is the newest in 8.19; 9.2 adds model version 6, the Discover
  session's ``tabs`` (one tab holding every attribute but title, description, hits, version;
  ``extract_tabs.ts`` backfills it the same way for older objects).

The transforms are generic, by type, so every object added to :mod:`hvdlog.elastic.views`
gets each shape without more work.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["KIBANA_8", "KIBANA_9", "TARGETS", "KibanaTarget", "target_for"]

Transform = Callable[[dict[str, Any]], dict[str, Any]]

#: Kibana's namespace for the default tab's UUID (``DEFAULT_TAB_UUID_NAMESPACE`` in extract_tabs.ts):
#: the same id Kibana would derive for the object, so a re-import is stable.
_TAB_NAMESPACE: Final = uuid.UUID("617f8ea7-754a-4a75-86bf-58c4b2f99690")
#: Attributes that stay on the Discover session and never go into a tab (extract_tabs.ts).
_SESSION_ONLY: Final = frozenset({"title", "description", "hits", "version", "tabs"})


@dataclass(frozen=True, slots=True)
class KibanaTarget:
    """One shape: the Kibana versions it is for, its file, version stamps and per-type transforms."""

    name: str
    #: (major, minor) of the oldest Kibana that knows every stamp below.
    first: tuple[int, int]
    #: The highest major this shape is sent to (a newer minor of the next shape's major may still take it).
    last_major: int
    file: str
    #: The Kibana versions :func:`target_for` sends this shape to, in words (the file's first line says it).
    imports_into: str
    type_versions: Mapping[str, str]
    core_version: str = "8.8.0"
    transforms: Mapping[str, tuple[Transform, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``Kibana 8.19`` / ``Kibana 9.2``: the oldest version this shape imports into."""
        return f"Kibana {self.first[0]}.{self.first[1]}"

    def shape(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` (version-neutral) stamped for this target, with its type's transforms applied."""
        for transform in self.transforms.get(obj["type"], ()):
            obj = transform(obj)
        return {**obj, "coreMigrationVersion": self.core_version, "typeMigrationVersion": self.type_versions[obj["type"]]}


def discover_tabs(obj: dict[str, Any]) -> dict[str, Any]:
    """Search model version 6 (Kibana 9.2): one tab with the search's own attributes, as Kibana's backfill writes it."""
    attributes = obj["attributes"]
    tab = {
        "id": str(uuid.uuid5(_TAB_NAMESPACE, obj["id"])),
        "label": attributes["title"],
        "attributes": {key: value for key, value in attributes.items() if key not in _SESSION_ONLY},
    }
    return {**obj, "attributes": {**attributes, "tabs": [tab]}}


KIBANA_8: Final = KibanaTarget(
    name="8",
    first=(8, 19),
    last_major=9,
    file="kibana/hvdlog-8.ndjson",
    imports_into="Kibana 8.19, 9.0 and 9.1",
    type_versions={"index-pattern": "8.0.0", "search": "10.5.0", "lens": "8.9.0", "dashboard": "10.2.0"},
)
KIBANA_9: Final = KibanaTarget(
    name="9",
    first=(9, 2),
    last_major=9,
    file="kibana/hvdlog-9.ndjson",
    imports_into="Kibana 9.2 and later 9.x",
    type_versions={"index-pattern": "8.0.0", "search": "10.6.0", "lens": "8.9.0", "dashboard": "10.2.0"},
    transforms={"search": (discover_tabs,)},
)
#: Oldest first.
TARGETS: Final = (KIBANA_8, KIBANA_9)


def _major_minor(version: str) -> tuple[int, int] | None:
    parts = version.split("-")[0].split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def target_for(version: str) -> KibanaTarget:
    """The newest shape the Kibana at ``version`` (``/api/status``'s number) imports; ValueError when none does.

    Kibana 9.0 and 9.1 get the 8.19 shape: every stamp in it predates 9.0, while 9.2's search
    model version 6 is unknown to them.
    """
    found = _major_minor(version)
    if found is not None:
        for target in reversed(TARGETS):
            if target.first <= found and found[0] <= target.last_major:
                return target
    first = TARGETS[0].first
    raise ValueError(
        f"Kibana {version or 'of unknown version'} is not supported: hvdlog's saved objects import into"
        f" Kibana {first[0]}.{first[1]} to {TARGETS[-1].last_major}.x"
    )

"""Launcher tags: which rank and stream a console line came from, and the payload.

horovodrun --gloo prefixes ``[3]<stdout>:``, Open MPI ``[1,3]<stderr>:`` (and tags every
read chunk, so a line written piecewise carries tags in its middle, even inside the
timestamp), MPICH/Hydra ``[3] ``. Tags are parsed with the grok patterns of
``logstash/patterns/horovod``; a per-rank file's path gives rank and stream instead.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from hvdlog.parse.patterns import compile_pattern

__all__ = ["Tagged", "path_fields", "strip_tag"]

_OPENMPI: Final = compile_pattern("HOROVOD_OPENMPI_LINE")
_GLOO: Final = compile_pattern("HOROVOD_GLOO_LINE")
_MPICH: Final = compile_pattern("HOROVOD_MPICH_LINE")
_OPENMPI_ANY: Final = compile_pattern("HOROVOD_OPENMPI_TAG_ANY").regex
_RANK_PATH: Final = compile_pattern("HOROVOD_RANK_FILE_PATH")
_LAYOUT_PATH: Final = compile_pattern("HOROVOD_LAYOUT_PATH")
_PAYLOAD: Final = "@metadata.hvd.payload"


class Tagged(NamedTuple):
    """A line split into its launcher tag (as fields; empty when untagged) and payload."""

    payload: str
    fields: dict[str, Any]


def strip_tag(line: str) -> Tagged:
    """Split the launcher tag off ``line``; Open MPI tags inside the payload are removed."""
    head = line[:64]
    if ">:" in head:
        fields = _OPENMPI.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "openmpi"
            return Tagged(_OPENMPI_ANY.sub("", fields.pop(_PAYLOAD)), fields)
        fields = _GLOO.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "gloo"
            return Tagged(fields.pop(_PAYLOAD), fields)
    if head.startswith("[") and "] " in head:
        fields = _MPICH.match(line)
        if fields is not None:
            fields["horovod.launcher.format"] = "mpich"
            return Tagged(fields.pop(_PAYLOAD), fields)
    return Tagged(line, {})


def path_fields(path: str | None) -> dict[str, Any]:
    """What a per-rank path says: rank and stream, and job and host for hvdlog's layout."""
    if not path:
        return {}
    path = path.replace("\\", "/")
    fields = _RANK_PATH.search(path) or {}
    fields.update(_LAYOUT_PATH.search(path) or {})
    return fields

"""horovod-native.conf's gsub regexes, written from the grok pattern file.

A mutate ``gsub`` takes a plain regex, not ``%{NAME}``, so the regexes that remove colour codes,
arrival times, progress output, collectors' and schedulers' prefixes and launcher tags are the
pattern file's (hvdlog/parse/assets/patterns/horovod) expanded here and written into the conf by
``python -m hvdlog.elastic.generate``; a test fails while the committed conf differs.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Final

__all__ = ["GENERATED_LINE", "NATIVE_CONF", "collector_prefixes", "gsub_regexes", "line_prefix", "progress", "render_native_conf", "tags"]

NATIVE_CONF: Final = "logstash/pipeline/horovod-native.conf"
#: The conf's first line: which of its parts are generated, and from what.
GENERATED_LINE: Final = ("# Partly generated: the gsub regexes are written by `python -m hvdlog.elastic.generate` from "
                         "hvdlog/parse/assets/patterns/horovod; edit the patterns, not them.")
#: one pair of a gsub list: `"message", "<regex>", "<replacement>"` (the conf's strings hold no `"`)
_PAIR: Final = re.compile(r'"message", "(?P<regex>[^"]*)", "(?P<by>[^"]*)"')


def load_definitions() -> dict[str, str]:
    """The pattern file's definitions, imported when needed: ``hvdlog.parse`` loads the readers
    (orjson), which ``import hvdlog.elastic.generate`` must not."""
    from hvdlog.parse.patterns import load_definitions as definitions

    return definitions()


def line_prefix() -> str:
    """A collector's prefix, or any scheduler's with maybe a collector's after it, before a
    launcher tag (HOROVOD_LINE_PREFIX, expanded, optional)."""
    found = load_definitions()
    return f"(?:(?:{found['HOROVOD_COLLECTOR_PREFIX']})|(?:{found['HOROVOD_SCHEDULER_PREFIX']})(?:{found['HOROVOD_COLLECTOR_PREFIX']})?)??"


def collector_prefixes() -> str:
    """A collector's prefix, and a scheduler's right before it (HOROVOD_COLLECTOR_LINE's prefixes)."""
    found = load_definitions()
    return f"^(?:(?:{found['HOROVOD_SCHEDULER_PREFIX']})(?={found['HOROVOD_COLLECTOR_PREFIX']}))??(?:{found['HOROVOD_COLLECTOR_PREFIX']})"


def tags() -> str:
    """Every launcher's tag (Open MPI, Gloo, MPICH/Intel MPI, srun -l)."""
    found = load_definitions()
    return "|".join(found[f"HOROVOD_{name}_TAG_ANY"] for name in ("OPENMPI", "GLOO", "MPICH", "SRUN"))


def progress() -> str:
    """tqdm's progress before a line's last ``\\r``, behind the line's optional tag (group 1, put back)."""
    found = load_definitions()
    return f"^({line_prefix()}(?:{found['HOROVOD_LAUNCHER_TIME']})?(?:{tags()}))?{found['HOROVOD_PROGRESS_ANY']}"


@cache
def gsub_regexes() -> dict[str, tuple[str, ...]]:
    """The conf's mutate id -> the regexes of its gsub list, in order."""
    found = load_definitions()
    prefix, time = line_prefix(), found["HOROVOD_LAUNCHER_TIME"]
    return {
        "native_strip_colour_codes": (found["HOROVOD_ANSI_ANY"],),
        "native_strip_arrival_time": (found["HVDLOG_ARRIVAL_PREFIX_ANY"],),
        "native_strip_progress": (progress(),),
        "native_strip_collector_prefix": (collector_prefixes(),),
        "native_strip_openmpi_tags": (f"^{prefix}(?:{time})?{found['HOROVOD_OPENMPI_TAG_ANY']}", found["HOROVOD_OPENMPI_TAG_ANY"]),
        "native_strip_gloo_tags": (f"^{prefix}(?:{time})?{found['HOROVOD_GLOO_TAG_ANY']}",),
        "native_strip_mpich_tags": (f"^{prefix}{found['HOROVOD_MPICH_TAG_ANY']}",),
        "native_strip_srun_tags": (f"^{prefix}{found['HOROVOD_SRUN_TAG_ANY']}",),
        # untagged: a scheduler's prefix before a core header (HOROVOD_PREFIXED_CORE, expanded)
        "native_strip_scheduler_prefix": (
            f"^{found['HOROVOD_PREFIX_NOT_CORE']}(?:{found['HOROVOD_SCHEDULER_PREFIX']}){found['HOROVOD_PREFIXED_START']}",),
    }


def _rewritten(text: str, mutate_id: str, regexes: tuple[str, ...]) -> str:
    """``text`` with the gsub list after ``id => "<mutate_id>"`` holding ``regexes``."""
    start = text.find(f'id => "{mutate_id}"')
    gsub = text.find("gsub => [", start)
    end = text.find('"]', gsub)
    if start < 0 or gsub < 0 or end < 0:
        raise ValueError(f"{NATIVE_CONF}: no gsub after id => {mutate_id!r}")
    block = text[gsub:end + 2]
    if len(_PAIR.findall(block)) != len(regexes):
        raise ValueError(f"{NATIVE_CONF}: {mutate_id} must have {len(regexes)} message gsub pair(s)")
    if any('"' in regex for regex in regexes):
        raise ValueError(f"{mutate_id}: a conf string cannot hold a double quote")
    pending = list(regexes)
    block = _PAIR.sub(lambda pair: f'"message", "{pending.pop(0)}", "{pair["by"]}"', block)
    return text[:gsub] + block + text[end + 2:]


def render_native_conf(text: str) -> str:
    """``text`` (horovod-native.conf) with its first line saying what is generated and each
    gsub regex written from the pattern file; the rest is left as it is."""
    lines = text.split("\n", 1)
    if lines[0] != GENERATED_LINE:
        text = f"{GENERATED_LINE}\n{text}"
    for mutate_id, regexes in gsub_regexes().items():
        text = _rewritten(text, mutate_id, regexes)
    return text

"""horovod-native.conf's gsub regexes that combine several patterns of the pattern file
(a mutate gsub cannot use ``%{}``): built here once from hvdlog/parse/assets/patterns/horovod,
for the test that checks the conf against them and the harness that runs the conf's steps."""

from __future__ import annotations

from typing import Final

from hvdlog.parse.patterns import load_definitions

__all__ = ["COLLECTOR_PREFIXES", "LINE_PREFIX", "PROGRESS", "TAGS"]

_DEFINITIONS: Final = load_definitions()

_COLLECTOR: Final = _DEFINITIONS["HOROVOD_COLLECTOR_PREFIX"]
_SCHEDULER: Final = _DEFINITIONS["HOROVOD_SCHEDULER_PREFIX"]

#: a collector's prefix, or any scheduler's with maybe a collector's after it, before a launcher
#: tag (HOROVOD_LINE_PREFIX, expanded, optional)
LINE_PREFIX: Final = f"(?:(?:{_COLLECTOR})|(?:{_SCHEDULER})(?:{_COLLECTOR})?)??"
#: a collector's prefix, and a scheduler's right before it (HOROVOD_COLLECTOR_LINE's prefixes)
COLLECTOR_PREFIXES: Final = f"^(?:(?:{_SCHEDULER})(?={_COLLECTOR}))??(?:{_COLLECTOR})"
#: every launcher's tag (Open MPI, Gloo, MPICH/Intel MPI, srun -l)
TAGS: Final = "|".join(_DEFINITIONS[f"HOROVOD_{name}_TAG_ANY"] for name in ("OPENMPI", "GLOO", "MPICH", "SRUN"))
#: tqdm's progress before a line's last ``\r``, behind the line's optional tag (group 1, put back)
PROGRESS: Final = (f"^({LINE_PREFIX}(?:{_DEFINITIONS['HOROVOD_LAUNCHER_TIME']})?(?:{TAGS}))?"
                   f"{_DEFINITIONS['HOROVOD_PROGRESS_ANY']}")

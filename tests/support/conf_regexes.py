"""horovod-native.conf's gsub regexes that combine several patterns of the pattern file
(a mutate gsub cannot use ``%{}``): built here once from hvdlog/parse/assets/patterns/horovod,
for the test that checks the conf against them and the harness that runs the conf's steps."""

from __future__ import annotations

from typing import Final

from hvdlog.parse.patterns import load_definitions

__all__ = ["LINE_PREFIX", "PROGRESS", "TAGS"]

_DEFINITIONS: Final = load_definitions()

#: a collector's or any scheduler's prefix before a launcher tag (HOROVOD_LINE_PREFIX, expanded, optional)
LINE_PREFIX: Final = (f"(?:(?:{_DEFINITIONS['HOROVOD_COLLECTOR_PREFIX']})"
                      f"|(?:{_DEFINITIONS['HOROVOD_SCHEDULER_PREFIX']}))??")
#: every launcher's tag (Open MPI, Gloo, MPICH/Intel MPI, srun -l)
TAGS: Final = "|".join(_DEFINITIONS[f"HOROVOD_{name}_TAG_ANY"] for name in ("OPENMPI", "GLOO", "MPICH", "SRUN"))
#: tqdm's progress before a line's last ``\r``, behind the line's optional tag (group 1, put back)
PROGRESS: Final = (f"^({LINE_PREFIX}(?:{_DEFINITIONS['HOROVOD_LAUNCHER_TIME']})?(?:{TAGS}))?"
                   f"{_DEFINITIONS['HOROVOD_PROGRESS_ANY']}")

"""Who this process is in the job: rank, local rank, size, local size.

After ``hvd.init()`` Horovod is the truth (and elastic resets can change it); before
init, or without Horovod, the launcher's environment tells, so a failure before init
is still attributed to the right rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RankInfo", "from_environment", "from_horovod"]

# Launcher variables, most specific first: horovodrun (gloo), Open MPI, MPICH/PMI, PMIx, Slurm.
_ENV_KEYS: dict[str, tuple[str, ...]] = {
    "rank": ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"),
    "local_rank": ("HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"),
    "size": ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"),
    "local_size": ("HOROVOD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}


@dataclass(frozen=True, slots=True)
class RankInfo:
    """A process's place in the job; ``None`` where nothing tells."""

    rank: int | None
    local_rank: int | None
    size: int | None
    local_size: int | None
    source: str

    def as_fields(self) -> dict[str, int | None]:
        """The contract fields this information fills."""
        return {"rank": self.rank, "local_rank": self.local_rank, "size": self.size, "local_size": self.local_size}


def _first_int(env: Mapping[str, str], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = env.get(key, "").strip()
        if value.isdigit():
            return int(value)
    return None


def from_environment(env: Mapping[str, str] | None = None) -> RankInfo:
    """Rank information from the launcher's environment variables."""
    env = os.environ if env is None else env
    values = {field: _first_int(env, keys) for field, keys in _ENV_KEYS.items()}
    return RankInfo(**values, source="environment")


def from_horovod() -> RankInfo | None:
    """Rank information from an initialised Horovod, or None (not imported / not initialised).

    Only looks at an already imported ``horovod.torch``: asking must never import torch.
    """
    hvd = sys.modules.get("horovod.torch")
    if hvd is None:
        return None
    try:
        if not hvd.is_initialized():
            return None
        return RankInfo(hvd.rank(), hvd.local_rank(), hvd.size(), hvd.local_size(), source="horovod")
    except (ValueError, RuntimeError, AttributeError):
        return None

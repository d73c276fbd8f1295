"""hvdlog: rank-aware structured logs for Horovod + PyTorch training.

Two lines in a training script::

    import hvdlog
    hvdlog.configure()            # before or after hvd.init()
    log = hvdlog.get_logger()
    with hvdlog.step(step, epoch=epoch):
        log.info("train step", loss=loss)

Importing this package stays cheap for training scripts: it loads structlog and orjson;
the Elasticsearch client, click and rich are imported only by CLI commands.
"""

from __future__ import annotations

import sys


def _import_structlog_without_rich() -> None:
    """structlog.dev imports rich when it is installed (for pretty tracebacks we never
    use); a training process should not pay for it. Hide rich during that one import."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment] - makes `import rich` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


_import_structlog_without_rich()

from hvdlog.config import Configuration, configure, default_job_id, get_logger, refresh_rank, shutdown  # noqa: E402
from hvdlog.context import bind, bind_step, mark_progress, step, unbind  # noqa: E402

__all__ = [
    "Configuration",
    "__version__",
    "bind",
    "bind_step",
    "configure",
    "default_job_id",
    "get_logger",
    "mark_progress",
    "refresh_rank",
    "shutdown",
    "step",
    "unbind",
]

__version__ = "0.1.0"

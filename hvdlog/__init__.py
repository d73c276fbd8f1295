"""hvdlog: rank-aware structured logs for Horovod + PyTorch training.

Two lines in a training script::

    import hvdlog
    hvdlog.configure()            # before or after hvd.init()
    log = hvdlog.get_logger()
    with hvdlog.step(step, epoch=epoch):
        log.info("train step", loss=loss)

The package is lazy (PEP 562): ``import hvdlog`` loads nothing but this file, so
``hvdlog.fields``, the parser and the CLI do not drag in the training side. The first use of
``configure``, ``step``... imports it (structlog and orjson); the Elasticsearch client,
click and rich are imported only by CLI commands.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # what the lazy names are, for type checkers and IDEs
    from hvdlog.runtime.config import Configuration as Configuration
    from hvdlog.runtime.config import configure as configure
    from hvdlog.runtime.config import default_job_id as default_job_id
    from hvdlog.runtime.config import get_logger as get_logger
    from hvdlog.runtime.config import refresh_rank as refresh_rank
    from hvdlog.runtime.config import shutdown as shutdown
    from hvdlog.runtime.context import bind as bind
    from hvdlog.runtime.context import bind_step as bind_step
    from hvdlog.runtime.context import mark_progress as mark_progress
    from hvdlog.runtime.context import step as step
    from hvdlog.runtime.context import unbind as unbind

__version__ = "0.1.0"

#: public name -> the module that defines it; imported on first access.
_LAZY: dict[str, str] = {
    "Configuration": "hvdlog.runtime.config",
    "configure": "hvdlog.runtime.config",
    "default_job_id": "hvdlog.runtime.config",
    "get_logger": "hvdlog.runtime.config",
    "refresh_rank": "hvdlog.runtime.config",
    "shutdown": "hvdlog.runtime.config",
    "bind": "hvdlog.runtime.context",
    "bind_step": "hvdlog.runtime.context",
    "mark_progress": "hvdlog.runtime.context",
    "step": "hvdlog.runtime.context",
    "unbind": "hvdlog.runtime.context",
}

__all__ = ["__version__", *sorted(_LAZY)]


#: What the script last gave ``sys.exit`` (one item), from ``import hvdlog`` on: read at
#: interpreter exit by :mod:`hvdlog.runtime.ending` for the process's exit record.
exit_requested: list[object] = []


def _remember_exit_requests() -> None:
    """Wrap ``sys.exit`` at import: in ``sys.exit(main())`` Python looks ``sys.exit`` up before
    ``main()`` runs ``configure()``, so a wrapper made by ``configure()`` never sees the status of
    the most common ending. The call is the same; it only remembers its argument first."""
    original = sys.exit
    if getattr(original, "__hvdlog_exit__", False):
        return

    def remembering_exit(status: object = None) -> NoReturn:
        exit_requested[:] = [status]
        original(status)  # type: ignore[arg-type]
        raise SystemExit(status)  # only if the original returned (it never does)

    remembering_exit.__hvdlog_exit__ = True  # type: ignore[attr-defined]
    sys.exit = remembering_exit


_remember_exit_requests()


def _import_structlog_without_rich() -> None:
    """structlog.dev imports rich when it is installed (for pretty tracebacks we never
    use); a training process should not pay for it. Hide rich during that one import."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes `import rich` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]


def __getattr__(name: str) -> Any:
    """PEP 562: import the training side on first use of one of its names."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'hvdlog' has no attribute {name!r}")
    _import_structlog_without_rich()
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

"""The ``hvdlog`` command line; each command lives in its own module.

:func:`main` is the console script: on a training node installed without ``[cli]``
(``pip install hvdlog``) click is absent, and the command says what to install in one
sentence (exit 2) instead of a ``ModuleNotFoundError`` traceback.
"""

from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["main"]

#: The modules every command needs (rich and the Elasticsearch client load per command).
_NEEDED = ("click",)


def main() -> NoReturn:
    """Run :func:`hvdlog.cli.main.main`, or exit 2 with one sentence when ``[cli]`` is not installed."""
    import importlib.util

    missing = [name for name in _NEEDED if importlib.util.find_spec(name) is None]
    if missing:
        print(
            f"hvdlog: error: the hvdlog command needs `pip install 'hvdlog[cli]'` ({', '.join(missing)} is not installed);"
            " the training side (import hvdlog) works without it",
            file=sys.stderr,
        )
        sys.exit(2)
    from hvdlog.cli.main import main as run

    run()

"""hvdlog: rank-aware structured logs for Horovod + PyTorch training.

Importing this package must stay cheap for training scripts: it loads structlog and
orjson only; the Elasticsearch client, click and rich are imported by CLI commands.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

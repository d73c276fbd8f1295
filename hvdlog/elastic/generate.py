"""Write (or check) the committed Elasticsearch and Kibana files from the code that defines them.

Run from the repository root after changing :mod:`hvdlog.fields`, the templates or the
saved objects, then review the diff::

    python -m hvdlog.elastic.generate          # rewrite elasticsearch/ and kibana/
    python -m hvdlog.elastic.generate --check  # exit 1 and name the stale files

The committed files carry the defaults (0 replicas, 14 days retention); ``hvdlog install``
renders the same objects with the cluster's own values.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hvdlog.elastic import kibana, templates
from hvdlog.fields import DATASETS

__all__ = ["DATASETS_FILE", "KIBANA_FILE", "generated_files", "main", "stale_files"]

KIBANA_FILE = "kibana/hvdlog.ndjson"
DATASETS_FILE = "elasticsearch/datasets.txt"


def _pretty(body: Any) -> str:
    return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generated_files() -> dict[str, str]:
    """Repository-relative path -> exact content of every generated file."""
    files = {f"elasticsearch/component_template/{name}.json": _pretty(body) for name, body in templates.component_templates().items()}
    files[f"elasticsearch/index_template/{templates.INDEX_TEMPLATE}.json"] = _pretty(templates.index_template())
    files[f"elasticsearch/ilm_policy/{templates.ILM_POLICY}.json"] = _pretty(templates.ilm_policy())
    files[KIBANA_FILE] = kibana.to_ndjson()
    # The setup service (setup/setup.sh, bash + curl) creates one data stream per line.
    files[DATASETS_FILE] = "".join(f"{dataset}\n" for dataset in DATASETS)
    return files


def stale_files(root: Path) -> list[str]:
    """Generated files whose committed copy under ``root`` is missing or differs."""
    return [path for path, text in generated_files().items() if not (root / path).is_file() or (root / path).read_text() != text]


def main(argv: list[str] | None = None) -> int:
    """Write the files, or with ``--check`` report the stale ones (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m hvdlog.elastic.generate", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: the current directory)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a committed file is stale")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.root)
        for path in stale:
            print(f"stale: {path} (run: python -m hvdlog.elastic.generate)", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated_files().items():
        target = args.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

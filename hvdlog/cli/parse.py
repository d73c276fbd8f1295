"""``hvdlog parse PATH...``: raw files -> one JSON document per event (NDJSON) on stdout.

The same documents Logstash's pipelines produce for the same lines (same pattern file),
with no stack running. ``-`` or no PATH reads standard input. Exit codes: 0 documents were
written, 1 none, 2 error (a missing file, a bad option).
"""

from __future__ import annotations

import sys

import click

__all__ = ["parse"]


@click.command("parse")
@click.argument("paths", nargs=-1, type=click.Path(allow_dash=True))
@click.option("--timezone", metavar="ZONE", help="IANA zone of the nodes' clocks for Horovod's zone-less times [default: local zone].")
@click.option("--chatter", default="keep", show_default=True, metavar="keep|drop|sample=N", help="Known per-cycle TRACE/DEBUG lines: keep, drop, or keep one in N.")
@click.option("--size", type=click.IntRange(min=1), help="Job size, for the oldest stall format ([ready ranks: ...]).")
@click.option("-q", "--quiet", is_flag=True, help="Do not report the count of unparsed lines on stderr.")
def parse(paths: tuple[str, ...], timezone: str | None, chatter: str, size: int | None, quiet: bool) -> None:
    """Parse our JSON files, native captures, console captures and --output-filename trees."""
    import orjson

    from hvdlog.fields import PARSE_FAILURE_TAG
    from hvdlog.parse import parse_paths
    from hvdlog.parse.native import parse_chatter

    try:
        chatter_setting = parse_chatter(chatter)
        documents = parse_paths(paths or ("-",), timezone=timezone, chatter=chatter_setting, size=size)
        written = unparsed = 0
        out = sys.stdout.buffer
        write, dumps, newline = out.write, orjson.dumps, orjson.OPT_APPEND_NEWLINE
        for doc in documents:
            # one small write per document into the buffered stream: joining batches of
            # them costs more (large allocations)
            write(dumps(doc, option=newline))
            written += 1
            if "tags" in doc and PARSE_FAILURE_TAG in doc["tags"]:
                unparsed += 1
        out.flush()
    except (OSError, ValueError) as error:
        click.echo(f"hvdlog parse: {error}", err=True)
        sys.exit(2)
    if unparsed and not quiet:
        click.echo(f"hvdlog parse: {unparsed} of {written} lines matched no pattern (kept raw, tagged {PARSE_FAILURE_TAG})", err=True)
    sys.exit(0 if written else 1)

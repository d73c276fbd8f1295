"""What every command shares and nothing heavy: warnings and the ``--tz`` check.

Kept apart from :mod:`hvdlog.cli.options` (which loads the query and Elasticsearch
modules) so that ``hvdlog parse`` starts without them.
"""

from __future__ import annotations

import click

from hvdlog.cli.text import sentence

__all__ = ["time_zone", "warn"]


def warn(message: str) -> None:
    """One warning line on stderr (controls escaped, credentials masked)."""
    click.echo(f"hvdlog: warning: {sentence(message)}", err=True)


def time_zone(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check ``--tz`` up front: an unknown zone is a usage error, not a crash mid-scan."""
    if value is None:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise click.BadParameter(f"unknown time zone {value!r}: use an IANA name such as UTC or Europe/Paris") from None
    return value

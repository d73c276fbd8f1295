"""Entry point of the ``hvdlog`` command: a click group whose commands load lazily.

Each command lives in its own module under ``hvdlog.cli`` and is imported only when it
runs, so ``hvdlog --help`` stays fast and the Elasticsearch client or rich load only for
the commands that need them. Exit codes follow grep: 0 success/match, 1 no match, 2 error.
"""

from __future__ import annotations

import importlib

import click

from hvdlog import __version__

#: command name -> "module:attribute" of its click command. Adding a command is one line.
COMMANDS: dict[str, str] = {
    "first-failure": "hvdlog.cli.first_failure:first_failure",
    "grep": "hvdlog.cli.grep:grep",
    "parse": "hvdlog.cli.parse:parse",
    "setup": "hvdlog.cli.setup:setup",
    "stalls": "hvdlog.cli.stalls:stalls",
    "stragglers": "hvdlog.cli.stragglers:stragglers",
    "timeline": "hvdlog.cli.timeline:timeline",
}


class LazyGroup(click.Group):
    """A click group that imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        return getattr(importlib.import_module(module_name), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hvdlog")
def cli() -> None:
    """Rank-aware logs for Horovod + PyTorch training: parse, grep, stalls, setup."""


def main() -> None:
    """Run the CLI; usage errors exit with 2, like grep."""
    cli(prog_name="hvdlog")

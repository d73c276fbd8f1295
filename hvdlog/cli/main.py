"""Entry point of the ``hvdlog`` command: a click group whose commands load lazily.

Each command lives in its own module under ``hvdlog.cli`` and is imported only when it
runs, so ``hvdlog --help`` stays fast and the Elasticsearch client or rich load only for
the commands that need them. Exit codes follow grep: 0 success/match, 1 no match, 2 error.

:func:`main` is the one place errors become exit codes: a usage error exits 2 with click's
message, a closed pipe (``hvdlog parse … | head``) ends quietly, and any other exception
exits 2 with one sentence — the traceback only with ``--debug`` (or ``HVDLOG_DEBUG=1``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from hvdlog import __version__
from hvdlog.cli.text import sentence

__all__ = ["COMMANDS", "cli", "main"]

#: command name -> "module:attribute" of its click command. Adding a command is one line.
COMMANDS: dict[str, str] = {
    "diff": "hvdlog.cli.diff:diff_command",
    "first-failure": "hvdlog.cli.first_failure:first_failure",
    "grep": "hvdlog.cli.grep:grep",
    "history": "hvdlog.cli.history:history",
    "import": "hvdlog.cli.import_:import_command",
    "install": "hvdlog.cli.install:install",
    "jobs": "hvdlog.cli.jobs:jobs",
    "parse": "hvdlog.cli.parse:parse",
    "report": "hvdlog.cli.report:report_command",
    "run": "hvdlog.cli.run:run",
    "snapshot": "hvdlog.cli.snapshot:snapshot",
    "stalls": "hvdlog.cli.stalls:stalls",
    "stragglers": "hvdlog.cli.stragglers:stragglers",
    "timeline": "hvdlog.cli.timeline:timeline",
    "watch": "hvdlog.cli.watch:watch",
}
#: Old names that still work (hidden from --help): ``hvdlog setup`` became ``hvdlog install``.
_RENAMED: dict[str, str] = {"setup": "install"}

_debug = False


class LazyGroup(click.Group):
    """A click group that imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _RENAMED:
            click.echo(f"hvdlog: note: `hvdlog {cmd_name}` is now `hvdlog {_RENAMED[cmd_name]}`", err=True)
            cmd_name = _RENAMED[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command

    def invoke(self, ctx: click.Context) -> object:
        # click turns a closed pipe into exit 1; a reader that stops early is not an error.
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _PipeClosedError from None


class _PipeClosedError(Exception):
    """stdout's reader went away (``| head``)."""


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    global _debug
    _debug = _debug or value


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hvdlog")
@click.option(
    "--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
    help="Show the full traceback of an unexpected error (also HVDLOG_DEBUG=1).",
)
def cli() -> None:
    """Rank-aware logs for Horovod + PyTorch training.

    Start with `hvdlog jobs` (every job under a root) and `hvdlog report` (one job on one
    screen); then grep, stalls, stragglers, first-failure, timeline, parse; watch alerts while a job runs; install sets up
    Elasticsearch and Kibana.
    """


def _silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the CLI and turn every outcome into grep's exit codes."""
    global _debug
    _debug = bool(os.environ.get("HVDLOG_DEBUG"))
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="hvdlog", standalone_mode=False)
        code = result if isinstance(result, int) else 0  # click returns Exit's code (--help, --version)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        if not isinstance(exc.code, (int, type(None))):
            click.echo(f"hvdlog: error: {sentence(str(exc.code))}", err=True)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.UsageError as exc:  # one line, like every other error (click's own is four)
        command = exc.ctx.command_path if exc.ctx is not None else "hvdlog"
        click.echo(f"hvdlog: error: {sentence(exc.format_message())} (see `{command} --help`)", err=True)
        code = exc.exit_code
    except click.ClickException as exc:
        click.echo(f"hvdlog: error: {sentence(exc.format_message())}", err=True)
        code = exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("hvdlog: interrupted", err=True)
        code = 130
    except (BrokenPipeError, _PipeClosedError):
        _silence_stdout()
        code = 0
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes a sentence
        if _debug:
            import traceback

            traceback.print_exc()
        click.echo(f"hvdlog: error: {sentence(f'{type(exc).__name__}: {exc}')} (run with --debug for the traceback)", err=True)
        code = 2
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError):
        pass
    sys.exit(code)


if __name__ == "__main__":  # ``python -m hvdlog.cli.main`` is the CLI too (it did nothing and exited 0)
    main()

"""The one way every vlaperf command line reports bad input: one line, exit code 2."""

from __future__ import annotations

import sys

import click

from perfmodel.schema.errors import ConfigError


def run_click(group: click.Group, prog_name: str, argv: list[str] | None = None) -> None:
    """Run a click group; ``ConfigError`` and usage errors become ``error: <field>: <message>``
    on stderr with exit code 2 (never a traceback); Ctrl-C exits 130."""
    try:
        rc = group.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except ConfigError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.UsageError as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(2)
    except (click.Abort, KeyboardInterrupt):
        click.echo("error: aborted", err=True)
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)

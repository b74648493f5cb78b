"""``--rlinf-config`` for a command that reads a plan JSON (``executor run``).

The option composes the RLinf config (perfmodel.rlinf.importer), prints its warnings, writes the
plan to a temporary JSON file and hands that path to the command as its plan, so the command
runs exactly what ``perfmodel predict --rlinf-config`` predicts. The command's own code stays as
it is; only this option and one call are added where the command is registered.
"""

from __future__ import annotations

import functools
import os
import tempfile

import click

from perfmodel.schema.errors import ConfigError

HELP = "RLinf Hydra config (.yaml) to run instead of a plan JSON (mapped as perfmodel predict --rlinf-config does)"


def add_rlinf_config_option(command: click.Command, plan_params: tuple[str, ...] = ("plan_arg", "plan_opt"),
                            target: str = "plan_opt") -> click.Command:
    """Give ``command`` a ``--rlinf-config PATH`` option that stands in for its plan."""
    names = {p.name for p in command.params}
    if "rlinf_config" in names:
        return command
    missing = [p for p in (*plan_params, target) if p not in names]
    if missing:
        raise RuntimeError(f"{command.name}: no parameter {missing[0]!r} to hand the imported plan to")
    command.params.append(click.Option(["--rlinf-config", "rlinf_config"], default=None, help=HELP))
    callback = command.callback

    @functools.wraps(callback)
    def wrapped(*args, rlinf_config=None, **kwargs):
        if rlinf_config is None:
            return callback(*args, **kwargs)
        if any(kwargs.get(p) for p in plan_params):
            raise ConfigError("rlinf-config", "give a plan JSON or --rlinf-config, not both")
        from perfmodel.cliutil import check_outputs_apart
        from perfmodel.rlinf.importer import load_rlinf

        check_outputs_apart({"--rlinf-config": rlinf_config}, {}, {"--out": kwargs.get("out")})
        from perfmodel.schema.jsonio import write_json_atomic

        imported = load_rlinf(rlinf_config)
        for w in imported.warnings:
            click.echo(f"warning: {w}", err=True)
        fd, path = tempfile.mkstemp(prefix="rlinf_plan_", suffix=".json")
        os.close(fd)
        try:
            write_json_atomic(path, imported.plan.to_dict())
            kwargs[target] = path
            return callback(*args, **kwargs)
        finally:
            if os.path.exists(path):
                os.unlink(path)

    command.callback = wrapped
    return command

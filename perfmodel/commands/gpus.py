"""``perfmodel gpus``: the accelerators ``--gpu`` accepts, with their datasheet numbers."""

from __future__ import annotations

from typing import Any


def gpus() -> dict[str, dict[str, Any]]:
    """Each accelerator's datasheet numbers and typical node, by name (``perfmodel gpus --json``)."""
    from perfmodel.schema.hardware import ACCELERATORS

    return {k: a.__dict__ for k, a in ACCELERATORS.items()}


def format_gpus() -> str:
    from perfmodel.schema.hardware import ACCELERATORS, table_markdown

    return "\n".join([table_markdown(), *(f"{a.name}: {a.source}" for a in ACCELERATORS.values())])

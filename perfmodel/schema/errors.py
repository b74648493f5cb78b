"""The one error type for bad input: it names the field and what is allowed."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input. ``field`` is a dotted path such as ``workload.total_num_envs``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

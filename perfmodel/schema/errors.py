"""The one error type for bad input: it names the field and what is allowed."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input. ``field`` is a dotted path such as ``workload.total_num_envs``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def nearest(value: object, allowed: list[str] | tuple[str, ...]) -> str | None:
    """The allowed value a near miss meant: the same letters in another case, else the closest
    spelling (difflib, ratio >= 0.5), else the one it begins; None when nothing is near."""
    import difflib

    text = str(value)
    same_case = [c for c in allowed if c.lower() == text.lower()]  # difflib compares case-sensitively
    close = same_case[:1] or difflib.get_close_matches(text, list(allowed), n=1, cutoff=0.5)
    close = close or [c for c in allowed if c.startswith(text)][:1]
    return close[0] if close else None


def did_you_mean(value: object, allowed: list[str] | tuple[str, ...]) -> str:
    """``"; did you mean 'x'?"`` for a near miss of ``allowed`` (``nearest``), else ``""``: the
    tail of a one-line error that lists the allowed values."""
    near = nearest(value, allowed)
    return f"; did you mean {near!r}?" if near is not None else ""


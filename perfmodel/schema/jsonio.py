"""Strict reading of JSON objects into typed values.

Every reader takes the dotted path of the object it reads, so an error names the exact field
(``plan.workload.total_num_envs: must be an integer >= 1, got 0``).
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

from perfmodel.schema.errors import ConfigError

_MISSING = object()


# Integers longer than this are refused while reading: no size in any input comes near it,
# and Python spends seconds converting a 5000-digit literal (or refuses it).
MAX_INT_DIGITS = 15
# Inputs (plans, profiles, sweeps with every prediction) are far smaller; this stops a read of
# /dev/zero or a wrong multi-GB file before it fills memory.
MAX_INPUT_BYTES = 256 << 20


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_regular_file(path: str | Path, what: str) -> None:
    """Refuse, before opening it, an input that is not a regular file: opening a named pipe blocks
    until a writer comes, and a device or a directory is never a vlaperf input. Every input file
    is read only after this check (read_text, the RLinf YAML files)."""
    if "\x00" in str(path):  # os.stat raises ValueError, not OSError
        raise ConfigError(what, f"must be a path without a NUL character, got {str(path)!r}")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(what, f"file not found: {path}") from None
    except OSError as e:
        raise ConfigError(what, f"cannot read {path}: {e.strerror or type(e).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        raise ConfigError(what, f"must be a regular file; {path} is {kind}")


def read_text(path: str | Path, what: str) -> str:
    """A text file's content, or a ConfigError naming ``what`` and the file (never an OSError)."""
    p = Path(path)
    try:
        check_regular_file(p, what)
        with p.open("rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
        if len(data) > MAX_INPUT_BYTES:
            raise ConfigError(what, f"{p} is larger than {MAX_INPUT_BYTES >> 20} MiB; no input is that large")
        return data.decode("utf-8")
    except OSError as e:
        raise ConfigError(what, f"cannot read {p}: {e.strerror or type(e).__name__}") from None
    except UnicodeDecodeError:
        raise ConfigError(what, f"not a text file (bytes that are not UTF-8): {p}") from None


def parse_json(text: str, what: str, where: str) -> Any:
    """Parse JSON text: bounded nesting (deep nesting is refused, not a RecursionError) and
    integer literals of at most ``MAX_INT_DIGITS`` digits, no key twice in one object.
    NaN/Infinity literals parse (the field readers refuse them, naming the field)."""

    def parse_int(s: str) -> int:
        digits = len(s.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            raise ConfigError(what, f"{where}: integer {s[:10]}... has {digits} digits; "
                                    f"integers may have at most {MAX_INT_DIGITS}")
        return int(s)

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:  # json keeps the last silently: a hand edit's duplicate is refused instead
                raise ConfigError(what, f"{where}: key {k!r} appears twice in one object")
            out[k] = v
        return out

    try:
        return json.loads(text, parse_int=parse_int, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as e:
        raise ConfigError(what, f"not valid JSON ({where}: line {e.lineno}: {e.msg})") from None
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(what, f"{where}: nested too deeply to be a valid input") from None
    except ValueError as e:  # e.g. a number literal Python refuses to convert
        raise ConfigError(what, f"not valid JSON ({where}: {' '.join(str(e).split())})") from None


def load_json(path: str | Path, what: str) -> Any:
    """Read a JSON file; every problem (missing, unreadable, a directory, not UTF-8, not JSON,
    too deep, huge integers, a NaN or Infinity anywhere) is a ConfigError naming ``what`` and
    the file (or the field)."""
    doc = parse_json(read_text(path, what), what, str(path))
    check_finite(doc, what)
    return doc


def check_finite(doc: Any, what: str) -> None:
    """Refuse a NaN or Infinity anywhere in an input, naming its field: also in a field no reader
    checks (an extra key of a sweep row), which a command would otherwise copy into its output."""
    if _all_finite(doc):  # the common case, without a dotted path built for every value
        return
    found = _non_finite_at(doc)
    if found is not None:
        raise ConfigError(f"{what}.{found[0]}", f"must be a finite number, got {found[1]}")


def _all_finite(obj: Any) -> bool:
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, Mapping):
        return all(map(_all_finite, obj.values()))
    if isinstance(obj, (list, tuple)):
        return all(map(_all_finite, obj))
    return True


def json_kind(v: Any) -> str:
    """What a JSON value is, in JSON's words (an error says "got null (or missing)", not NoneType)."""
    if v is None:
        return "null (or missing)"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return {str: "a string", list: "a list"}.get(type(v), "an object" if isinstance(v, Mapping) else type(v).__name__)


def check_object(field: str, v: Any) -> Mapping:
    if not isinstance(v, Mapping):
        raise ConfigError(field, f"must be a JSON object, got {json_kind(v)}")
    return v


def check_list(field: str, v: Any) -> list:
    if not isinstance(v, list):
        raise ConfigError(field, f"must be a list, got {json_kind(v)}")
    return v


class Fields:
    """A JSON object being read: each ``take`` consumes one field; ``done`` rejects the rest."""

    def __init__(self, obj: Any, path: str) -> None:
        self.obj = dict(check_object(path, obj))
        self.path = path
        self.seen: set[str] = set()

    def _raw(self, name: str, default: Any) -> Any:
        self.seen.add(name)
        if name in self.obj:
            return self.obj[name]
        if default is _MISSING:
            raise ConfigError(self.sub(name), "missing required field")
        return default

    def sub(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def done(self) -> None:
        unknown = sorted(set(self.obj) - self.seen)
        if unknown:
            allowed = ", ".join(sorted(self.seen))
            raise ConfigError(self.sub(unknown[0]), f"unknown field (allowed: {allowed})")

    def int(self, name: str, default: Any = _MISSING, *, min: int | None = 1, max: int | None = None) -> int:
        return check_int(self.sub(name), self._raw(name, default), min=min, max=max)

    def float(
        self,
        name: str,
        default: Any = _MISSING,
        *,
        min: float | None = 0.0,
        max: float | None = None,
        strict_min: bool = False,
    ) -> float:
        v = self._raw(name, default)
        return check_float(self.sub(name), v, min=min, max=max, strict_min=strict_min)

    def str(self, name: str, default: Any = _MISSING, *, choices: Iterable[str] | None = None) -> str:
        v = self._raw(name, default)
        if not isinstance(v, str):
            raise ConfigError(self.sub(name), f"must be a string, got {v!r}")
        if choices is not None:
            choices = list(choices)
            if v not in choices:
                raise ConfigError(self.sub(name), f"must be one of {', '.join(choices)}; got {v!r}")
        return v

    def bool(self, name: str, default: Any = _MISSING) -> bool:
        v = self._raw(name, default)
        if not isinstance(v, bool):
            raise ConfigError(self.sub(name), f"must be true or false, got {v!r}")
        return v

    def any(self, name: str, default: Any = _MISSING) -> Any:
        return self._raw(name, default)

    def object(self, name: str, default: Any = _MISSING) -> "Fields":
        return Fields(self._raw(name, default), self.sub(name))


def check_int(field: str, v: Any, *, min: int | None = 1, max: int | None = None) -> int:
    """An integer (or an integral float) within [min, max]; the message gives the range."""
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise ConfigError(field, f"must be an integer, got {v!r}")
    if (min is not None and v < min) or (max is not None and v > max):
        if max is None:
            raise ConfigError(field, f"must be an integer >= {min}, got {v}")
        raise ConfigError(field, f"must be an integer in {min if min is not None else '..'}..{max}, got {v}")
    return v


def check_float(
    field: str,
    v: Any,
    *,
    min: float | None = 0.0,
    max: float | None = None,
    strict_min: bool = False,
) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(field, f"must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ConfigError(field, f"must be a finite number, got {v}")
    if min is not None and (v <= min if strict_min else v < min):
        op = ">" if strict_min else ">="
        raise ConfigError(field, f"must be a number {op} {min:g}, got {v:g}")
    if max is not None and v > max:
        raise ConfigError(field, f"must be a number <= {max:g}, got {v:g}")
    return v


# The null device may be named as an output (``-o /dev/null``: the result is not wanted): it is
# written through, never renamed over. Every other node that is not a regular file is refused.
_NULL_DEVICE = os.stat(os.devnull).st_rdev if os.path.exists(os.devnull) else None


def output_target(path: str | Path, what: str = "output") -> tuple[Path, bool]:
    """Where an output may be written, and whether it is written through (the null device): a
    symlink is followed to its target (the link stays a link), and a node that is not a regular
    file of ours is refused: a device (as root, a rename would replace ``/dev/null`` itself with a
    regular file), a named pipe, a socket, a directory, a read-only file (its owner meant it to
    stay as it is). ``what`` names the option in the refusal."""
    if "\x00" in str(path):
        raise ConfigError(what, f"must be a path without a NUL character, got {str(path)!r}")
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):  # a new path (check_writable says why its folder is not one)
        return target, False
    except OSError as e:
        raise ConfigError(what, f"cannot write {path}: {e.strerror or type(e).__name__}") from None
    if stat.S_ISCHR(st.st_mode) and _NULL_DEVICE is not None and st.st_rdev == _NULL_DEVICE:
        return target, True
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "not a regular file")
        raise ConfigError(what, f"must be a regular file (or a new path); {path} is {kind}, which is not replaced")
    if not st.st_mode & 0o222:
        raise ConfigError(what, f"{path} is read-only; it is not replaced (write elsewhere, or make it writable)")
    return target, False


def write_atomic(path: str | Path, data: bytes | str, what: str = "output") -> None:
    """Write a file so that a reader never sees it half-written (temp file + rename), with the
    permissions a plain ``open`` would give (the umask), so teammates can read it. Only where a
    regular file may stand (``output_target``): through a symlink, never over a device, a pipe
    or a read-only file."""
    path, through = output_target(path, what)
    payload = data.encode() if isinstance(data, str) else data
    if through:
        with open(path, "wb") as fh:
            fh.write(payload)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _non_finite_at(obj: Any, where: str = "") -> tuple[str, float] | None:
    """The first number in ``obj`` that is not finite, with its dotted path, or None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where or "(value)", obj
    items = obj.items() if isinstance(obj, Mapping) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for k, v in items:
        found = _non_finite_at(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}" if where else str(k))
        if found is not None:
            return found
    return None


def _nulled(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _nulled(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_nulled(v) for v in obj]
    return obj


def dumps(obj: Any, indent: int | None = 2, measured: bool = False) -> str:
    """Strict JSON text (the one way vlaperf prints or writes JSON): NaN and Infinity are not JSON,
    so a number that is not finite is refused in one line naming its field, never written as a
    literal another JSON reader rejects. Inputs are bounded so that no prediction gets there; a
    refusal here is a range check missing upstream (the fuzz campaign counts it as unhandled).
    ``measured``: a record of a real run, where a NaN is a measurement (a diverged loss) and the
    record must not be lost after minutes of work: such a number is written as null."""
    if measured:
        obj = _nulled(obj)
    try:
        return json.dumps(obj, indent=indent, allow_nan=False)
    except ValueError:
        found = _non_finite_at(obj)
        if found is None:
            raise
        raise ConfigError(f"output.{found[0]}", f"is not a finite number ({found[1]}): an input is beyond its "
                                                "physical range") from None


def write_json_atomic(path: str | Path, obj: Any, what: str = "output") -> None:
    write_atomic(path, dumps(obj) + "\n", what)

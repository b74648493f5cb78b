"""Compose an RLinf config the way RLinf does: Hydra's compose API, offline.

RLinf's entry points are ``@hydra.main(version_base="1.1", config_path=..., config_name=...)``;
composing with ``initialize_config_dir`` on the config's own directory reproduces that: the
``defaults:`` list (``env/<suite>@env.train``, ``model/<name>@actor.model``, ...) is read from
that directory, and ``${...}`` interpolations are resolved when a key is read. RLinf's configs
add ``file://${oc.env:EMBODIED_PATH}/config/`` to the search path; when ``EMBODIED_PATH`` is not
set it is pointed at the config directory's parent for the duration of the compose (RLinf's
layout: ``$EMBODIED_PATH/config/<name>.yaml``), which only affects that optional search path.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError

FIELD = "--rlinf-config"
_MISSING = object()
# difflib similarity above which an absent key's neighbour counts as its misspelling
# (update_epochs / update_epoch 0.96, num_node / num_nodes 0.94, adv_typ / adv_type 0.93)
NEAR_MISS = 0.85
# Bounds on the raw YAML files, checked before Hydra and OmegaConf read them (OmegaConf copies
# every alias expansion: a "billion laughs" file of a few lines never finishes). RLinf's configs
# are a few KB with no anchors; these are far beyond them.
MAX_YAML_BYTES = 1 << 20
MAX_YAML_NODES = 100_000  # nodes once every alias is expanded
MAX_DEFAULTS_FILES = 200  # files the defaults lists reach
# Groups an RLinf config may name that neither RLinf's config folder nor the rlinf 0.3.0 wheel
# holds, supplied as a stated fallback (the import warns which file and why). One so far:
# libero_spatial_dagger_openpi_lerobot.yaml names training_backend/fsdp (RLinf's other configs:
# hybrid_engines/fsdp). groups/training_backend/fsdp.yaml is the RL-VLA3 fork's
# config/training_backend/fsdp.yaml, unmodified: RLinf's hybrid_engines/fsdp.yaml with the same keys
# and values, except fsdp_size -1 (one FSDP group; rlinf 0.3.0 reads no fsdp_size) and amp
# (disabled) for amp_autocast / grad_scaler (disabled; rlinf 0.3.0 config.py defaults both off and
# only warns on amp). The importer reads sharding_strategy and gradient_checkpointing of it, both
# of which that config sets itself.
FALLBACK_GROUPS = Path(__file__).resolve().parent / "groups"
FALLBACK_NOTE = "defaults: {group} is in neither {folder} nor rlinf 0.3.0"


class Composed:
    """A composed config; ``get("a.b.c")`` resolves one key (interpolations included), so a
    config whose unrelated keys cannot be resolved here (paths, env variables) still imports."""

    def __init__(self, cfg: Any, source: str) -> None:
        self._cfg = cfg
        self.source = source
        self._read: set[str] = set()  # every key asked for (check_near_misses)
        self.notes: list[str] = []  # what composing it assumed (EMBODIED_PATH unset): import warnings

    def get(self, key: str, default: Any = _MISSING) -> Any:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        self._read.add(key)
        try:
            v = OmegaConf.select(self._cfg, key, default=_MISSING, throw_on_resolution_failure=True)
        except Exception as e:  # an interpolation that cannot be resolved
            raise ConfigError(key, f"cannot resolve {key} in {self.source}: {str(e).splitlines()[0]}") from None
        if v is _MISSING:
            if default is _MISSING:
                raise ConfigError(key, f"is missing from {self.source}")
            self._refuse_near_miss(key, default)
            return default
        if isinstance(v, (DictConfig, ListConfig)):
            try:
                return OmegaConf.to_container(v, resolve=True)
            except Exception as e:
                raise ConfigError(key, f"cannot resolve {key} in {self.source}: {str(e).splitlines()[0]}") from None
        return v

    def get_bool(self, key: str, default: bool = False) -> bool:
        """A true/false key; absent or null is ``default``, anything else is refused naming it."""
        v = self.get(key, default)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise ConfigError(key, f"must be true or false, got {v!r}")
        return v

    def _refuse_near_miss(self, key: str, default: Any) -> None:
        """A key read here is absent, so its default would be used: if the config has a key next
        to it spelled almost the same (``update_epochs`` for ``update_epoch``), that is a typo the
        user would otherwise never see in the prediction, so it is an error."""
        import difflib

        from omegaconf import DictConfig, OmegaConf

        node, path = self._cfg, []
        for seg in key.split("."):
            if not isinstance(node, DictConfig):
                return
            if seg not in node:
                close = difflib.get_close_matches(seg, [str(k) for k in node.keys()], n=1, cutoff=NEAR_MISS)
                if close:
                    where = ".".join(path + [close[0]])
                    raise ConfigError(where, f"is not a key this tool reads; did you mean {'.'.join(path + [seg])}? "
                                             f"(without it, {key} would default to {default!r}) in {self.source}")
                return
            path.append(seg)
            node = OmegaConf.select(self._cfg, ".".join(path), default=None, throw_on_resolution_failure=False)

    def check_near_misses(self) -> None:
        """After the import: a key beside one that was read, spelled almost the same and read by
        nothing (``num_action_chunk`` beside ``num_action_chunks``, which a Hydra default set),
        is a typo whose value would be silently unused; it is an error."""
        import difflib

        from omegaconf import DictConfig, OmegaConf

        for key in sorted(self._read):
            parent, _, seg = key.rpartition(".")
            node = OmegaConf.select(self._cfg, parent, default=None, throw_on_resolution_failure=False) if parent \
                else self._cfg
            if not isinstance(node, DictConfig) or seg not in node:
                continue
            siblings = [str(k) for k in node.keys() if str(k) != seg]
            for near in difflib.get_close_matches(seg, siblings, n=3, cutoff=NEAR_MISS):
                where = f"{parent}.{near}" if parent else near
                if where not in self._read:
                    raise ConfigError(where, f"is not a key this tool reads; did you mean {key}? (that key is read, "
                                             f"{self.get(key, None)!r}, and {where} would be silently unused) in "
                                             f"{self.source}")

    def has(self, key: str) -> bool:
        return self.get(key, None) is not None

    def keys(self, key: str) -> list[str]:
        v = self.get(key, None)
        return list(v) if isinstance(v, dict) else []


def compose(path: str | Path) -> Composed:
    """Compose the RLinf config at ``path`` (a ``.yaml`` file in an RLinf config directory)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(FIELD, f"{path} is a directory; give the config's .yaml file in it")
    if not p.exists():
        raise ConfigError(FIELD, f"no such file: {path}")
    if not p.is_file():  # a named pipe would block Hydra's read
        from perfmodel.schema.jsonio import check_regular_file

        check_regular_file(p, FIELD)
    if p.suffix not in (".yaml", ".yml"):
        raise ConfigError(FIELD, f"must be an RLinf Hydra config (.yaml), got {path}")
    check_yaml_files(p)
    try:
        from hydra.core.global_hydra import GlobalHydra
    except ImportError:  # pragma: no cover - hydra-core is a dependency
        raise ConfigError(FIELD, "needs hydra-core (pip install hydra-core)") from None
    config_dir = str(p.resolve().parent)
    from perfmodel.rlinf.fork import embodied_path

    embodied, note = embodied_path(p)  # the fork's layout too (perfmodel/rlinf/fork.py)
    env_set = "EMBODIED_PATH" not in os.environ
    if env_set:
        os.environ["EMBODIED_PATH"] = embodied
    try:
        cfg = _hydra_compose(config_dir, p.stem)
    except Exception as e:
        msg = _first_line(e)
        fallback = _fallback_group(msg)
        if fallback is None:
            where = _yaml_error_at(p)
            raise ConfigError(FIELD, f"cannot compose {p.name} as RLinf does (Hydra): {msg}"
                                     + (f" ({where})" if where else "")) from None
        cfg = _compose_with_fallback(p, config_dir, embodied)
        stated = (FALLBACK_NOTE.format(group=fallback, folder=config_dir)
                  + f": composed with the RL-VLA3 fork's config/{fallback}.yaml (bundled, unmodified: "
                  f"perfmodel/rlinf/groups/{fallback}.yaml), RLinf's hybrid_engines/fsdp.yaml under the group name "
                  "the fork uses, the same keys and values but for fsdp_size -1 and amp off (rlinf 0.3.0 reads "
                  "neither); the config sets the keys costed (sharding_strategy, gradient_checkpointing) itself")
        note = f"{note}; {stated}" if note else stated
    finally:
        GlobalHydra.instance().clear()
        if env_set:
            os.environ.pop("EMBODIED_PATH", None)
    out = Composed(cfg, p.name)
    if note:
        out.notes.append(note)
    return out


def _fallback_group(msg: str) -> str | None:
    """The group (``training_backend/fsdp``) Hydra could not load, when FALLBACK_GROUPS holds it."""
    import re

    m = re.search(r"Could not load '([\w/]+)'", msg)
    if m and (FALLBACK_GROUPS / f"{m.group(1)}.yaml").is_file():
        return m.group(1)
    return None


def _compose_with_fallback(p: Path, config_dir: str, embodied: str) -> Any:
    """The config composed with FALLBACK_GROUPS after its own search path (RLinf's configs name
    ``file://${oc.env:EMBODIED_PATH}/config/``), so its own folder's groups still come first."""
    search = f"hydra.searchpath=[file://{Path(embodied) / 'config'},file://{FALLBACK_GROUPS}]"
    try:
        return _hydra_compose(config_dir, p.stem, [search])
    except Exception as e:
        raise ConfigError(FIELD, f"cannot compose {p.name} as RLinf does (Hydra): {_first_line(e)}") from None


def _hydra_compose(config_dir: str, name: str, overrides: list[str] | None = None) -> Any:
    """Hydra's compose of config ``name`` in ``config_dir``, as RLinf's launcher does (its errors
    pass through)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Hydra's migration notices, missing optional search paths
        with initialize_config_dir(config_dir=config_dir, version_base="1.1", job_name="vlaperf"):
            return hydra_compose(config_name=name, overrides=overrides or [])


def _first_line(e: Exception) -> str:
    """An exception's first line of text (its type's name when it has none)."""
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _expanded_size(node: Any, memo: dict[int, int], active: set[int]) -> int:
    """Nodes of a composed YAML node graph once aliases are expanded (shared nodes counted at
    every use), without expanding it: linear in the graph's size."""
    import yaml

    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise ValueError("an alias refers to a node that contains it (a recursive structure)")
    active.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            size += _expanded_size(child, memo, active)
            if size > MAX_YAML_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            size += _expanded_size(k, memo, active) + _expanded_size(v, memo, active)
            if size > MAX_YAML_NODES:
                break
    active.discard(key)
    memo[key] = size
    return size


def load_yaml_bounded(p: Path, field: str = FIELD) -> Any:
    """A YAML file read safely within bounds: a regular file, at most MAX_YAML_BYTES, at most
    MAX_YAML_NODES nodes with aliases expanded (the alias bomb), no recursive alias. The content,
    or a ConfigError naming the file; a syntax error is left to the caller (None)."""
    import yaml

    from perfmodel.schema.jsonio import check_regular_file

    check_regular_file(p, field)
    if p.stat().st_size > MAX_YAML_BYTES:
        raise ConfigError(field, f"{p} is larger than {MAX_YAML_BYTES >> 10} KiB; an RLinf config is a few KB")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(field, f"not a text file (bytes that are not UTF-8): {p}") from None
    except OSError as e:
        raise ConfigError(field, f"cannot read {p}: {e.strerror or type(e).__name__}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None  # Hydra says what is wrong, with the line (_yaml_error_at)
    except RecursionError:
        raise ConfigError(field, f"{p} is nested too deeply to be a config") from None
    if node is None:
        return None
    try:
        size = _expanded_size(node, {}, set())
    except RecursionError:
        raise ConfigError(field, f"{p} is nested too deeply to be a config") from None
    except ValueError as e:
        raise ConfigError(field, f"{p}: {e}; a config is a tree") from None
    if size > MAX_YAML_NODES:
        raise ConfigError(field, f"{p} expands to more than {MAX_YAML_NODES} YAML nodes through its aliases "
                                 "(&anchor / *alias); a config is a few hundred")
    try:
        return yaml.load(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return None


def _defaults_files(doc: Any, config_dir: Path, here: Path) -> list[Path]:
    """The files a config's Hydra ``defaults:`` list names that exist in its config directory
    (``group/name`` entries, ``override`` / ``optional`` / ``@package`` forms; others, such as
    Hydra's own ``hydra/...`` groups, are Hydra's)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("defaults"), list):
        return []
    out = []
    for entry in doc["defaults"]:
        names: list[str] = []
        if isinstance(entry, str):
            names = [entry]
        elif isinstance(entry, dict):
            for k, v in entry.items():
                group = str(k).replace("override ", "").replace("optional ", "").split("@")[0].strip()
                for name in (v if isinstance(v, list) else [v]):
                    if isinstance(name, (str, int, float)) and not isinstance(name, bool):
                        names.append(f"{group}/{name}")
        for n in names:
            n = n.split("@")[0].strip()
            for base in (config_dir, here.parent):
                for suffix in (".yaml", ".yml"):
                    candidate = base / f"{n}{suffix}"
                    if candidate.exists() or candidate.is_symlink():
                        out.append(candidate)
    return out


def check_yaml_files(p: Path) -> None:
    """Every YAML file Hydra will read for the config at ``p`` (itself and what its defaults
    lists reach), checked within bounds before Hydra opens any (load_yaml_bounded)."""
    config_dir = p.resolve().parent
    todo, seen = [p], set()
    while todo:
        f = todo.pop()
        key = os.path.realpath(f)
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > MAX_DEFAULTS_FILES:
            raise ConfigError(FIELD, f"its defaults lists reach more than {MAX_DEFAULTS_FILES} files")
        doc = load_yaml_bounded(Path(f), FIELD if f == p else f"{FIELD} (defaults: {f})")
        todo.extend(_defaults_files(doc, config_dir, Path(f)))


def _yaml_error_at(p: Path) -> str | None:
    """Where a YAML syntax error is (Hydra's message drops the line): ``line L, column C: problem``."""
    import yaml

    try:
        yaml.safe_load(p.read_text())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        return f"{p.name} line {mark.line + 1}, column {mark.column + 1}: {e.problem}" if mark else None
    except Exception:  # noqa: BLE001 - only a hint for the message above
        return None
    return None

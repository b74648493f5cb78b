"""The Python API: what the ``perfmodel`` commands do, as functions returning what each prints
with ``--json`` (docs/metrics.md, docs/formats.md). The command line and these functions run the
same code (perfmodel/commands/); options keep their command-line names with ``_`` for ``-``, and
bad input raises ``perfmodel.schema.errors.ConfigError``: a wrong type names the argument
(``gpus: must be an integer ...``), a wrong value the option (its ``field``).

    from perfmodel import api
    p = api.predict(mode="rollout_async", gpus=32)
    p["throughput_env_steps_per_s"], p["throughput_interval"]["low"], p["throughput_interval"]["high"]
    choice = api.plan(gpus=32)           # best plan, runner-up, top_candidates, explanation
    api.format_plan(choice)              # the table `perfmodel plan` prints
    api.calibrate(runs=["logs/run1", "logs/run2"], out_dir="profiles")  # a profile from your runs

Warnings (an option without effect, an RLinf import's caveats, an extrapolation) are in the
result as ``warnings``, a list of records ``{"kind": ..., "text": ...}`` whose text is the line
the command prints after ``warning:``; they are also said on stderr; pass ``say=lambda line:
None`` to keep them quiet, or a logger's method.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Mapping, Sequence

from perfmodel.commands.calibrate import calibrate as _calibrate
from perfmodel.commands.common import Say
from perfmodel.commands.gpus import gpus
from perfmodel.commands.plan import format_plan as _format_plan, plan as _plan
from perfmodel.commands.predict import format_prediction as _format_prediction, interval_rows, predict as _predict
from perfmodel.commands.sweep import sweep as _sweep
from perfmodel.commands.validate import format_validation as _format_validation, validate as _validate
from perfmodel.schema.errors import ConfigError

__all__ = ["predict", "plan", "sweep", "calibrate", "validate", "gpus", "format_prediction", "format_plan",
           "format_validation"]

ListArg = str | Sequence[Any] | None
PathArg = str | os.PathLike | None


# -- argument types: a wrong one is a ConfigError naming the argument, as the command line's parser
# names the option (a value's range is the command's own check, naming the option)

def _kind(v: Any) -> str:
    return "a boolean" if isinstance(v, bool) else f"{type(v).__name__} {v!r}"[:80]


def _text_arg(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ConfigError(name, f"must be text (str), got {_kind(v)}")
    if "\x00" in v:
        raise ConfigError(name, f"must not contain a NUL character, got {v!r}")
    return v


def _path(name: str, v: Any) -> str | None:
    """A file path: str or os.PathLike (``pathlib.Path`` works as a str does)."""
    if v is None:
        return None
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if not isinstance(v, str):
        raise ConfigError(name, f"must be a file path (str or pathlib.Path), got {_kind(v)}")
    return _text_arg(name, v)


def _int(name: str, v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(name, f"must be an integer, got {_kind(v)}")
    return v


def _count(name: str, v: Any) -> int:
    """An integer that has a default, not None (``replications``, ``seed``)."""
    if v is None:
        raise ConfigError(name, "must be an integer, got None")
    return _int(name, v)


def _number(name: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(name, f"must be a finite number, got {_kind(v)}")
    return v


def _flag(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(name, f"must be True or False, got {_kind(v)}")
    return v


def _choice(name: str, v: Any) -> str | None:
    return None if v is None else _text_arg(name, v)


def _list(name: str, v: Any) -> str | None:
    """A list option as the command line takes it: comma-separated text (None for null)."""
    if v is None:
        return None
    if isinstance(v, str):
        return _text_arg(name, v)
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if not isinstance(v, (list, tuple)):
        raise ConfigError(name, f"must be a list or comma-separated text, got {_kind(v)}")
    for x in v:
        if x is not None and (isinstance(x, bool) or not isinstance(x, (int, float, str))):
            raise ConfigError(name, f"must hold numbers or text, got {_kind(x)}")
        if isinstance(x, float) and not math.isfinite(x):
            raise ConfigError(name, f"must hold finite numbers, got {x!r}")
        if isinstance(x, str):
            _text_arg(name, x)
    return ",".join("null" if x is None else str(x) for x in v)


NODE_KEYS = ("cpu_cores_per_node", "gpus_per_node", "nic_gbps", "node_ram_gb")


def _mapping(name: str, v: Any, what: str, check_item: Callable[[Any, Any], Any]) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise ConfigError(name, f"must be a mapping {what}, got {_kind(v)}")
    for k, x in v.items():
        check_item(k, x)
    return dict(v)


def _node_item(k: Any, x: Any) -> None:
    if k not in NODE_KEYS:
        raise ConfigError(f"node.{k}", f"unknown node option (allowed: {', '.join(NODE_KEYS)})")
    (_int if k in ("cpu_cores_per_node", "gpus_per_node") else _number)(f"node.{k}", x)


def _factor_item(k: Any, x: Any) -> None:
    _text_arg("sample_efficiency", k)
    _number(f"sample_efficiency.{k}", x)


def _node(v: Any) -> dict[str, Any]:
    return _mapping("node", v, f"of {', '.join(NODE_KEYS)}", _node_item)


def _factors(v: Any) -> dict[str, float]:
    return _mapping("sample_efficiency", v, "mode -> factor", _factor_item)


def _say(v: Any) -> Say | None:
    if v is not None and not callable(v):
        raise ConfigError("say", f"must be a function taking one line (or None), got {_kind(v)}")
    return v


# -- warnings: records with a kind, the text the command prints after "warning: "

def _warning_kind(text: str, rlinf_config: str | None) -> str:
    if text.startswith("extrapolation:"):
        return "extrapolation"
    if text.startswith("--"):
        return "option"
    if rlinf_config is not None and text.startswith(f"{rlinf_config}:"):
        return "rlinf_config"
    if text.startswith("chosen plan:"):
        return "chosen_plan"
    return "prediction"


def _records(texts: Sequence[str], rlinf_config: str | None = None) -> list[dict[str, str]]:
    seen: list[str] = []
    for t in texts:
        if t not in seen:
            seen.append(t)
    return [{"kind": _warning_kind(t, rlinf_config), "text": t} for t in seen]


def _texts(warnings: Any) -> list[str]:
    """Warnings as the JSON output holds them (text), from records or text."""
    return [w["text"] if isinstance(w, Mapping) and "text" in w else w for w in warnings or []]


def _collect(say: Say | None) -> tuple[Callable[[str], None], list[str]]:
    """A ``say`` that also keeps the warning lines (what the command printed after "warning: ")."""
    from perfmodel.commands.common import to_stderr

    out = say or to_stderr
    kept: list[str] = []

    def both(line: str) -> None:
        if line.startswith("warning: "):
            kept.append(line[len("warning: "):])
        out(line)

    return both, kept


def predict(mode: str | None = None, gpus: int | None = None, *, backbone: str | None = None,
            ratio: str | None = None, plan: PathArg = None, profile: PathArg = None,
            pipeline_stages: int | None = None, b_max: int | None = None, t_max: float | None = None,
            staleness: int | None = None, replications: int = 1, seed: int = 0, trace: PathArg = None,
            rlinf_config: PathArg = None, gpu: str | None = None, gpu_hour_price: float | None = None,
            interval: bool = True, scale_global_batch: bool = False, say: Say | None = None,
            node: dict[str, Any] | None = None) -> dict[str, Any]:
    """``perfmodel predict --json``: one plan's throughput, its 90 % interval
    (``throughput_interval``), bound, bottleneck, utilization and cost per GPU-hour. ``plan`` and
    ``profile`` are file paths (str or Path), as ``--plan`` and ``--profile``. ``node``: the node
    options by name (``cpu_cores_per_node``, ``gpus_per_node``, ``nic_gbps``, ``node_ram_gb``).
    ``warnings``: records (module docstring), the extrapolation warnings the text output prints
    included."""
    rlinf_config = _path("rlinf_config", rlinf_config)
    p = _predict(_choice("mode", mode), _int("gpus", gpus), backbone=_choice("backbone", backbone),
                 ratio=_choice("ratio", ratio), plan_path=_path("plan", plan), profile_path=_path("profile", profile),
                 pipeline_stage_num=_int("pipeline_stages", pipeline_stages), b_max=_int("b_max", b_max),
                 t_max_s=_number("t_max", t_max), max_staleness=_int("staleness", staleness),
                 replications=_count("replications", replications), seed=_count("seed", seed),
                 trace=_path("trace", trace), rlinf_config=rlinf_config, gpu=_choice("gpu", gpu),
                 price=_number("gpu_hour_price", gpu_hour_price), interval=_flag("interval", interval),
                 scale_global_batch=_flag("scale_global_batch", scale_global_batch), say=_say(say),
                 **_node(node)).to_json()
    shown = [text for kind, text in interval_rows(p) if kind == "warning"]
    return {**p, "warnings": _records([*p.get("warnings", []), *shown], rlinf_config)}


def plan(gpus: int | None = None, *, objective: str = "throughput", backbone: str | None = None,
         profile: PathArg = None, modes: ListArg = None, ratios: ListArg = None, pipeline_stages: ListArg = None,
         b_max: ListArg = None, t_max: ListArg = None, staleness: int | ListArg = None,
         gpu_hour_price: float | None = None, env_steps: float | None = None, within_hours: float | None = None,
         replications: int = 1, seed: int = 0, jobs: int | None = None, rlinf_config: PathArg = None,
         gpu: str | None = None, scale_global_batch: bool = False, sweep: PathArg = None, out: PathArg = None,
         details: PathArg = None, say: Say | None = None, node: dict[str, Any] | None = None,
         envs_per_gpu: ListArg = None, micro_batch_sizes: ListArg = None,
         sample_efficiency: dict[str, float] | None = None) -> dict[str, Any]:
    """``perfmodel plan --json``: the best plan for the budget (``plan``, runnable by ``executor
    run``), its prediction (``best``), the runner-up with the interval of their ratio,
    ``top_candidates`` (the table's rows) and the ``explanation``. ``sweep``: choose from this
    saved sweep file instead of sweeping now. ``warnings``: the command's warning lines, as
    records (module docstring)."""
    # with ``sweep``: the options set away from their defaults must agree with the sweep's own
    _flag("scale_global_batch", scale_global_batch)
    given = {name for name, set_ in (("staleness", staleness is not None), ("replications", replications != 1),
                                     ("seed", seed != 0), ("scale_global_batch", scale_global_batch)) if set_}
    rlinf_config = _path("rlinf_config", rlinf_config)
    tell, kept = _collect(_say(say))
    summary = _plan(_int("gpus", gpus), backbone=_choice("backbone", backbone), profile_path=_path("profile", profile),
                    modes=_list("modes", modes), ratios=_list("ratios", ratios),
                    pipeline_stages=_list("pipeline_stages", pipeline_stages), b_max=_list("b_max", b_max),
                    t_max=_list("t_max", t_max),
                    staleness=staleness if isinstance(staleness, int) and not isinstance(staleness, bool)
                    else _list("staleness", staleness),
                    price=_number("gpu_hour_price", gpu_hour_price), replications=_count("replications", replications),
                    seed=_count("seed", seed), jobs=_int("jobs", jobs), rlinf_config=rlinf_config,
                    gpu=_choice("gpu", gpu), scale_global_batch=scale_global_batch,
                    objective=_text_arg("objective", objective), env_steps=_number("env_steps", env_steps),
                    within_hours=_number("within_hours", within_hours), sweep_path=_path("sweep", sweep),
                    out=_path("out", out), details=_path("details", details), given_options=given, say=tell,
                    envs_per_gpu=_list("envs_per_gpu", envs_per_gpu),
                    micro_batch_sizes=_list("micro_batch_sizes", micro_batch_sizes),
                    sample_efficiency=_factors(sample_efficiency), **_node(node)).summary
    return {**summary, "warnings": _records(kept, rlinf_config)}


def sweep(gpus: ListArg = None, *, backbone: str | None = None, profile: PathArg = None, modes: ListArg = None,
          ratios: ListArg = None, pipeline_stages: ListArg = None, b_max: ListArg = None, t_max: ListArg = None,
          staleness: int | None = None, gpu_hour_price: float | None = None, replications: int = 1, seed: int = 0,
          jobs: int | None = None, rlinf_config: PathArg = None, gpu: str | None = None,
          scale_global_batch: bool = False, out: PathArg = None, csv: PathArg = None,
          interval: bool = True, say: Say | None = None, node: dict[str, Any] | None = None,
          envs_per_gpu: ListArg = None, micro_batch_sizes: ListArg = None) -> dict[str, Any]:
    """``perfmodel sweep --json``: every combination's prediction (``rows``) and the sweep's
    ``spec``; list arguments (``gpus`` too: an integer, a list or comma-separated text) take a
    list or comma-separated text. ``warnings``: the command's warning lines, as records."""
    rlinf_config = _path("rlinf_config", rlinf_config)
    tell, kept = _collect(_say(say))
    doc = _sweep(_list("gpus", gpus), backbone=_choice("backbone", backbone), profile_path=_path("profile", profile),
                 modes=_list("modes", modes), ratios=_list("ratios", ratios),
                 pipeline_stages=_list("pipeline_stages", pipeline_stages), b_max=_list("b_max", b_max),
                 t_max=_list("t_max", t_max), staleness=_int("staleness", staleness),
                 price=_number("gpu_hour_price", gpu_hour_price), replications=_count("replications", replications),
                 seed=_count("seed", seed), jobs=_int("jobs", jobs), rlinf_config=rlinf_config, gpu=_choice("gpu", gpu),
                 scale_global_batch=_flag("scale_global_batch", scale_global_batch), out=_path("out", out),
                 csv_out=_path("csv", csv), interval=_flag("interval", interval), say=tell,
                 envs_per_gpu=_list("envs_per_gpu", envs_per_gpu),
                 micro_batch_sizes=_list("micro_batch_sizes", micro_batch_sizes), **_node(node))
    return {**doc, "warnings": _records(kept, rlinf_config)}


def calibrate(reference: PathArg = None, *, runs: Sequence[str | os.PathLike] | None = None,
              out_dir: PathArg = None, max_evals: int | None = None, name: str | None = None,
              cpu_cores_per_node: int | None = None, say: Say | None = None) -> dict[str, Any]:
    """``perfmodel calibrate --json``: fit the profiles to ``reference`` (default: the bundled
    published results) and write them to ``out_dir`` (default: your profile directory); with
    ``runs`` (``--from-rlinf-run``: RLinf log folders or ``executor run`` directories), a profile
    of your cluster fitted to your runs, named ``name`` (default ``<backbone>_cluster``)."""
    reference, out_dir = _path("reference", reference), _path("out_dir", out_dir)
    max_evals, say = _int("max_evals", max_evals), _say(say)
    if runs is None:
        for arg, v in (("name", name), ("cpu_cores_per_node", cpu_cores_per_node)):
            if v is not None:
                raise ConfigError(arg, "only with runs (the published fit writes the bundled profiles' names on "
                                       "their node)")
        argv = [a for k, v in (("--reference", reference), ("--out-dir", out_dir)) if v is not None for a in (k, v)]
        argv += ["--max-evals", str(max_evals)] if max_evals is not None else []
        return _calibrate(reference, out_dir=out_dir, max_evals=max_evals, argv=argv, say=say)
    import shlex

    from perfmodel.calibration.from_runs import calibrate_command
    from perfmodel.commands.common import to_stderr

    if isinstance(runs, (str, os.PathLike)) or not isinstance(runs, (list, tuple)):
        raise ConfigError("runs", f"must be a list of run folders (str or pathlib.Path), got {_kind(runs)}")
    if reference is not None:
        raise ConfigError("reference", "give either reference (the published fit) or runs, not both")
    paths = [_path("runs", r) for r in runs]
    name, cores = _choice("name", name), _int("cpu_cores_per_node", cpu_cores_per_node)
    argv = ["--from-rlinf-run", *paths] + [a for k, v in (("--out-dir", out_dir), ("--name", name)) if v is not None
                                           for a in (k, v)]
    argv += [a for k, v in (("--max-evals", max_evals), ("--cpu-cores-per-node", cores)) if v is not None
             for a in (k, str(v))]
    tell = say or to_stderr

    def echo(text: str = "", err: bool = False) -> None:
        if err:
            tell(text)

    return calibrate_command(paths, "runs", out_dir=out_dir, cpu_cores_per_node=cores, max_evals=max_evals,
                             as_json=True, quiet=False, name=name,
                             command="perfmodel calibrate " + " ".join(shlex.quote(a) for a in argv), echo=echo)


def validate(reference: PathArg = None, *, cross: bool = False, max_evals: int | None = None, design: str = "both",
             say: Say | None = None) -> dict[str, Any]:
    """``perfmodel validate --json``: the validation against ``reference`` (default: the bundled
    published results), or with ``cross`` the cross-validation (``design``: its folds)."""
    return _validate(_path("reference", reference), cross=_flag("cross", cross), max_evals=_int("max_evals", max_evals),
                     design=_text_arg("design", design), design_given=design != "both", say=_say(say))


def _formatted(fn: Callable[[dict[str, Any]], str], doc: Any, what: str, returns: str) -> str:
    if not isinstance(doc, Mapping):
        raise ConfigError(what, f"must be the dict {returns} returns, got {_kind(doc)}")
    doc = dict(doc)
    if isinstance(doc.get("warnings"), list):
        doc["warnings"] = _texts(doc["warnings"])
    try:
        return fn(doc)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
        detail = f"missing field {e}" if isinstance(e, KeyError) else " ".join(str(e).split())[:120]
        raise ConfigError(what, f"not a whole document as {returns} returns it ({type(e).__name__}: {detail})") from None


def format_prediction(p: dict[str, Any]) -> str:
    """The text ``perfmodel predict`` prints for ``p`` (what ``predict`` returns)."""
    def text(doc: dict[str, Any]) -> str:  # the extrapolation records are the text's own rows: not twice
        shown = {t for kind, t in interval_rows(doc) if kind == "warning"}
        return _format_prediction({**doc, "warnings": [t for t in doc.get("warnings") or [] if t not in shown]})

    return _formatted(text, p, "p", "api.predict")


def format_plan(choice: dict[str, Any]) -> str:
    """The table ``perfmodel plan`` prints for ``choice`` (what ``plan`` returns)."""
    return _formatted(_format_plan, choice, "choice", "api.plan")


def format_validation(v: dict[str, Any]) -> str:
    """The text ``perfmodel validate`` prints for ``v`` (what ``validate`` returns)."""
    return _formatted(_format_validation, v, "v", "api.validate")

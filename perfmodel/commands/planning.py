"""What ``perfmodel sweep`` and ``perfmodel plan`` share: their list options parsed into a
``SweepSpec`` (perfmodel.planning.sweep), the profile they sweep, an RLinf config as the base of
every plan, and the rows of a saved sweep that the options select."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection

from perfmodel.commands.common import (Say, backbone_or_profile, check_gpu, check_price, check_replications,
                                       check_seed, fail, load_rlinf_config)
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import Plan, is_profile_path


def parse_list(option: str, text: str | None, kind, allowed: str) -> tuple | None:
    if text is None:
        return None
    items = [t.strip() for t in str(text).split(",")]
    if not items or any(t == "" for t in items):
        fail(option, f"must be a comma-separated list of {allowed}, got {text!r}")
    out = []
    for t in items:
        if kind is None:
            out.append(t)
            continue
        if t.lower() in ("null", "none") and option == "--b-max":
            out.append(None)
            continue
        try:
            out.append(kind(t))
        except ValueError:
            fail(option, f"must be a comma-separated list of {allowed}, got {text!r}")
    return tuple(out)


def profile_ref(backbone: str | None, profile_path: str | None) -> str:
    """What plans record as their profile: a bundled name, or the profile file as an absolute
    path (a relative one would later be read against the plan file's directory)."""
    ref = backbone_or_profile(backbone, profile_path) or "pi05"
    if profile_path is not None and Path(profile_path).exists():
        return str(Path(profile_path).resolve())
    return ref


def portable_plan(plan_dict: dict[str, Any], out: str) -> dict[str, Any]:
    """A plan to write at ``out``: a profile file path made relative to ``out``'s directory
    (where ``Plan.load`` resolves it), so the two can move together."""
    import os

    ref = plan_dict.get("profile")
    if isinstance(ref, str) and is_profile_path(ref) and Path(ref).is_absolute():
        plan_dict = {**plan_dict, "profile": os.path.relpath(ref, Path(out).resolve().parent)}
    return plan_dict


def load_profile_of(backbone: str | None, profile_path: str | None):
    from perfmodel.schema.profile import load_profile

    ref = backbone_or_profile(backbone, profile_path) or "pi05"
    return ref, load_profile(ref, "--profile" if profile_path else "--backbone")


def sweep_profile(doc: dict[str, Any], sweep_path: str):
    """(the profile a sweep file was made with, or None and why): ``plan --sweep`` needs it for
    the ratio intervals (best over runner-up and over colocated); ``choose`` checks that it still
    gives the sweep's numbers. A relative file path is tried here, then beside the sweep file."""
    from perfmodel.schema.profile import load_profile

    ref = doc.get("spec", {}).get("profile_ref")
    if not isinstance(ref, str) or not ref:
        return None, "the sweep file names no profile (spec.profile_ref): no ratio intervals"
    tries = [ref]
    if not Path(ref).is_absolute() and (Path(sweep_path).parent / ref).is_file():
        tries.append(str(Path(sweep_path).parent / ref))
    why = ""
    for r in tries:
        try:
            return load_profile(r), None
        except (ConfigError, OSError, ValueError) as e:
            why = str(e)
    return None, f"the sweep's profile {ref!r} cannot be loaded here ({why}): no ratio intervals"


def rlinf_base(rlinf_config, backbone, profile_path, gpu, pipeline_stages, modes=None, say: Say | None = None,
               node: dict[str, Any] | None = None):
    """(profile ref, base plan dict, pipeline stages) for a sweep over an RLinf config; one of
    ``--modes`` stands for a config whose own mode vlaperf cannot name."""
    check_gpu(gpu)
    if rlinf_config is None:
        return None, None, pipeline_stages, None
    from perfmodel.rlinf.importer import UnnamedModeError

    try:
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu, say=say, node=node)
    except UnnamedModeError as e:
        # The sweep sets each row's mode anyway: one of --modes stands for the config, the first
        # that keeps its placement (shared or disjoint GPUs), else the first.
        from perfmodel.planning.sweep import check_modes

        _, option, kind, allowed = LIST_OPTIONS[0]
        listed = parse_list(option, modes, kind, allowed)
        if listed is None:
            raise
        check_modes(listed)
        same = [m for m in listed if MODE_TABLE[m].disaggregated == e.disaggregated]
        im = load_rlinf_config(rlinf_config, backbone, profile_path, gpu, (same or listed)[0], say, node)
    stages = pipeline_stages if pipeline_stages is not None else str(im.plan.pipeline_stage_num)
    ref = im.plan.profile  # a bundled name, or a file: absolute, as _cp_ref makes it
    if Path(ref).is_file():
        ref = str(Path(ref).resolve())
    return ref, {**im.plan.to_dict(), "profile": ref}, stages, im


# The sweep's list options: (SweepSpec field, option, element type, what is allowed).
LIST_OPTIONS = (("modes", "--modes", None, f"modes ({', '.join(MODES)})"),
             ("ratios", "--ratios", None, "R:A ratios (e.g. 1:1,3:1)"),
             ("pipeline_stages", "--pipeline-stages", int, "integers >= 1"),
             ("b_max", "--b-max", int, "integers >= 1 or null"),
             ("t_max_s", "--t-max", float, "seconds >= 0"))


def parse_lists(modes, ratios, pipeline_stages, b_max, t_max) -> dict[str, tuple | None]:
    """The sweep's list options parsed, by SweepSpec field (None: not given)."""
    texts = (modes, ratios, pipeline_stages, b_max, t_max)
    return {field: parse_list(option, text, kind, allowed)
            for (field, option, kind, allowed), text in zip(LIST_OPTIONS, texts)}


def staleness_values(staleness) -> tuple[int, ...] | None:
    """``--staleness``: one integer (an int from a Python caller) or a comma-separated list."""
    if staleness is None:
        return None
    if isinstance(staleness, int) and not isinstance(staleness, bool):
        return (staleness,)
    return parse_list("--staleness", staleness, int, "integers >= 0")


# Envs per GPU the planner tries above a config's own when --envs-per-gpu is not given: the own
# count times these, up to MAX_ENVS_PER_CORE per CPU core of a GPU's share of the node (the
# published setup runs 3: 48 envs per GPU on 16 cores); node RAM and GPU memory then drop what
# does not fit (rows "envs do not fit node RAM").
ENV_MULTIPLES = (1, 2, 4, 6)
MAX_ENVS_PER_CORE = 4


def envs_candidates(base_plan: dict[str, Any] | None, node: dict[str, Any] | None = None) -> tuple[int, ...] | None:
    """The envs per GPU ``plan`` and ``sweep`` search for an RLinf config (its own count first), or None
    (no config: the published setup's own count only)."""
    if base_plan is None:
        return None
    plan = Plan.from_dict(base_plan, "base plan")
    own = plan.workload.total_num_envs / plan.cluster.gpus
    if not float(own).is_integer():
        return None
    own = int(own)
    cap = MAX_ENVS_PER_CORE * plan.cluster.cpu_cores_per_gpu
    return tuple(dict.fromkeys([own] + [own * k for k in ENV_MULTIPLES if own * k <= cap]))


def sweep_spec(profile_ref, modes, gpus, ratios, pipeline_stages, b_max, t_max, price, replications, seed,
             staleness, base_plan=None, gpu=None, scale_global_batch=False, node=None, envs_per_gpu=None,
             micro_batch_sizes=None):
    """The SweepSpec of the options (lists as comma-separated text; ``envs_per_gpu`` may also be
    a tuple the caller chose); without ``envs_per_gpu``, the envs per GPU of ``envs_candidates``:
    ``plan`` and ``sweep`` search the same space."""
    from perfmodel.planning.sweep import SweepSpec

    stale = staleness_values(staleness)
    kw: dict[str, Any] = {"profile_ref": profile_ref, "gpu_hour_price": price, "replications": replications,
                          "seed": seed, "max_staleness": stale[0] if stale and len(stale) == 1 else None,
                          "base_plan": base_plan, "gpu": gpu,
                          "scale_global_batch": scale_global_batch, "node": node or None}
    if stale and len(stale) > 1:
        kw["staleness"] = stale
    envs = envs_per_gpu if isinstance(envs_per_gpu, tuple) else parse_list("--envs-per-gpu", envs_per_gpu, int,
                                                                          "integers >= 1")
    if envs is None:  # plan and sweep search the same envs per GPU by default (issue 41)
        envs = envs_candidates(base_plan, node)
    micro = parse_list("--micro-batch-sizes", micro_batch_sizes, int, "integers >= 1")
    if envs:
        kw["envs_per_gpu"] = envs
    if micro:
        kw["micro_batch_sizes"] = micro
    lists = {**parse_lists(modes, ratios, pipeline_stages, b_max, t_max), "gpus": gpus}
    kw.update({k: v for k, v in lists.items() if v is not None})
    spec = SweepSpec(**kw)
    spec.check()
    return spec


def check_common(jobs: int | None, price: float | None, replications: int, seed: int) -> None:
    if jobs is not None and not 1 <= jobs <= 1024:
        fail("--jobs", f"must be an integer in 1..1024, got {jobs}")
    check_price(price)
    check_replications(replications)
    check_seed(seed)


def sweep_rows(sweep_path, backbone, profile_path, modes, ratios, pipeline_stages, b_max, t_max, staleness,
               replications, seed, scale_global_batch=False, given_options: Collection[str] = ()) -> dict[str, Any]:
    """The rows of ``--sweep`` that the other options select. Options that select rows filter
    them; options that would have changed the predictions must agree with the sweep's own.
    ``given_options``: the parameters the caller set (a default is never a contradiction)."""
    from perfmodel.planning.sweepfile import load_sweep, select_rows

    doc = load_sweep(sweep_path)
    spec = doc.get("spec", {})

    def given(name: str) -> bool:
        return name in given_options

    if backbone is not None and doc.get("backbone") not in (None, backbone):
        fail("--backbone", f"{backbone} contradicts --sweep {sweep_path}, a {doc.get('backbone')} sweep; "
                            "leave it out or sweep again")
    if profile_path is not None and spec.get("profile_ref") not in (profile_path, profile_ref(None, profile_path)):
        fail("--profile", f"contradicts --sweep {sweep_path}, swept with profile {spec.get('profile_ref')!r}; "
                           "leave it out or sweep again")
    if given("scale_global_batch") and bool(spec.get("scale_global_batch")) != scale_global_batch:
        fail("--scale-global-batch", f"contradicts --sweep {sweep_path}, swept without it; leave it out or sweep again")
    stale = staleness_values(staleness)
    if stale is not None and len(stale) > 1:
        fail("--staleness", f"takes one value with --sweep {sweep_path} (a saved sweep is chosen from as it is); "
                            "sweep again with the list")
    staleness = stale[0] if stale else None
    for name, option, value in (("staleness", "--staleness", staleness), ("replications", "--replications",
                                                                          replications), ("seed", "--seed", seed)):
        key = "max_staleness" if name == "staleness" else name
        swept = spec.get(key)
        if key == "max_staleness" and swept is None:
            swept = Plan.__dataclass_fields__["max_staleness"].default  # the sweep kept the plan default
        if given(name) and swept != value:
            fail(option, f"{value} contradicts --sweep {sweep_path}, swept with {key} {swept}; "
                          "leave it out or sweep again")
    selection = parse_lists(modes, ratios, pipeline_stages, b_max, t_max)
    return select_rows(doc, selection, {field: option for field, option, *_ in LIST_OPTIONS})



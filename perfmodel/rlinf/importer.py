"""RLinf config -> vlaperf plan (the mapping table is in docs/guide.md, "How RLinf keys map onto a plan").

A key that changes throughput is either mapped onto a plan field, or reported: refused with one
line naming it (``ConfigError``: a model without a profile, an algorithm or placement the model
has no mode for), or listed as a warning (a setting the plan cannot represent whose effect the
prediction then ignores). Nothing that matters is dropped silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.rlinf.compose import Composed, compose
from perfmodel.rlinf.fork import READ as FORK_READ
from perfmodel.rlinf.fork import (MANAGERS, PIPELINE_MODE, ROLLOUT_ASYNC, STREAMING, col_reading, hybrid_placement,
                                  read_fork)
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.hardware import GPU_NAMES
from perfmodel.schema.modes import MODE_TABLE, MODES
from perfmodel.schema.plan import DEFAULT_T_MAX_S, GROUPED_ALGORITHMS, MAX_FIELD, MAX_GPUS, Plan

COMPONENTS = ("actor", "env", "rollout")
# what a config whose own mode vlaperf cannot name asks of the user (predict: one mode; sweep and
# plan: the modes to compare, the first of which stands for the config)
PASS_MODE = "pass --mode (sweep and plan: --modes) to cost it as one of them"


class UnnamedModeError(ConfigError):
    """A config whose own pipeline is no vlaperf mode: the caller may name one (``mode``).
    ``disaggregated``: whether the config puts actor and rollout on GPUs of their own."""

    def __init__(self, field: str, message: str, disaggregated: bool) -> None:
        super().__init__(field, message)
        self.disaggregated = disaggregated
# vlaperf's own block: what RLinf's schema cannot say (the RL-VLA3 fork's dynamic batching and
# streaming, the accelerator). RLinf ignores a top-level key it does not read.
VLAPERF_KEYS = ("mode", "b_max", "t_max_s", "gpu", "profile", "placement_strategy", "allocation_ratio", "trained_part",
                "rollout",
                # the node (perfmodel/schema/node.py): an RLinf config names nodes, not their shape
                "cpu_cores_per_node", "gpus_per_node", "inter_node_bw_GBps", "node_ram_gb")
# (algorithm.adv_type, algorithm.loss_type) -> the workload's algorithm.
ALGORITHMS = {("gae", "actor_critic"): "ppo", ("gae", "decoupled_actor_critic"): "ppo",
              ("grpo", "actor"): "grpo", ("grpo", "decoupled_actor"): "grpo",
              # RLinf's NFT (workers/actor/fsdp_nft_policy_worker.py): GRPO's rollout, groups and
              # batches, another loss and training pass (perfmodel.backbones.Backbone.nft_train_flops)
              ("grpo", "embodied_nft"): "nft",
              # on-policy distillation: GRPO's pipeline with a teacher's forward on the student's samples
              ("opd", "opd"): "opd",
              # RLinf's DSRL (with actor.model.openpi.use_dsrl; _dsrl_notes) and DAgger (_teacher_notes)
              ("embodied_sac", "embodied_sac"): "dsrl", ("gae", "embodied_dagger"): "dagger"}
# What each refused algorithm runs per iteration (rlinf 0.3.0), and why vlaperf does not cost it.
UNMODELLED_ALGORITHMS = {
    "embodied_sac": "SAC without actor.model.openpi.use_dsrl trains Q heads on the VLA's own features "
                    "(workers/actor/fsdp_sac_policy_worker.py); vlaperf costs SAC only as DSRL (openpi with use_dsrl: "
                    "the VLA frozen, small nets trained)",
}
ALGORITHM_NAMES = ("PPO: gae + actor_critic / decoupled_actor_critic, GRPO: grpo + actor, NFT: grpo + embodied_nft, "
                   "OPD: opd + opd, DSRL: embodied_sac + embodied_sac with openpi.use_dsrl, DAgger: gae + embodied_dagger")
# RLinf model types -> bundled profiles. RLinf's model/gr00t.yaml is GR00T N1.5 (n1d6, n1d7 have
# their own model types); gr00t_n1d7 has no published shapes here.
# dexbotic_pi: Dexbotic's pi0 (RLinf model/dexbotic_pi.yaml: two images, flow matching, an action
# expert trained alone), costed with openpi pi0's shapes: assumed, and said in a warning.
# mlp_policy: RLinf's MLP policy (perfmodel.backbones.MLP_POLICY), its shapes from rlinf's code.
MODEL_TYPES = {"gr00t": "gr00t_n15", "gr00t_n1d6": "gr00t_n16", "openvla_oft": "openvla_oft", "dexbotic_pi": "pi0",
               "mlp_policy": "mlp_policy"}
PROFILED = ("openpi pi0.5 -> pi05", "openpi pi0 -> pi0", "gr00t -> gr00t_n15", "gr00t_n1d6 -> gr00t_n16",
            "openvla_oft -> openvla_oft", "dexbotic_pi -> pi0", "mlp_policy -> mlp_policy")
ASSUMED_SHAPES = {"dexbotic_pi": "Dexbotic's pi0 (RLinf models/embodiment/dexbotic_pi builds dexbotic's Pi0ForCausalLM "
                                 "from the checkpoint's Pi0Config: the pi0 architecture, two images, flow matching, "
                                 "the action expert trained alone) costed with openpi pi0's shapes (PaliGemma 3B + "
                                 "300M action expert); the checkpoint's sizes are not read here"}
# Why a model RLinf ships has no shapes here (rlinf 0.3.0's code and the configs read for them).
UNSHAPED_MODELS = {
    "abot_m0": "ABot-M0 (models/embodiment/abot_m0) builds its Qwen-VL interface and action head from the "
               "checkpoint's own config (from_pretrained); the config gives chunk 10, 4 denoising steps and "
               "224-px images, and neither it nor ../shared/reference/models.md gives layers or widths",
    "evo1": "Evo-1: the config gives its action head's horizon 50, 24-dim states and actions, 32 inference "
            "timesteps and 448-px images, not its vision-language backbone's layers or widths (built from "
            "evo1.repo_path's code and the checkpoint)",
    "starvla": "StarVLA (starvla.framework_name QwenOFT, checkpoint Qwen2.5-VL-OFT-LIBERO-4in1): the Qwen2.5-VL's "
               "size is the checkpoint's, given by neither the config nor ../shared/reference/models.md",
    "dexbotic_dm0": "Dexbotic DM0 (models/embodiment/dexbotic_dm0: a Qwen3 VLM and an action expert, shapes from "
                    "the checkpoint's DM0Config.from_pretrained); the config gives 2 images, chunk 10 and 5 denoising "
                    "steps, not layers or widths",
    "gr00t_n1d7": "GR00T N1.7 (models/embodiment/gr00t/gr00t_n1d7: a Qwen3-VL backbone loaded by the checkpoint's "
                  "model_name, Qwen3VLForConditionalGeneration): its size and DiT depth are in neither the config "
                  "nor ../shared/reference/models.md",
}
MAX_DENOISING_STEPS = 10_000  # flow-matching policies use a handful (RLinf's: 4-10)
ASYNC_LOOKING = re.compile(r"async|stream|dynamic_batch|staleness|max_batch|batch_timeout|decoupled|training_pipeline|"
                           r"queue_size", re.I)
# RLinf's own switches (rlinf 0.3.0): dynamic batching of rollout inference, with its 20 ms
# timeout (runner.enable_decoupled_mode, workers/rollout/hf/async_huggingface_worker.py), and
# streaming training, which RLinf has only in its synchronous runner (runner.use_training_pipeline,
# runners/embodied_runner.py run_pipeline).
DECOUPLED, TRAINING_PIPELINE = "runner.enable_decoupled_mode", "runner.use_training_pipeline"
# How RLinf's asynchronous PPO on shared GPUs (``actor,env,rollout: all`` with a staleness
# threshold; RLinf's libero_*_async_ppo_* configs) is costed: every mechanism is the simulator's.
SHARED_ASYNC_NOTE = ("algorithm.staleness_threshold: {staleness} with actor and rollout on the same GPUs: costed as "
                     "train_async on shared GPUs (allocation_ratio null): each GPU runs its env worker's inference "
                     "calls and an actor rank's micro-batches and optimizer steps in turn, first come first served "
                     "(two processes time-sharing a GPU, no MPS assumed); both models resident, no offload, weights "
                     "handed over in place (0 s, as colocated); env workers get their GPU's share of the node's "
                     "cores (the actor's CPU use is not charged); staleness counted in iterations, as RLinf 0.3.0 "
                     "does (docs/metrics.md, Weight versions)")
# That config with ``--ratio``: actor and rollout put apart at the option's split.
RATIO_APART_NOTE = ("--ratio {ratio}: the config's actor and rollout share every GPU; costed apart, {mode} at "
                    "rollout:actor {ratio}")


@dataclass
class Imported:
    plan: Plan
    backbone: str
    source: str
    warnings: list[str] = field(default_factory=list)
    config_gpus: int = 0  # GPUs in the config's cluster (num_nodes x GPUs per node)
    assumed_node: str | None = None  # the node values neither the caller nor the vlaperf: block gave

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.source, "backbone": self.backbone, "warnings": list(self.warnings)}


def mlp_policy_note() -> str:
    """What an mlp_policy prediction stands on, with the bundled profiles' own numbers: the shapes
    are RLinf's, the fixed times per call, micro-batch and optimizer step its stand-in's measured on
    CPU (bracketed up to the calibration's, fitted to RLinf's VLA path), no host work per
    observation of its own, and the env the calibration's rendered one (the config renders both
    cameras, whose images the MLP does not read)."""
    from perfmodel.backbones import LAUNCH_BOUND, get_backbone
    from perfmodel.schema.profile import load_profile

    spec, gpu = get_backbone("mlp_policy"), load_profile("mlp_policy")
    par = gpu.provenance["parameters"]
    k = gpu.costs
    hi = {n: par[n]["bracket"][1] for n in ("infer_overhead_s", "train_micro_fixed_s", "optimizer_fixed_s", "obs_cpu_s")}
    return (f"RLinf's MLP policy costed from its shapes (rlinf 0.3.0 mlp_policy.py: {spec.params / 1e6:.2f}M "
            f"parameters, {spec.inference_flops() / 1e6:.2f} MFLOP per sample, all trained); no GPU measured it: its "
            f"fixed times are its stand-in's (random weights) measured on one CPU core "
            f"(profiles/{LAUNCH_BOUND['mlp_policy']}.json: {k.infer_s.intercept * 1e3:.2f} ms per inference call, "
            f"{k.train_micro_batch_s.intercept * 1e3:.2f} ms per micro-batch, {k.optimizer_fixed_s * 1e3:.2f} ms per "
            f"optimizer step), taken as its GPU call costs (a launch-bound MLP costs on a GPU what its host path costs), "
            f"and the interval reaches the calibration's fixed times of RLinf's VLA path ({hi['infer_overhead_s']:.3f} s, "
            f"{hi['train_micro_fixed_s']:.3f} s, {hi['optimizer_fixed_s']:.3f} s: what of RLinf's path around the model "
            f"it pays is not measured); no host work per observation of its own (up to {hi['obs_cpu_s']:.3f} s in the "
            "interval); the env renders both cameras as for a VLA (env/libero_spatial.yaml init_params, images sent "
            "and not read), so its costs are the calibration's rendered ones")


def backbone_of(c: Composed) -> str:
    """actor.model.model_type (and openpi.config_name) -> a bundled profile's backbone, or refusal."""
    mt = c.get("actor.model.model_type", None)
    if mt is None:
        raise ConfigError("actor.model.model_type", "is missing: vlaperf maps it to a profile (openpi pi0.5 -> pi05, "
                                                     "openpi pi0 -> pi0, gr00t -> gr00t_n15, gr00t_n1d6 -> gr00t_n16, "
                                                     "openvla_oft -> openvla_oft)")
    if mt == "openpi":
        name = str(c.get("actor.model.openpi.config_name", ""))
        if name.startswith("pi05"):
            return "pi05"
        if name.startswith("pi0"):  # openpi's pi0 configs (pi0_libero, ...): PaliGemma + action expert
            return "pi0"
        raise ConfigError("actor.model.openpi.config_name", f"{name or '(none)'} is neither an openpi pi0 nor a pi0.5 "
                                                            "config: no profile for it (pi0*, pi05*)")
    if mt in MODEL_TYPES:
        return MODEL_TYPES[mt]
    why = f": {UNSHAPED_MODELS[mt]}" if isinstance(mt, str) and mt in UNSHAPED_MODELS else ""
    raise ConfigError("actor.model.model_type", f"{mt!r} has no profile{why} (profiled: {', '.join(PROFILED)}); "
                                                f"pass --profile with a profile of your own")


def parse_gpus(text: Any, total: int, key: str) -> list[int]:
    """An RLinf placement value: ``all``, ``N``, ``a-b`` or a comma list of those -> GPU ids."""
    if isinstance(text, bool):
        raise ConfigError(key, f"must be 'all', a GPU id or a range a-b, got {text!r}")
    if isinstance(text, int):
        parts = [str(text)]
    elif isinstance(text, str):
        parts = [t.strip() for t in text.split(",") if t.strip()]
    else:
        raise ConfigError(key, f"must be 'all', a GPU id or a range a-b (node groups are not supported), got {text!r}")
    ids: list[int] = []
    for t in parts:
        if t == "all":
            ids.extend(range(total))
            continue
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", t)
        if not m:
            raise ConfigError(key, f"must be 'all', a GPU id or a range a-b, got {text!r}")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise ConfigError(key, f"range {t} runs backwards")
        ids.extend(range(a, b + 1))
    if any(i >= total for i in ids):
        raise ConfigError(key, f"{text} reaches GPU {max(ids)} but cluster.num_nodes gives {total} GPUs "
                               f"(GPUs 0-{total - 1})")
    if len(set(ids)) != len(ids):
        raise ConfigError(key, f"{text} names a GPU twice")
    return sorted(ids)


def placement_of(c: Composed, gpus_per_node: int) -> tuple[int, list[int], list[int], list[int]]:
    """(cluster GPUs, actor GPUs, env GPUs, rollout GPUs) from cluster.num_nodes and
    cluster.component_placement."""
    nodes = c.get("cluster.num_nodes", 1)
    most = MAX_GPUS // gpus_per_node  # a plan's GPU bound, in nodes
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= most:
        raise ConfigError("cluster.num_nodes", f"must be an integer in 1..{most} ({MAX_GPUS} GPUs at {gpus_per_node} "
                                               f"per node), got {nodes!r}")
    total = nodes * gpus_per_node
    cp = c.get("cluster.component_placement", None)
    if not isinstance(cp, dict) or not cp:
        raise ConfigError("cluster.component_placement", "must map components (actor, env, rollout) to GPUs, "
                                                         f"e.g. 'actor,env,rollout: all'; got {cp!r}")
    where: dict[str, list[int]] = {}
    for k, v in cp.items():
        names = [n.strip() for n in str(k).split(",") if n.strip()]
        for n in names:
            if n not in COMPONENTS:
                raise ConfigError(f"cluster.component_placement.{k}",
                                  f"component {n!r} is not modelled (vlaperf models {', '.join(COMPONENTS)})")
            if n in where:
                raise ConfigError(f"cluster.component_placement.{k}", f"places {n} twice")
            where[n] = parse_gpus(v, total, f"cluster.component_placement.{k}")
    missing = [n for n in COMPONENTS if n not in where]
    if missing:
        raise ConfigError("cluster.component_placement", f"does not place {', '.join(missing)}")
    return total, where["actor"], where["env"], where["rollout"]


def _int(c: Composed, key: str, default: Any = None, most: int | None = None) -> int:
    v = c.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1 or (most is not None and v > most):
        raise ConfigError(key, f"must be an integer {'>= 1' if most is None else f'in 1..{most}'}, got {v!r}")
    return v


def _rollout_epoch(c: Composed, w: list[str]) -> int:
    """algorithm.rollout_epoch (newer RLinf) or env.train.rollout_epoch (older); both must agree."""
    a = c.get("algorithm.rollout_epoch", None)
    e = c.get("env.train.rollout_epoch", None)
    if a is not None and e is not None and a != e:
        raise ConfigError("algorithm.rollout_epoch", f"is {a} but env.train.rollout_epoch is {e}: set one of them")
    if a is None and e is None:
        raise ConfigError("env.train.rollout_epoch", "is missing (nor is algorithm.rollout_epoch set)")
    return _int(c, "algorithm.rollout_epoch" if a is not None else "env.train.rollout_epoch")


def _fork_block(c: Composed) -> dict[str, Any]:
    block = c.get("vlaperf", None)
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ConfigError("vlaperf", f"must be a mapping of {', '.join(VLAPERF_KEYS)}, got {block!r}")
    for k in block:
        if k not in VLAPERF_KEYS:
            raise ConfigError(f"vlaperf.{k}", f"is not a vlaperf key (allowed: {', '.join(VLAPERF_KEYS)})")
    return block


def _unread_async_keys(c: Composed) -> list[str]:
    """Keys that look like asynchronous-pipeline settings of an RLinf fork but are not read here."""
    read = {"algorithm.staleness_threshold", DECOUPLED, TRAINING_PIPELINE}
    out = []
    for top in ("algorithm", "rollout", "actor", "runner", "env.train"):
        v = c.get(top, None)
        if not isinstance(v, dict):
            continue
        stack = [(top, v)]
        while stack:
            prefix, d = stack.pop()
            for k, x in d.items():
                key = f"{prefix}.{k}"
                if isinstance(x, dict):
                    stack.append((key, x))
                elif ASYNC_LOOKING.search(str(k)) and key not in read:
                    out.append(key)
    return sorted(out)


def to_plan(c: Composed, profile_ref: str | None = None, gpu: str | None = None, mode: str | None = None,
            node: dict[str, Any] | None = None, ratio: str | None = None) -> Imported:
    """Map a composed RLinf config onto a plan. ``profile_ref`` overrides the model -> profile
    mapping (a profile the user measured for this model); ``gpu`` the accelerator; ``mode`` the
    mode the placement and async settings imply; ``node`` the node fields the caller gave
    (perfmodel/schema/node.py; they override the ``vlaperf:`` block's). ``ratio``: the
    rollout:actor split the caller puts the plan at (``--ratio``): where the config shares every
    GPU between actor and rollout, the note then says they are costed apart at it
    (RATIO_APART_NOTE) instead of how shared GPUs are costed (SHARED_ASYNC_NOTE). The split is
    the caller's to apply (commands/predict.py): it applies after the caller's other options
    (``--gpus``) and is checked against the cluster they give, which this config does not know."""
    from perfmodel.calibration.reference import default_cluster
    from perfmodel.gpu import gpu_node
    from perfmodel.schema.profile import load_profile

    warnings: list[str] = list(getattr(c, "notes", []))
    task = c.get("runner.task_type", "embodied")
    if task != "embodied":
        raise ConfigError("runner.task_type", f"must be embodied (VLA RL on LIBERO), got {task!r}")
    env_type = c.get("env.train.env_type", "libero")
    if env_type != "libero":
        raise ConfigError("env.train.env_type", f"must be libero (the profiled simulator), got {env_type!r}")
    block = _fork_block(c)

    if profile_ref is None and block.get("profile") is None:
        backbone = backbone_of(c)
        ref = backbone
    else:
        ref = profile_ref or str(block["profile"])
        backbone = "?"
    profile = load_profile(ref, "--profile" if profile_ref is not None else
                           "vlaperf.profile" if block.get("profile") is not None else "actor.model.model_type")
    if backbone == "?":
        backbone = profile.backbone
        mt = c.get("actor.model.model_type", None)
        try:
            same = mt is not None and backbone_of(c) == backbone
        except ConfigError:
            same = False
        if mt is not None and not same:  # a model the profile was not made for: say so
            warnings.append(f"actor.model.model_type: {mt} costed with profile {ref} (backbone {backbone}) as given")

    # Algorithm.
    adv, loss = c.get("algorithm.adv_type", "gae"), c.get("algorithm.loss_type", "actor_critic")
    algo = ALGORITHMS.get((adv, loss)) if isinstance(adv, str) and isinstance(loss, str) else None
    if algo == "dsrl" and not c.get_bool("actor.model.openpi.use_dsrl", False):
        algo = None
    if algo is None:
        why = UNMODELLED_ALGORITHMS.get(loss) if isinstance(loss, str) else None
        raise ConfigError("algorithm.loss_type", f"adv_type {adv} with loss_type {loss} is not modelled"
                                                 + (f": {why}" if why else "") + f" (vlaperf models {ALGORITHM_NAMES})")
    if algo == "nft":
        _nft_notes(c, backbone, warnings)
    elif algo == "dsrl":
        _dsrl_notes(c, backbone, warnings)
    elif algo in ("dagger", "opd"):
        _teacher_notes(c, algo, warnings)
    # checked whatever the algorithm: a group size of 0 is wrong in any config, and PPO ignores one
    group_size = _int(c, "algorithm.group_size", 1, most=MAX_FIELD["group_size"])
    if algo not in GROUPED_ALGORITHMS:
        if group_size != 1:
            warnings.append(f"algorithm.group_size: {group_size} has no effect with PPO (adv_type {adv}); "
                            "only GRPO samples groups")
        group_size = 1

    # Accelerator and cluster.
    gpu = gpu or block.get("gpu")
    if gpu is not None and gpu not in GPU_NAMES:
        raise ConfigError("--gpu" if block.get("gpu") is None else "vlaperf.gpu",
                          f"must be one of {', '.join(GPU_NAMES)}; got {gpu!r}")
    base_cluster = default_cluster(profile, 1)
    if gpu is not None:  # that GPU's typical node (perfmodel.gpu.gpu_node), then the node options
        base_cluster = gpu_node(base_cluster, gpu)
    from perfmodel.schema.node import NODE_FIELDS, assumed_note, check_node, with_node

    node_given = {**check_node({f: block.get(f) for f in NODE_FIELDS}, {f: f"vlaperf.{f}" for f in NODE_FIELDS}),
                  **check_node(node or {})}
    base_cluster = with_node(base_cluster, node_given)
    total, actor, env, rollout = placement_of(c, base_cluster.gpus_per_node)
    used = sorted(set(actor) | set(rollout) | set(env))
    hybrid = hybrid_placement(actor, env, rollout)  # the RL-VLA3 fork's hyb62-style placements
    if hybrid:
        raise ConfigError("cluster.component_placement", hybrid)
    if set(env) != set(rollout):
        raise ConfigError("cluster.component_placement.env", f"env on GPUs {_ranges(env)} but rollout on "
                                                             f"{_ranges(rollout)}: vlaperf runs one env worker beside "
                                                             "each generator (place env and rollout together)")
    staleness = c.get("algorithm.staleness_threshold", None)
    shared_async = False  # train_async with actor and rollout on the same GPUs (the config's own)
    decoupled, streaming = bool(c.get(DECOUPLED, False)), bool(c.get(TRAINING_PIPELINE, False))
    fork = read_fork(c)  # the RL-VLA3 fork's asynchronous keys (perfmodel/rlinf/fork.py)
    if fork.per_env_async and staleness is None and set(actor) != set(rollout):
        staleness = 1
        warnings.append(f"{ROLLOUT_ASYNC}: the fork's asynchronous runner without algorithm.staleness_threshold: "
                        "costed with staleness 1 (the published runs' assumption)")
    shared = set(actor) == set(rollout)
    # the actor on every GPU, env and rollout on some of them (actor: 0-7, env,rollout: 4-7):
    # RLinf's synchronous runner rolls out on those, then trains on all (embodied_runner.py run)
    nested = set(actor) > set(rollout)
    if nested:
        if staleness is not None or decoupled or streaming or fork.per_env_async or fork.pipeline_async:
            raise ConfigError("cluster.component_placement.actor",
                              f"actor on GPUs {_ranges(actor)} spans rollout on {_ranges(rollout)} with an asynchronous "
                              "or streaming setting: vlaperf models that placement for RLinf's synchronous runner only "
                              "(rollout on its GPUs, then training on all)")
        derived, placement_ratio = "colocated", None
        if mode not in (None, "colocated") or block.get("mode") not in (None, "colocated"):
            raise ConfigError("--mode" if mode else "vlaperf.mode",
                              f"must be colocated (or omitted) for actor on GPUs {_ranges(actor)} spanning rollout on "
                              f"{_ranges(rollout)}: the synchronous runner's phases in turn; got {mode or block.get('mode')}")
        warnings.append(f"cluster.component_placement: actor on GPUs {_ranges(actor)} spans env and rollout on "
                        f"{_ranges(rollout)}: costed as colocated with the rollout on {len(rollout)} of the "
                        f"{len(actor)} GPUs (colocated_rollout_gpus {len(rollout)}): RLinf's synchronous runner "
                        "(runners/embodied_runner.py run) rolls out on those GPUs, then the actor trains on all "
                        f"{len(actor)}; the other {len(actor) - len(rollout)} wait during the rollout")
    elif shared:
        derived, placement_ratio = "colocated", None
    elif not set(actor) & set(rollout):
        derived = ("rollout_async" if decoupled or fork.per_env_async else "train_async") if staleness is not None \
            else "disaggregated"
        g = math.gcd(len(rollout), len(actor))
        placement_ratio = f"{len(rollout) // g}:{len(actor) // g}"
    else:
        raise ConfigError("cluster.component_placement.actor", f"actor on GPUs {_ranges(actor)} partly overlaps rollout "
                                                               f"on {_ranges(rollout)}: vlaperf models all-shared "
                                                               "(colocated), disjoint (disaggregated) or an actor on "
                                                               "every GPU of the rollout's and more (colocated with "
                                                               "colocated_rollout_gpus) GPUs")
    want = mode or block.get("mode")
    if want is not None and want not in MODES:
        raise ConfigError("--mode" if mode else "vlaperf.mode", f"must be one of {', '.join(MODES)}; got {want!r}")
    fork_col = shared and fork.per_env_async  # the fork's col_as / col_aa (perfmodel/rlinf/fork.py)
    if want is None:
        if fork_col and fork.streamer:
            raise UnnamedModeError(STREAMING, "True with actor and rollout on the same GPUs (col placement): the fork's "
                                              "streamer on shared GPUs is not a vlaperf mode (vlaperf's streamer "
                                              "trains on GPUs of its own); " + PASS_MODE, disaggregated=False)
        if shared and fork.pipeline_async and not fork.per_env_async:
            raise UnnamedModeError(PIPELINE_MODE, "async without the per-env asynchronous rollout "
                                                  f"({ROLLOUT_ASYNC}) is not a configuration of the fork's that vlaperf "
                                                  "models; " + PASS_MODE, disaggregated=False)
        if fork_col:
            derived = "rollout_async" if fork.pipeline_async else "colocated"
        if streaming:
            raise UnnamedModeError(TRAINING_PIPELINE, "RLinf's streaming inside its synchronous runner (micro-batches "
                                                      "per env worker and rollout epoch) is not a vlaperf mode "
                                                      "(vlaperf's streamer streams within the asynchronous rollout); "
                                                      + PASS_MODE + " (disaggregated: no overlap of training with "
                                                      "the rollout)", disaggregated=derived != "colocated")
        if decoupled and derived != "rollout_async":
            raise UnnamedModeError(DECOUPLED, "dynamic batching without asynchronous PPO on disjoint rollout and actor "
                                              "GPUs (algorithm.staleness_threshold, e.g. 'actor: 0-3' and "
                                              "'env,rollout: 4-7') is not a vlaperf mode (rollout_async adds it to "
                                              "asynchronous training); " + PASS_MODE,
                                   disaggregated=derived != "colocated")
        if shared and staleness is not None:
            derived = "train_async"  # RLinf's asynchronous PPO on the GPUs it shares (SHARED_ASYNC_NOTE)
        want = "streamer" if fork.streamer and derived == "rollout_async" else derived
    if fork_col and want == "rollout_async" and "allocation_ratio" not in block:
        # the fork's _run_async: a step's rollout starts from the weights its previous step trained
        if staleness is not None and staleness != 0:
            warnings.append(f"algorithm.staleness_threshold: {staleness} has no effect in the fork's "
                            f"{PIPELINE_MODE} async runner, which syncs the weights at every step: costed with "
                            "staleness 0")
        staleness = 0
    if fork_col and want in ("colocated", "rollout_async") and mode is None:
        warnings.append(col_reading(fork))
    if shared and staleness is not None and want == "train_async" and "allocation_ratio" not in block:
        shared_async = True  # the config's own mode, named or not: its placement kept
        if ratio is None:  # with --ratio its note comes last (below), after the config's own
            warnings.append(SHARED_ASYNC_NOTE.format(staleness=staleness))
    elif MODE_TABLE[want].disaggregated != (derived != "colocated"):
        if MODE_TABLE[want].disaggregated:
            warnings.append(f"cluster.component_placement: shares GPUs between actor and rollout; mode {want} "
                            f"puts them apart, costed with a rollout:actor split "
                            f"({block.get('allocation_ratio') or '1:1'} unless --ratio)")
            placement_ratio = block.get("allocation_ratio") or "1:1"
        else:
            warnings.append(f"cluster.component_placement: actor and rollout apart; mode {want} costed on all "
                            f"{len(used)} of their GPUs")
            placement_ratio = None
    if mode is not None:
        # --mode can add what the config does not switch on: say so, the prediction is the mode's.
        m = MODE_TABLE[want]
        mechanisms = (
            ("asynchronous training (algorithm.staleness_threshold)", m.async_training, staleness is not None),
            (f"dynamic batching ({DECOUPLED})", m.dynamic_batching, decoupled or fork.per_env_async),
            ("streaming training (the RL-VLA3 fork's, within the asynchronous rollout)", m.streaming, fork.streamer))
        added = [name for name, on, have in mechanisms if on and not have]
        if added:
            assumed = []
            if m.async_training and staleness is None:
                assumed.append("staleness 1 (--staleness)")
            if m.dynamic_batching and not decoupled:
                assumed.append(f"b_max one worker's envs (--b-max), t_max {DEFAULT_T_MAX_S:g} s (--t-max)")
            warnings.append(f"--mode: {want} adds {', '.join(added)}, which the config does not switch on; the prediction "
                            f"is for mode {want}, not for the config as written"
                            + (f" (unless given: {'; '.join(assumed)})" if assumed else ""))
    if staleness is not None and MODE_TABLE[want].ignores("max_staleness"):
        warnings.append(f"algorithm.staleness_threshold: {staleness} has no effect in mode {want} "
                        f"({MODE_TABLE[want].ignores('max_staleness')})")
    if decoupled and not MODE_TABLE[want].dynamic_batching:
        warnings.append(f"{DECOUPLED}: dynamic batching has no effect in mode {want}")
    stages = _int(c, "rollout.pipeline_stage_num", 1)
    if decoupled and stages != 1:
        raise ConfigError("rollout.pipeline_stage_num", f"must be 1 with {DECOUPLED} (RLinf 0.3.0 config.py asserts it), "
                                                       f"got {stages}")
    if streaming and not MODE_TABLE[want].streaming:
        warnings.append(f"{TRAINING_PIPELINE}: streaming training has no effect in mode {want}")
    if len(used) < total:
        warnings.append(f"cluster.component_placement: uses {len(used)} of the {total} GPUs of cluster.num_nodes "
                        f"({_ranges(used)}); costed on those {len(used)}")
    if used and used != list(range(used[0], used[0] + len(used))):
        warnings.append(f"cluster.component_placement: GPUs {_ranges(used)} are not contiguous; costed as "
                        f"{len(used)} contiguous GPUs")

    # Workload.
    chunks = _int(c, "actor.model.num_action_chunks")
    steps_key = "env.train.max_steps_per_rollout_epoch" if c.has("env.train.max_steps_per_rollout_epoch") \
        else "env.train.max_episode_steps"
    steps = _int(c, steps_key)
    episode = c.get("env.train.max_episode_steps", steps)
    if episode != steps:
        warnings.append(f"env.train.max_episode_steps: {episode} differs from max_steps_per_rollout_epoch {steps}; "
                        f"an epoch is costed as {steps} steps per env (episodes reset within it)")
    if steps % chunks:
        raise ConfigError(steps_key, f"{steps} is not a multiple of actor.model.num_action_chunks ({chunks})")
    workload = {
        "total_num_envs": _int(c, "env.train.total_num_envs"),
        "max_episode_steps": steps,
        "num_action_chunks": chunks,
        "rollout_epoch": _rollout_epoch(c, warnings),
        "update_epoch": _int(c, "algorithm.update_epoch", 1),
        "micro_batch_size": _int(c, "actor.micro_batch_size"),
        "global_batch_size": _int(c, "actor.global_batch_size"),
        "group_size": group_size,
        "algorithm": algo,
    }

    if fork.flex_table is not None and fork.per_env_async:
        ranks, per, size = fork.flex_table
        if ranks != len(env) or ranks * per * size != workload["total_num_envs"]:
            raise ConfigError(MANAGERS, f"{ranks} env ranks x {per} managers x {size} envs do not make "
                                        f"env.train.total_num_envs {workload['total_num_envs']} on {len(env)} env GPUs")
        if per != stages:
            warnings.append(f"rollout.pipeline_stage_num: {stages} is not read by the fork's flex workers; "
                            f"pipeline_stage_num {per} ({MANAGERS}: {per} env managers per env rank)")
            stages = per

    # Model, training and memory settings.
    trained = "full"
    mt = c.get("actor.model.model_type", None)
    if mt in ("openpi", "dexbotic_pi"):
        key = "openpi" if mt == "openpi" else "dexbotic"
        trained = "action_expert" if c.get_bool(f"actor.model.{key}.train_expert_only", False) else "full"
        if mt in ASSUMED_SHAPES and "profile" not in block and profile_ref is None:
            warnings.append(f"actor.model.model_type: {ASSUMED_SHAPES[mt]}")
    elif backbone == "openvla_oft":
        trained = "full"  # no action expert: RLinf trains the whole policy (FSDP over it)
    elif backbone in ("gr00t_n15", "gr00t_n16"):
        # RLinf 0.3.0 loads GR00T with tune_visual=False, tune_llm=False whatever the config says
        # (models/embodiment/gr00t/gr00t_n1d5/__init__.py): the action head trains.
        trained = "action_expert"
        tuned = [k for k in ("tune_llm", "tune_visual") if c.get_bool(f"actor.model.{k}", False)]
        if tuned and "trained_part" not in block:
            warnings.append(f"actor.model.{tuned[0]}: True has no effect in RLinf 0.3.0, which loads GR00T with "
                            "tune_llm and tune_visual False: costed as training the action head (a fork that "
                            "honours it: set vlaperf.trained_part: full)")
    elif backbone == "mlp_policy" and "profile" not in block and profile_ref is None:
        warnings.append(f"actor.model.model_type: {mlp_policy_note()}")
    if c.get_bool("actor.model.is_lora", False):
        warnings.append("actor.model.is_lora: LoRA training is not modelled; costed as training the "
                        f"{trained.replace('_', ' ')} in full")
    shape = _policy_shape(c, profile.backbone, warnings)
    shard = c.get("actor.fsdp_config.sharding_strategy", "full_shard")
    if shard not in ("no_shard", "full_shard"):
        raise ConfigError("actor.fsdp_config.sharding_strategy", f"must be no_shard or full_shard (modelled), got {shard!r}")
    if c.get_bool("actor.fsdp_config.gradient_checkpointing", False):
        warnings.append("actor.fsdp_config.gradient_checkpointing: recomputation in backward is not modelled "
                        "(training costed without it)")
    actor_off = c.get_bool("actor.enable_offload", False)
    rollout_off = c.get_bool("rollout.enable_offload", False)
    offload = actor_off or rollout_off
    if shared_async and offload:
        # RLinf's asynchronous rollout refuses offload (workers/rollout/hf/async_huggingface_worker.py;
        # perfmodel/rlinf/emit.py), and with actor and rollout running at once there are no phases
        # to offload between: the config as written is not one RLinf runs.
        raise ConfigError("actor.enable_offload" if actor_off else "rollout.enable_offload",
                          "True with asynchronous PPO (algorithm.staleness_threshold) on shared GPUs: RLinf's "
                          "asynchronous rollout refuses offload and both models stay resident while actor and rollout "
                          "run at once; set it False to cost the config (train_async on shared GPUs)")
    if MODE_TABLE[want].disaggregated and not shared_async:
        if offload:  # nothing swaps where rollout and actor have GPUs of their own
            warnings.append(f"actor.enable_offload is {actor_off}, rollout.enable_offload is {rollout_off}: no effect in "
                            f"mode {want} (rollout and actor on GPUs of their own keep their models resident)")
    elif actor_off != rollout_off:
        warnings.append(f"actor.enable_offload is {actor_off}, rollout.enable_offload is {rollout_off}: vlaperf has one "
                        f"switch, costed as enable_offload {offload}")
    if c.get_bool("rollout.recompute_logprobs", False):
        warnings.append("rollout.recompute_logprobs: the extra forward pass is not modelled")

    # Fork async settings: dynamic batching and streaming (vlaperf block), staleness (RLinf).
    plan: dict[str, Any] = {
        "mode": want,
        "allocation_ratio": placement_ratio if MODE_TABLE[want].disaggregated else None,
        "pipeline_stage_num": stages,
        "profile": ref,
        "workload": workload,
        "cluster": {**base_cluster.__dict__, "gpus": len(used)},
        "sharding_strategy": shard,
        "trained_part": trained,
        "enable_offload": offload,
        **({"colocated_rollout_gpus": len(rollout)} if nested else {}),
        **shape,
    }
    if fork.per_env_async and not MODE_TABLE[want].async_training:
        plan["rollout"] = "per_env_async"  # the fork's as: dynamic batching beside synchronous training
    if "allocation_ratio" in block and not isinstance(block["allocation_ratio"], str):
        raise ConfigError("vlaperf.allocation_ratio", "must be a quoted string like '3:1' (YAML reads an unquoted 3:1 "
                                                      f"as the base-60 number 181), got {block['allocation_ratio']!r}")
    if "allocation_ratio" in block and not MODE_TABLE[want].disaggregated:
        raise ConfigError("vlaperf.allocation_ratio", f"must not be given for {want}: every GPU runs every phase "
                                                      f"(a rollout:actor split is for {', '.join(m for m in MODES if MODE_TABLE[m].disaggregated)})")
    if "allocation_ratio" in block and MODE_TABLE[want].disaggregated:
        plan["allocation_ratio"] = block["allocation_ratio"]
    if staleness is not None:
        if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
            raise ConfigError("algorithm.staleness_threshold", f"must be an integer >= 0, got {staleness!r}")
        plan["max_staleness"] = staleness
    # the fork's dynamic batching (perfmodel/rlinf/fork.py); a vlaperf: block still overrides it
    if fork.b_max is not None:
        plan["b_max"] = fork.b_max
    if fork.t_max_s is not None:
        plan["t_max_s"] = fork.t_max_s
    warnings.extend(fork.notes)
    for k in ("b_max", "t_max_s", "placement_strategy", "trained_part", "rollout"):
        if k in block:
            plan[k] = block[k]
    if MODE_TABLE[want].disaggregated and "placement_strategy" not in block:
        plan["placement_strategy"] = "packed"  # RLinf's ranges are contiguous global GPU ranges
    batching_set = block.get("b_max") is not None or block.get("t_max_s", DEFAULT_T_MAX_S) != DEFAULT_T_MAX_S
    if batching_set and MODE_TABLE[want].ignores("b_max"):
        warnings.append(f"vlaperf.b_max / t_max_s: no effect in mode {want} ({MODE_TABLE[want].ignores('b_max')})")
    for key in (k for k in _unread_async_keys(c) if k not in FORK_READ):
        warnings.append(f"{key}: looks like an asynchronous-pipeline setting; vlaperf does not read it (say the mode "
                        "with vlaperf.mode or --mode)")
    if shared_async and ratio is not None:
        warnings.append(RATIO_APART_NOTE.format(ratio=ratio, mode=want))
    known = {f.name for f in Plan.__dataclass_fields__.values()}
    plan = {k: v for k, v in plan.items() if k in known}
    try:
        p = Plan.from_dict(plan, "plan")
    except ConfigError as e:
        raise ConfigError(_rlinf_key(e.field, block), f"{e.message} (from {c.source})") from None
    c.check_near_misses()
    return Imported(p, profile.backbone, c.source, warnings, total, assumed_note(p.cluster, node_given, gpu))


def _nft_notes(c: Composed, backbone: str, warnings: list[str]) -> None:
    """NFT trains a flow-matching action head (one velocity evaluation per sample): a backbone
    without one is refused; what the training pass is costed as is said."""
    from perfmodel.backbones import BACKBONES

    spec = BACKBONES.get(backbone)
    if spec is None or not spec.has_action_expert or spec.parallel_decoding:
        raise ConfigError("algorithm.loss_type", f"embodied_nft trains a flow-matching action head; backbone {backbone} "
                                                 "has none in vlaperf (NFT is costed for pi0, pi0.5 and GR00T)")
    recompute = c.get("algorithm.nft_xcur_source", "rollout") == "resample" or c.get_bool("algorithm.recompute_v", False)
    warnings.append("algorithm.loss_type: embodied_nft costed as GRPO's pipeline (rollout, groups, global batches, "
                    "update_epoch) with NFT's training pass: per sample one velocity evaluation at one timestep "
                    "(prefix forward, one action-head step, backward of the trained part) and its forward again "
                    "without grad for v_old"
                    + ("" if recompute else " (costed though this config does not recompute v_old: nft_xcur_source "
                                            "rollout and recompute_v False; the costs are an upper bound)"))
    tau = c.get("algorithm.nft_tau", 1.0)
    if (min(float(t) for t in tau[:2]) if isinstance(tau, list) else float(tau)) < 1.0:
        warnings.append(f"algorithm.nft_tau: {tau} keeps an EMA rollout model: its soft update and the v_old model "
                        "built each iteration are not costed")


DSRL_KEYS = {"dsrl_state_dim": "state_dim", "dsrl_action_noise_dim": "noise_dim", "dsrl_num_q_heads": "q_heads",
             "dsrl_image_latent_dim": "image_latent", "dsrl_state_latent_dim": "state_latent",
             "dsrl_hidden_dims": "hidden"}


def _dsrl_notes(c: Composed, backbone: str, warnings: list[str]) -> None:
    """DSRL steers an openpi VLA's denoising with a small SAC noise policy: refused on another
    backbone; what is costed, and the config's small-net shapes against those costed, are said."""
    from perfmodel.backbones import BACKBONES, DsrlNets

    spec = BACKBONES.get(backbone)
    mt = c.get("actor.model.model_type", None)  # absent in a vlaperf fragment that names its profile
    if mt not in (None, "openpi") or spec is None or not spec.has_action_expert or spec.parallel_decoding:
        raise ConfigError("actor.model.openpi.use_dsrl", f"DSRL steers an openpi policy's denoising noise "
                                                         f"(openpi_action_model.py); backbone {backbone} is not one "
                                                         "(DSRL is costed for pi0 and pi0.5)")
    nets = DsrlNets()
    differ = []
    for key, attr in DSRL_KEYS.items():
        got = c.get(f"actor.model.openpi.{key}", None)
        want = getattr(nets, attr)
        if got is not None and (list(got) if isinstance(got, (list, tuple)) else got) != (
                list(want) if isinstance(want, tuple) else want):
            differ.append(f"{key} {got}")
    if differ:
        warnings.append(f"actor.model.openpi: {', '.join(differ)} differ from the DSRL nets costed (RLinf's "
                        "OpenPi0Config defaults); their training FLOPs are small beside the fixed times per step")
    warnings.append("algorithm.loss_type: embodied_sac with openpi.use_dsrl costed as DSRL (rlinf 0.3.0 "
                    "fsdp_sac_policy_worker.py): rollout is the frozen VLA's inference from the noise policy's noise "
                    "(its 64x64 image encoder and MLP are not costed in the call); per iteration the trajectories "
                    "enter a replay buffer and the actor takes update_epoch gradient steps on global batches drawn "
                    "from it, each the critic's, the actor's and the temperature's losses on the small nets "
                    f"({nets.train_flops() / 1e6:.0f} MFLOP a sample), an optimizer step (the critic's and the actor's) and the target model's "
                    "soft update over every parameter, the frozen VLA's included (36 bytes a parameter of HBM "
                    "traffic); only the small nets' weights sync to the rollout. The fixed times per micro-batch "
                    "and per optimizer step are the profile's, fitted for the VLA's training pass, not measured for "
                    "the small nets: at update_epoch steps an iteration they may dominate its training")
    interval = c.get("runner.weight_sync_interval", 1)
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 1:
        warnings.append(f"runner.weight_sync_interval: {interval}: RLinf's asynchronous entry script runs this "
                        "config with runners/async_embodied_runner.py (env and rollout step without pause while the "
                        "actor trains from the replay buffer, weights every weight_sync_interval training steps); "
                        "the config's keys do not name the runner, so it is costed as the synchronous pipeline on "
                        "its placement (rollout, then training, each iteration). RLinf's asynchronous runner shares "
                        "the GPUs in time between a rollout that never waits for training and a trainer that never "
                        "stops, which is not costed: each inference call then waits for at most the training "
                        "operation in progress, so where an iteration's training is longer than its inference calls "
                        "times one training operation, this reading's env rate is a lower bound")


def _teacher_notes(c: Composed, algo: str, warnings: list[str]) -> None:
    """DAgger's expert and OPD's teacher: a second model of the policy's shapes in the rollout
    worker (``rollout.expert_model``); refused without one; what is costed is said."""
    from perfmodel.costs import DAGGER_BETA_MIN

    if not c.has("rollout.expert_model"):
        raise ConfigError("rollout.expert_model", f"is missing: {'DAgger' if algo == 'dagger' else 'on-policy distillation'} "
                                                  "needs the second model RLinf's rollout worker loads from it "
                                                  "(workers/rollout/hf/huggingface_worker.py init_worker)")
    if algo == "opd":
        warnings.append("algorithm.loss_type: opd (on-policy distillation; its advantage and loss are not in rlinf 0.3.0, "
                        "the package index's) costed from the config: GRPO's pipeline (groups, global batches, "
                        "update_epoch, the policy's training pass) with the teacher (rollout.expert_model, which RLinf's "
                        "rollout worker builds with the student's model config: the student's shapes) scoring every "
                        "student sample: one forward of the student's shapes per sample beside the student's call, "
                        "its fixed GPU time too; the teacher resident beside the student")
        return
    classic = not c.get_bool("algorithm.dagger.only_save_expert", True)
    beta_min = c.get("algorithm.dagger.beta_min", DAGGER_BETA_MIN)
    warnings.append("algorithm.loss_type: embodied_dagger costed as DAgger (rlinf 0.3.0 huggingface_worker.py predict, "
                    "fsdp_dagger_policy_worker.py): each inference call runs the expert (probability beta) or the "
                    f"student and the expert's relabelling, 2 - beta passes, at beta's floor {DAGGER_BETA_MIN} "
                    "(beta starts at dagger.init_beta and decays each iteration); per iteration the relabelled "
                    "trajectories enter a replay buffer and the actor takes update_epoch supervised steps on global "
                    "batches drawn from it (one velocity evaluation and its backward a sample, no denoising chain)")
    if c.get_bool("algorithm.dagger.online_lerobot.enabled", False):
        warnings.append("algorithm.dagger.online_lerobot: enabled (not in rlinf 0.3.0, whose DAgger trains from its "
                        "replay buffer): costed as that, update_epoch global batches a iteration drawn from the kept "
                        "episodes; writing them as a LeRobot dataset (finalize_interval, the decoded cache) is not costed")
    if not classic:
        warnings.append("algorithm.dagger.only_save_expert: True (HG-DAgger) relabels nothing: one pass per call, "
                        "costed as classic DAgger's 2 - beta (an upper bound on inference)")
    if isinstance(beta_min, (int, float)) and not isinstance(beta_min, bool) and beta_min != DAGGER_BETA_MIN:
        warnings.append(f"algorithm.dagger.beta_min: {beta_min} not read: inference costed at beta {DAGGER_BETA_MIN}")


def _policy_shape(c: Composed, backbone: str, warnings: list[str]) -> dict[str, int]:
    """The plan's ``denoising_steps`` and ``action_horizon`` where the config's differ from the
    profile's backbone's (perfmodel.backbones): the costs rescale by FLOPs (perfmodel.costs).
    Steps: GR00T reads ``denoising_steps``, openpi ``openpi.num_steps`` (``num_steps``); the
    horizon: openpi's ``openpi.action_chunk``, OFT's ``num_action_chunks``; GR00T's DiT keeps its
    own horizon (num_action_chunks is what the env executes of it)."""
    from perfmodel.backbones import BACKBONES

    spec = BACKBONES.get(backbone)
    gr00t = str(c.get("actor.model.model_type", "")).startswith("gr00t")
    order = (("actor.model.denoising_steps", "actor.model.num_steps") if gr00t else
             ("actor.model.num_steps", "actor.model.openpi.num_steps", "actor.model.dexbotic.num_steps",
              "actor.model.denoising_steps"))
    steps_field = next((k for k in order if c.has(k)), None)
    out: dict[str, int] = {}
    if steps_field is not None:
        steps = _int(c, steps_field, most=MAX_DENOISING_STEPS)
        if spec is None:
            warnings.append(f"{steps_field}: {steps} denoising steps; profile backbone {backbone} has no shapes in "
                            "vlaperf to rescale its costs by (not rescaled)")
        elif spec.parallel_decoding:
            pass  # one forward pass: no denoising to count
        elif steps != spec.denoise_steps:
            out["denoising_steps"] = steps
    horizon_field = next((k for k in ("actor.model.openpi.action_chunk", "actor.model.dexbotic.action_chunk",
                                      "actor.model.num_action_chunks")
                          if c.has(k)), None)
    if spec is not None and spec.horizon_from_config and horizon_field is not None:
        horizon = _int(c, horizon_field, most=MAX_DENOISING_STEPS)
        if horizon != spec.action_chunk:
            out["action_horizon"] = horizon
    return out


def _rlinf_key(field_name: str, block: dict[str, Any] | None = None) -> str:
    """A plan field -> the RLinf key it came from, for error messages (the ``vlaperf:`` block's
    own key when the block set it)."""
    name = field_name.removeprefix("plan.")
    if block and name in block and name in VLAPERF_KEYS:
        return f"vlaperf.{name}"
    mapping = {"plan.workload.total_num_envs": "env.train.total_num_envs",
               "plan.workload.global_batch_size": "actor.global_batch_size",
               "plan.workload.max_episode_steps": "env.train.max_episode_steps",
               "plan.workload.group_size": "algorithm.group_size",
               "plan.pipeline_stage_num": "rollout.pipeline_stage_num",
               "plan.allocation_ratio": "cluster.component_placement",
               "plan.enable_offload": "actor.enable_offload"}
    return mapping.get(field_name, field_name)


def _ranges(ids: list[int]) -> str:
    if not ids:
        return "none"
    out, start, prev = [], ids[0], ids[0]
    for i in ids[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        if i is not None:
            start = prev = i
    return ",".join(out)


def load_rlinf(path: str | Path, profile_ref: str | None = None, gpu: str | None = None,
               mode: str | None = None, node: dict[str, Any] | None = None, ratio: str | None = None) -> Imported:
    """Compose the RLinf config at ``path`` and map it onto a plan (``to_plan``)."""
    return to_plan(compose(path), profile_ref=profile_ref, gpu=gpu, mode=mode, node=node, ratio=ratio)

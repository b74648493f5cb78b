"""The plan schema shared by the simulator and the executor: Workload, Cluster, Plan.

Names follow RLinf's config vocabulary so that its users recognise them. A plan is a JSON file;
``Plan.from_dict`` validates it strictly (unknown or missing fields, bad values and sizes that do
not divide are errors naming the field). This module depends on nothing else in the project but
the error and field helpers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.jsonio import Fields, check_int, load_json
from perfmodel.schema.hardware import DEFAULT_GPU, GPU_NAMES
from perfmodel.schema.modes import MODE_TABLE, MODES, ROLLOUTS, SHARED_GPU_MODES, Mode
from perfmodel.schema.placement import Placement, env_cores_of, placement_of
from perfmodel.schema.rules import training_runs, whole_global_batch

# nft: RLinf's embodied NFT (adv_type grpo, loss_type embodied_nft): GRPO's pipeline and groups,
# another loss, whose training pass perfmodel.costs costs by its own FLOPs.
# opd: on-policy distillation (adv_type / loss_type opd): GRPO's pipeline and groups with a
# teacher's forward on every student sample in the rollout worker (perfmodel.costs).
# dsrl: RLinf's DSRL (embodied_sac with openpi.use_dsrl): the frozen VLA's inference steered by a
# small SAC noise policy trained off-policy from a replay buffer. dagger: RLinf's DAgger
# (embodied_dagger): an expert's inference beside the student's, supervised updates from a replay
# buffer. Both train REPLAY_ALGORITHMS' way (rules.training_runs): update_epoch global batches
# drawn from the buffer per iteration, not the iteration's samples update_epoch times.
ALGORITHMS = ("ppo", "grpo", "nft", "opd", "dsrl", "dagger")
GROUPED_ALGORITHMS = ("grpo", "nft", "opd")
REPLAY_ALGORITHMS = ("dsrl", "dagger")
# The algorithms the executor trains; the others are predicted only.
EXECUTED_ALGORITHMS = ("ppo", "grpo", "nft", "opd", "dagger")
# How the system runs (issue 13): plan fields whose defaults reproduce the published setup.
# RLinf scheduler/placement/packed.py: contiguous global GPU ranges, a node filled before the
# next; "split" divides every node by the allocation ratio.
PLACEMENT_STRATEGIES = ("packed", "split")
# RLinf actor.fsdp_config.sharding_strategy; the RL-VLA3 fork's training_backend/fsdp.yaml
# (and RLinf's hybrid_engines/fsdp.yaml default) is full_shard.
SHARDING_STRATEGIES = ("no_shard", "full_shard")
# Which parameters train: the RL-VLA3 fork's model/pi0_5.yaml (and RLinf's) set
# openpi.train_expert_only: True; GR00T trains its action head with the VLM frozen.
TRAINED_PARTS = ("action_expert", "full")
MAX_DENOISE_OR_HORIZON = 10_000  # plan.denoising_steps / action_horizon: flow matching uses a handful, chunks tens

# Field ranges: far beyond any real config (RLinf LIBERO: 480-512 env steps per episode, 5-10
# action chunks, rollout_epoch <= 16), they stop absurd sizes at the door with the range in the
# message. How much work one simulation may take is perfmodel.simulate.check_simulable's.
MAX_GPUS = 16384
# Bandwidths (GB/s) from a slow network (1 MB/s) to beyond any interconnect, and memories (GB)
# up to a petabyte: transfer times and memory checks stay finite.
MIN_BW_GBPS, MAX_BW_GBPS = 1e-3, 1e5
MAX_MEMORY_GB = 1e6
# A pipeline stage holds at least one env, so no plan has more stages than envs.
MAX_PIPELINE_STAGES = 10**7
# Dollars per GPU-hour: cloud prices are a few dollars; a thousand is beyond any, and keeps
# dollars per million env steps a finite number.
MAX_GPU_HOUR_PRICE = 1000.0
MAX_FIELD = {
    "total_num_envs": 10**7,
    "max_episode_steps": 100_000,
    "num_action_chunks": 10_000,
    "rollout_epoch": 10_000,
    "update_epoch": 10_000,
    "micro_batch_size": 10**8,
    "global_batch_size": 10**9,
    "group_size": 10**4,
}


@dataclass(frozen=True)
class Workload:
    """One RL iteration: every env is stepped the full horizon each rollout epoch.

    A *sample* is one env at one chunk step (one policy call's worth of actions), so an
    iteration yields ``total_num_envs * max_episode_steps / num_action_chunks * rollout_epoch``
    samples, trained ``update_epoch`` times in global batches of ``global_batch_size`` samples,
    each split into micro-batches of ``micro_batch_size`` samples per actor rank.
    """

    total_num_envs: int = 384
    max_episode_steps: int = 480
    num_action_chunks: int = 10
    rollout_epoch: int = 4
    update_epoch: int = 2
    micro_batch_size: int = 128
    global_batch_size: int = 1024
    group_size: int = 1
    algorithm: str = "ppo"

    @property
    def chunk_steps_per_epoch(self) -> int:
        return self.max_episode_steps // self.num_action_chunks

    @property
    def samples_per_iteration(self) -> int:
        return self.total_num_envs * self.chunk_steps_per_epoch * self.rollout_epoch

    @property
    def env_steps_per_iteration(self) -> int:
        return self.total_num_envs * self.max_episode_steps * self.rollout_epoch

    @property
    def optimizer_steps_per_iteration(self) -> int:
        runs, passes = training_runs(self.samples_per_iteration, self.global_batch_size, self.update_epoch,
                                     self.algorithm in REPLAY_ALGORITHMS)
        return sum(c for _, c in runs) * passes

    @classmethod
    def from_dict(cls, obj: Any, path: str = "workload") -> "Workload":
        f = Fields(obj, path)
        d = cls()
        w = cls(
            total_num_envs=f.int("total_num_envs", d.total_num_envs),
            max_episode_steps=f.int("max_episode_steps", d.max_episode_steps),
            num_action_chunks=f.int("num_action_chunks", d.num_action_chunks),
            rollout_epoch=f.int("rollout_epoch", d.rollout_epoch),
            update_epoch=f.int("update_epoch", d.update_epoch),
            micro_batch_size=f.int("micro_batch_size", d.micro_batch_size),
            global_batch_size=f.int("global_batch_size", d.global_batch_size),
            group_size=f.int("group_size", d.group_size),
            algorithm=f.str("algorithm", d.algorithm, choices=ALGORITHMS),
        )
        f.done()
        w.check(path)
        return w

    def check(self, path: str = "workload") -> None:
        for name in ("total_num_envs", "max_episode_steps", "num_action_chunks", "rollout_epoch",
                     "update_epoch", "micro_batch_size", "global_batch_size", "group_size"):
            check_int(f"{path}.{name}", getattr(self, name), min=1, max=MAX_FIELD[name])
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"{path}.algorithm", f"must be one of {', '.join(ALGORITHMS)}; got {self.algorithm!r}")
        if self.max_episode_steps % self.num_action_chunks:
            raise ConfigError(
                f"{path}.max_episode_steps",
                f"must be a multiple of num_action_chunks ({self.num_action_chunks}), got {self.max_episode_steps}",
            )
        if self.global_batch_size % self.micro_batch_size:
            raise ConfigError(
                f"{path}.global_batch_size",
                f"must be a multiple of micro_batch_size ({self.micro_batch_size}), got {self.global_batch_size}",
            )
        if self.total_num_envs % self.group_size:
            raise ConfigError(
                f"{path}.total_num_envs",
                f"must be a multiple of group_size ({self.group_size}), got {self.total_num_envs}",
            )
        if self.algorithm in GROUPED_ALGORITHMS and self.group_size < 2:
            raise ConfigError(f"{path}.group_size", f"must be >= 2 for {self.algorithm}, got {self.group_size}")


# The published setup (RL-VLA3 fork of RLinf, LIBERO): its example config is Workload's defaults
# (384 envs on 8 GPUs). Calibration scales it with the cluster; the profiler writes it into
# GPU-measured profiles. Written here once.
PUBLISHED_WORKLOAD = Workload()
PUBLISHED_GPUS = 8


@dataclass(frozen=True)
class Cluster:
    """The machines. Bandwidths are per GPU (per link endpoint), in GB/s.

    ``actor_cpu_cores_per_gpu``: CPU cores of its node each actor GPU leaves no env worker when
    rollout and actor share a node; the env workers share the rest of the node's cores. At the
    per-GPU share (cores / GPUs per node) an env worker has its own GPU's share on any node.
    """

    gpus: int
    gpus_per_node: int = 8
    cpu_cores_per_node: int = 128
    node_ram_gb: float = 2048.0
    intra_node_bw_GBps: float = 200.0
    inter_node_bw_GBps: float = 25.0
    actor_cpu_cores_per_gpu: float = 0.0
    # False = NCCL_P2P_DISABLE=1, as the RL-VLA3 authors' scripts/run_libero.sh sets it: no
    # NVLink peer-to-peer, so collectives inside a node go through host memory (NCCL's SHM
    # transport over PCIe) at ``host_bw_GBps`` per GPU instead of ``intra_node_bw_GBps``.
    p2p: bool = False
    host_bw_GBps: float = 20.0
    gpu_memory_gb: float = 80.0  # H100 SXM (the published setup: H100-class likely)
    # The accelerator (perfmodel/schema/hardware.py); costs measured on the profile's own GPU are
    # scaled to it (perfmodel/gpu.py). The published setup: H100-class likely.
    gpu: str = DEFAULT_GPU

    @property
    def local_bw_GBps(self) -> float:
        """Per-GPU bandwidth of a collective among GPUs of one node (NVLink or host path)."""
        return self.intra_node_bw_GBps if self.p2p else min(self.host_bw_GBps, self.intra_node_bw_GBps)

    @property
    def nodes(self) -> int:
        return math.ceil(self.gpus / self.gpus_per_node)

    @property
    def cpu_cores_per_gpu(self) -> float:
        return self.cpu_cores_per_node / self.gpus_per_node

    @classmethod
    def from_dict(cls, obj: Any, path: str = "cluster", defaults: "Cluster | None" = None) -> "Cluster":
        f = Fields(obj, path)
        d = defaults
        c = cls(
            gpus=f.int("gpus", max=MAX_GPUS) if d is None else f.int("gpus", d.gpus, max=MAX_GPUS),
            gpus_per_node=f.int("gpus_per_node", d.gpus_per_node if d else 8, max=1024),
            cpu_cores_per_node=f.int("cpu_cores_per_node", d.cpu_cores_per_node if d else 128, max=1_000_000),
            node_ram_gb=f.float("node_ram_gb", d.node_ram_gb if d else 2048.0, min=0.0, strict_min=True,
                                max=MAX_MEMORY_GB),
            intra_node_bw_GBps=f.float("intra_node_bw_GBps", d.intra_node_bw_GBps if d else 200.0,
                                       min=MIN_BW_GBPS, max=MAX_BW_GBPS),
            inter_node_bw_GBps=f.float("inter_node_bw_GBps", d.inter_node_bw_GBps if d else 25.0,
                                       min=MIN_BW_GBPS, max=MAX_BW_GBPS),
            actor_cpu_cores_per_gpu=f.float("actor_cpu_cores_per_gpu", d.actor_cpu_cores_per_gpu if d else 0.0),
            p2p=f.bool("p2p", d.p2p if d else False),
            host_bw_GBps=f.float("host_bw_GBps", d.host_bw_GBps if d else 20.0, min=MIN_BW_GBPS, max=MAX_BW_GBPS),
            gpu_memory_gb=f.float("gpu_memory_gb", d.gpu_memory_gb if d else 80.0, min=0.0, strict_min=True,
                                  max=MAX_MEMORY_GB),
            gpu=f.str("gpu", d.gpu if d else DEFAULT_GPU, choices=GPU_NAMES),
        )
        f.done()
        if c.actor_cpu_cores_per_gpu > c.cpu_cores_per_node:
            raise ConfigError(f.sub("actor_cpu_cores_per_gpu"), f"must be a number in 0..{c.cpu_cores_per_node} (an actor "
                                                                f"GPU keeps at most its node's {c.cpu_cores_per_node} "
                                                                f"cores), got {c.actor_cpu_cores_per_gpu:g}")
        return c


def check_gpu_hour_price(field: str, price: Any) -> float:
    """Dollars per GPU-hour: a finite number in (0, MAX_GPU_HOUR_PRICE]."""
    import numbers

    if (isinstance(price, bool) or not isinstance(price, numbers.Real)
            or not (0 < price <= MAX_GPU_HOUR_PRICE)):  # also NaN
        raise ConfigError(field, f"must be a number of dollars per GPU-hour in (0, {MAX_GPU_HOUR_PRICE:g}], got {price!r}")
    return float(price)


def profile_file_of(plan_path: str | None) -> str | None:
    """The profile file a plan file names (resolved beside it), or None (no plan, or a bundled
    profile): an input of the command that reads the plan, which it must not write over."""
    if not plan_path:
        return None
    ref = Plan.load(plan_path).profile
    return ref if is_profile_path(ref) else None


def is_profile_path(ref: str) -> bool:
    """A profile reference that names a file (``x.json`` or with a directory part), not a
    bundled profile name such as ``pi05``."""
    return ref.endswith(".json") or "/" in ref or "\\" in ref


def resolve_profile_ref(ref: str, base_dir: str | Path) -> str:
    """``ref`` as a path relative to ``base_dir`` (the file that names it) when it is a relative
    file path; bundled names and absolute paths unchanged."""
    if not is_profile_path(ref) or Path(ref).is_absolute():
        return ref
    return str(Path(base_dir) / ref)


def ratio_parts(text: str, field: str = "allocation_ratio") -> tuple[int, int]:
    """``"R:A"`` -> (R, A), both >= 1: a ratio's syntax, independent of any GPU count."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2 or not all(p.isascii() and p.isdigit() for p in parts):  # int() takes "１", " 1", "1_0"
            raise ValueError
        r, a = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(field, f"must look like R:A with two positive integers (e.g. 1:1, 3:1), got {text!r}") from None
    if r <= 0 or a <= 0:
        raise ConfigError(field, f"both sides must be >= 1 (e.g. 1:1, 3:1), got {text!r}")
    return r, a


def parse_ratio(text: str, gpus: int, field: str = "allocation_ratio") -> tuple[int, int]:
    """``"R:A"`` -> (rollout GPUs, actor GPUs) that split ``gpus`` in that proportion."""
    r, a = ratio_parts(text, field)
    if gpus % (r + a):
        raise ConfigError(field, f"{text} does not split {gpus} GPUs: gpus must be a multiple of {r + a}")
    unit = gpus // (r + a)
    return r * unit, a * unit


# RLinf's dynamic batching (runner.enable_decoupled_mode) waits at most 20 ms for a batch to fill:
# timeout_time=0.02, hard-coded (rlinf 0.3.0, workers/rollout/hf/async_huggingface_worker.py:179);
# its batch cap is total_num_envs / rollout workers (scheduler/worker/routing.py), b_max null here.
DEFAULT_T_MAX_S = 0.02
VERSION_GRANULARITIES = ("iteration", "optimizer_step")
MAX_STALENESS = 10_000  # policy versions a rollout may lag; far beyond any useful setting


@dataclass(frozen=True)
class Plan:
    """What to run: a mode, a GPU split, pipeline and batching knobs, the workload and cluster.

    ``profile`` names a bundled profile (``pi05``) or a profile file path.
    ``allocation_ratio`` is ``None`` for colocated (all GPUs do every phase), and for a train_async
    plan whose actor and rollout share every GPU (RLinf's ``actor,env,rollout: all``).
    """

    mode: str
    workload: Workload
    cluster: Cluster
    profile: str = "pi05"
    allocation_ratio: str | None = "1:1"
    pipeline_stage_num: int = 1
    b_max: int | None = None
    t_max_s: float = DEFAULT_T_MAX_S
    max_staleness: int = 1
    placement_strategy: str = "packed"
    sharding_strategy: str = "full_shard"
    trained_part: str = "action_expert"
    # RL-VLA3's LIBERO configs: enable_offload False for env, rollout and actor. Colocated
    # without offload keeps every model resident on every GPU (memory is checked).
    enable_offload: bool = False
    # What a weight version is (rules.required_weight_version): "iteration" (the actor publishes
    # once per iteration, staleness counted in iterations) or "optimizer_step" (a version per
    # optimizer step, as RLinf's actor steps and RL-VLA3's "weights are refreshed between
    # steps"; staleness counted in optimizer steps). Synchronous modes are the same under both.
    version_granularity: str = "iteration"
    # Denoising steps and action horizon of the policy (an RLinf config's num_steps / action_chunk);
    # None: the profile's backbone's own (perfmodel.backbones). Other values rescale the inference
    # and training slopes by the FLOP ratio (perfmodel.costs.StageCosts).
    denoising_steps: int | None = None
    action_horizon: int | None = None
    # Which rollout (perfmodel.schema.modes.ROLLOUTS): None is the mode's own (per_env_async for
    # rollout_async and streamer, lockstep otherwise); per_env_async adds dynamic batching to a
    # synchronous mode (the RL-VLA3 fork's col_as configs).
    rollout: str | None = None
    # Colocated only: how many of the GPUs also roll out (env worker and generator), the actor
    # training on all of them; None: every GPU. RLinf's synchronous runner with a placement such
    # as ``actor: 0-7`` and ``env,rollout: 4-7`` (libero_spatial_dagger_openpi_lerobot.yaml):
    # the rollout runs on its GPUs, then the actor trains on all (embodied_runner.py run).
    colocated_rollout_gpus: int | None = None

    def colocated_rollout_on(self, gpus: int) -> int | float | None:
        """``colocated_rollout_gpus`` on ``gpus`` GPUs in the same share, as a config's placement
        scales with its envs per GPU (``predict --gpus``, ``plan``'s config as written); a share
        that does not divide them stays a fraction, which ``check`` refuses, naming the field."""
        if self.colocated_rollout_gpus is None:
            return None
        share = self.colocated_rollout_gpus * gpus / self.cluster.gpus
        return int(share) if share.is_integer() else share

    @property
    def rollout_kind(self) -> str:
        """The rollout this plan runs: ``plan.rollout``, or the mode's own."""
        if self.rollout is not None:
            return self.rollout
        return "per_env_async" if MODE_TABLE[self.mode].dynamic_batching else "lockstep"

    @cached_property
    def mechanisms(self) -> Mode:
        """This plan's row of the mode table (perfmodel.schema.modes); a mode that may share its
        GPUs (``SHARED_GPU_MODES``) with no rollout:actor split reads "disaggregated: no"; the
        plan's rollout says whether it has dynamic batching (``Mode.with_rollout``)."""
        row = MODE_TABLE[self.mode]
        if row.disaggregated and self.allocation_ratio is None and self.mode in SHARED_GPU_MODES:
            row = row.on_shared_gpus()
        return row if self.rollout is None else row.with_rollout(self.rollout)

    @property
    def rollout_gpus(self) -> int:
        return self.split[0]

    @property
    def actor_gpus(self) -> int:
        return self.split[1]

    @cached_property  # read on every simulated step (costs): parsed once
    def split(self) -> tuple[int, int]:
        if not self.mechanisms.disaggregated:
            return self.colocated_rollout_gpus or self.cluster.gpus, self.cluster.gpus
        return parse_ratio(self.allocation_ratio or "", self.cluster.gpus, "plan.allocation_ratio")

    @property
    def envs_per_worker(self) -> int:
        return self.workload.total_num_envs // self.rollout_gpus

    @property
    def envs_per_stage(self) -> int:
        return self.envs_per_worker // self.pipeline_stage_num

    @cached_property
    def placement(self) -> Placement:
        """Where each component runs (perfmodel.schema.placement), derived once."""
        m = self.mechanisms
        ratio = None
        if m.disaggregated:
            ratio = ratio_parts(self.allocation_ratio or "1:1")
        c = self.cluster
        return placement_of(c.gpus, c.gpus_per_node, c.cpu_cores_per_node, c.actor_cpu_cores_per_gpu,
                            self.rollout_gpus, self.actor_gpus, not m.disaggregated, ratio,
                            self.workload.total_num_envs, self.pipeline_stage_num, m.dynamic_batching,
                            self.placement_strategy)

    def node_split(self) -> list[tuple[int, int]]:
        return self.placement.node_split()

    @property
    def env_cores_per_worker(self) -> float:
        """CPU cores of one env worker (one per rollout GPU); see ``Placement``."""
        return self.placement.env_cores_per_worker

    @property
    def effective_b_max(self) -> int:
        """Dynamic-batching batch cap; by default one worker's envs (a lock-step worker's batch). A
        larger ``b_max`` is capped there: a generator serves one env worker, and RLinf caps a batch
        at total_num_envs / rollout workers (scheduler/worker/routing.py), so it fires on size
        once all of them wait instead of waiting out t_max."""
        return self.envs_per_worker if self.b_max is None else min(self.b_max, self.envs_per_worker)

    def check(self, path: str = "plan") -> None:
        if self.mode not in MODES:
            raise ConfigError(f"{path}.mode", f"must be one of {', '.join(MODES)}; got {self.mode!r}")
        check_int(f"{path}.cluster.gpus", self.cluster.gpus, min=1, max=MAX_GPUS)
        self.workload.check(f"{path}.workload")
        if not MODE_TABLE[self.mode].disaggregated:
            if self.allocation_ratio is not None:
                raise ConfigError(f"{path}.allocation_ratio",
                                  "must be omitted (null) for colocated: every GPU runs every phase")
        elif self.mechanisms.disaggregated:
            if self.allocation_ratio is None:
                shared = ", ".join(m for m in SHARED_GPU_MODES if MODE_TABLE[m].disaggregated)
                raise ConfigError(f"{path}.allocation_ratio",
                                  f"is required for {self.mode} (rollout:actor GPUs, e.g. 1:1); null (actor and rollout "
                                  f"on the same GPUs) is for colocated and {shared}")
            parse_ratio(self.allocation_ratio, self.cluster.gpus, f"{path}.allocation_ratio")
        check_int(f"{path}.pipeline_stage_num", self.pipeline_stage_num, min=1, max=MAX_PIPELINE_STAGES)
        if self.colocated_rollout_gpus is not None:
            if self.mode != "colocated":
                raise ConfigError(f"{path}.colocated_rollout_gpus",
                                  f"must be omitted (null) for {self.mode}: it is colocated's (the actor on every GPU, "
                                  "the rollout on that many of them); a rollout:actor split is allocation_ratio")
            check_int(f"{path}.colocated_rollout_gpus", self.colocated_rollout_gpus, min=1, max=self.cluster.gpus)
        w = self.workload
        g_r = self.rollout_gpus
        if w.total_num_envs % g_r:
            raise ConfigError(
                f"{path}.workload.total_num_envs",
                f"{w.total_num_envs} envs do not divide over {g_r} env workers (one per rollout GPU)",
            )
        if self.envs_per_worker % self.pipeline_stage_num:  # before the placement, which splits workers into stages
            raise ConfigError(
                f"{path}.pipeline_stage_num",
                f"{self.envs_per_worker} envs per worker do not divide into {self.pipeline_stage_num} stages",
            )
        self._check_env_cores(path)
        if self.b_max is not None and self.b_max < 1:
            raise ConfigError(f"{path}.b_max", f"must be an integer >= 1 or null, got {self.b_max}")
        if not (self.t_max_s >= 0 and math.isfinite(self.t_max_s)):
            raise ConfigError(f"{path}.t_max_s", f"must be a finite number >= 0, got {self.t_max_s}")
        check_int(f"{path}.max_staleness", self.max_staleness, min=0, max=MAX_STALENESS)
        for name, allowed in (("placement_strategy", PLACEMENT_STRATEGIES),
                              ("version_granularity", VERSION_GRANULARITIES),
                              ("sharding_strategy", SHARDING_STRATEGIES), ("trained_part", TRAINED_PARTS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{path}.{name}", f"must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
        if not isinstance(self.enable_offload, bool):
            raise ConfigError(f"{path}.enable_offload", f"must be true or false, got {self.enable_offload!r}")
        self._check_rollout(path)
        m = self.mechanisms
        if self.workload.algorithm in REPLAY_ALGORITHMS and m.streaming:
            raise ConfigError(f"{path}.mode", f"must not stream training for {self.workload.algorithm}: it trains on "
                                              "batches drawn from a replay buffer, not on the arriving samples "
                                              f"(modes: {', '.join(n for n in MODES if not MODE_TABLE[n].streaming)})")
        if self.enable_offload and m.trains_beside_rollout:
            raise ConfigError(f"{path}.enable_offload", f"must be false for {self.mode} with actor and rollout on the "
                                                        "same GPUs (allocation_ratio null): they run at the same time, "
                                                        "so both models stay resident (no phases to offload between)")

    def _check_rollout(self, path: str) -> None:
        if self.rollout is None:
            return
        if self.rollout not in ROLLOUTS:
            raise ConfigError(f"{path}.rollout", f"must be one of {', '.join(ROLLOUTS)} or null; got {self.rollout!r}")
        row = MODE_TABLE[self.mode]
        if row.dynamic_batching and self.rollout != "per_env_async":
            raise ConfigError(f"{path}.rollout", f"must be per_env_async (or null) for {self.mode}: its rollout "
                                                 f"batches inference dynamically; got {self.rollout!r}")
        if row.async_training and not row.dynamic_batching and self.rollout == "per_env_async":
            raise ConfigError(f"{path}.rollout", f"per_env_async with {self.mode} is mode rollout_async (asynchronous "
                                                 "training with the per-env asynchronous rollout): name that mode")

    def _check_env_cores(self, path: str) -> None:
        """Every env worker needs at least one CPU core of its node: fewer cores than the env
        workers on a node cannot run them (the model would have to invent the missing cores)."""
        c = self.cluster
        if self.env_cores_per_worker >= 1:
            return
        pl = self.placement
        kept = 0.0 if not self.mechanisms.disaggregated else c.actor_cpu_cores_per_gpu
        # the node kind that starves its env workers most, and the part of a node this plan has there
        # (colocated: every worker has its GPU's share, on any node; the first will do)
        n = min((n for n in pl.nodes if n.rollout),
                key=lambda n: 0.0 if pl.colocated else env_cores_of(n, c.cpu_cores_per_node, c.gpus_per_node, kept))
        part = pl.node_fraction(n)
        has = (f"a node of {c.cpu_cores_per_node} cores" if part >= 1 else
               f"{c.cpu_cores_per_node * part:g} cores (this plan's {n.rollout + (0 if pl.colocated else n.actor)} of "
               f"a node's {c.gpus_per_node} GPUs get that part of its {c.cpu_cores_per_node})")
        need = math.ceil((n.rollout + n.actor * kept) / part)
        if kept > 0:
            raise ConfigError(f"{path}.cluster.cpu_cores_per_node",
                              f"must leave at least one core per env worker: {n.rollout} env worker(s) and {n.actor} "
                              f"actor GPU(s) keeping {kept:g} cores each share {has}; need at least {need}")
        raise ConfigError(f"{path}.cluster.cpu_cores_per_node",
                          f"must be at least one core per env worker ({n.rollout} on {has}), need at least "
                          f"{math.ceil(n.rollout / part)}, got {c.cpu_cores_per_node}")

    @classmethod
    def from_dict(cls, obj: Any, path: str = "plan") -> "Plan":
        f = Fields(obj, path)
        mode = f.str("mode", choices=MODES)
        workload = Workload.from_dict(f.any("workload", {}), f.sub("workload"))
        cluster = Cluster.from_dict(f.any("cluster"), f.sub("cluster"))
        ratio = f.any("allocation_ratio", "1:1" if MODE_TABLE[mode].disaggregated else None)
        if ratio is not None and not isinstance(ratio, str):
            raise ConfigError(f.sub("allocation_ratio"), f"must be a string R:A or null, got {ratio!r}")
        b_max = f.any("b_max", None)
        if b_max is not None:
            b_max = f.int("b_max")
        shape = {k: (f.int(k, min=1, max=MAX_DENOISE_OR_HORIZON) if f.any(k, None) is not None else None)
                 for k in ("denoising_steps", "action_horizon")}
        plan = cls(
            mode=mode,
            workload=workload,
            cluster=cluster,
            profile=f.str("profile", "pi05"),
            allocation_ratio=ratio,
            pipeline_stage_num=f.int("pipeline_stage_num", 1),
            b_max=b_max,
            t_max_s=f.float("t_max_s", DEFAULT_T_MAX_S),
            max_staleness=f.int("max_staleness", 1, min=0),
            placement_strategy=f.str("placement_strategy", "packed", choices=PLACEMENT_STRATEGIES),
            sharding_strategy=f.str("sharding_strategy", "full_shard", choices=SHARDING_STRATEGIES),
            trained_part=f.str("trained_part", "action_expert", choices=TRAINED_PARTS),
            enable_offload=f.bool("enable_offload", False),
            version_granularity=f.str("version_granularity", "iteration", choices=VERSION_GRANULARITIES),
            rollout=f.str("rollout", None, choices=ROLLOUTS) if f.any("rollout", None) is not None else None,
            colocated_rollout_gpus=(f.int("colocated_rollout_gpus", min=1)
                                    if f.any("colocated_rollout_gpus", None) is not None else None),
            **shape,
        )
        f.done()
        plan.check(path)
        return plan

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        """A plan file. A relative ``profile`` path in it names a file beside the plan (resolved
        against the plan file's directory, not the current one), as a user who moves the two
        together expects; bundled profile names (``pi05``) stay names."""
        return cls.load_with_given(path)[0]

    @classmethod
    def load_with_given(cls, path: str | Path) -> tuple["Plan", dict[str, Any]]:
        """``load``, and the ``cluster`` fields the file gives (the rest are defaults that a
        profile may fill: perfmodel.calibration.reference.complete_cluster), read once."""
        raw = load_json(path, "plan")
        plan = cls.from_dict(raw, "plan")
        return plan.with_(profile=resolve_profile_ref(plan.profile, Path(path).parent)), raw.get("cluster", {})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "mode": d["mode"],
            "allocation_ratio": d["allocation_ratio"],
            "pipeline_stage_num": d["pipeline_stage_num"],
            "b_max": d["b_max"],
            "t_max_s": d["t_max_s"],
            "max_staleness": d["max_staleness"],
            "placement_strategy": d["placement_strategy"],
            "sharding_strategy": d["sharding_strategy"],
            "trained_part": d["trained_part"],
            "enable_offload": d["enable_offload"],
            # only when not the default, so plans written before the field read back the same
            **({"version_granularity": d["version_granularity"]} if d["version_granularity"] != "iteration" else {}),
            **{k: d[k] for k in ("denoising_steps", "action_horizon", "rollout", "colocated_rollout_gpus")
               if d[k] is not None},
            "profile": d["profile"],
            "workload": d["workload"],
            "cluster": d["cluster"],
        }

    def with_(self, **changes: Any) -> "Plan":
        return replace(self, **changes)

    def with_whole_global_batch(self) -> "Plan":
        """This plan with ``global_batch_size`` raised to a whole split over its actor GPUs
        (``rules.whole_global_batch``; ``--scale-global-batch``)."""
        w = self.workload
        batch = whole_global_batch(w.global_batch_size, self.actor_gpus, w.micro_batch_size)
        return self if batch == w.global_batch_size else self.with_(workload=replace(w, global_batch_size=batch))

"""The rules of an RL iteration that the simulator and the executor both follow, written once.

Pure functions of plain numbers, so that a simulated and a measured run cannot disagree on
them: which policy version a rollout iteration needs, how an iteration's samples split into
global batches and a global batch into micro-batches, how env workers split into groups, and
when a dynamic batch fires.
"""

from __future__ import annotations

import math

# Asynchronous rollout lets every env step on its own; the simulator keeps one event per env
# group and chunk step, with this many groups per worker (at least; a multiple of the pipeline
# stages that divides the worker's envs), enough for inference and env stepping to overlap.
ASYNC_GROUPS_PER_WORKER = 4


def required_weight_version(iteration: int, staleness: int, versions_per_iteration: int = 1) -> int:
    """The policy version rollout iteration ``iteration`` must start from: the weights trained
    on iteration k-1 (version k x ``versions_per_iteration``) when synchronous (staleness 0), up
    to ``staleness`` versions older. ``versions_per_iteration``: 1 when a version is an
    iteration's training, the optimizer steps of an iteration when it is one optimizer step
    (``plan.version_granularity``)."""
    return iteration * versions_per_iteration - staleness


def global_batch_runs(samples: int, global_batch_size: int) -> list[tuple[int, int]]:
    """An iteration's global batches in order as (size, count) runs: full batches, then the
    remainder (a few numbers, whatever the cluster size)."""
    full, rest = divmod(samples, global_batch_size)
    return [(s, c) for s, c in ((global_batch_size, full), (rest, 1 if rest else 0)) if c]


def training_runs(samples: int, global_batch_size: int, update_epoch: int,
                  replay: bool = False) -> tuple[list[tuple[int, int]], int]:
    """(global batches as (size, count) runs, passes over each) of one iteration's training.
    On-policy (PPO, GRPO, NFT, OPD): the iteration's samples in global batches, each trained
    ``update_epoch`` times. From a replay buffer (``replay``: DSRL, DAgger): ``update_epoch``
    global batches of ``global_batch_size`` drawn from the buffer, once each, whatever the
    iteration collected (rlinf 0.3.0 workers/actor/fsdp_sac_policy_worker.py and
    fsdp_dagger_policy_worker.py run_training: ``for _ in range(update_epoch): update_one_epoch()``,
    each a global batch sampled from the TrajectoryReplayBuffer)."""
    if replay:
        return [(global_batch_size, update_epoch)], 1
    return global_batch_runs(samples, global_batch_size), update_epoch


def global_batches(samples: int, global_batch_size: int) -> list[int]:
    """An iteration's samples as global batches in order: full batches, then the remainder."""
    return [s for s, c in global_batch_runs(samples, global_batch_size) for _ in range(c)]


def micro_batching(batch: int, ranks: int, micro_batch_size: int) -> tuple[int, int]:
    """(micro-steps, samples per rank per micro-step) for a global batch of ``batch`` samples
    over ``ranks`` data-parallel ranks: each rank takes batch / ranks samples (RLinf: global
    batch / world size) in micro-batches of ``micro_batch_size``, smaller when its share is."""
    per_rank = min(micro_batch_size, math.ceil(batch / ranks))
    return math.ceil(batch / (per_rank * ranks)), per_rank


def batch_split_is_whole(batch: int, ranks: int, micro_batch_size: int) -> bool:
    """Whether RLinf accepts the split: it requires the global batch to be a multiple of
    micro_batch_size x actor ranks (each rank runs a whole number of full micro-batches);
    ``micro_batching`` costs any other split with smaller or padded micro-batches."""
    return batch % (micro_batch_size * ranks) == 0


def whole_micro_batch(batch: int, ranks: int, micro_batch_size: int) -> int | None:
    """The largest micro_batch_size at or below ``micro_batch_size`` with which RLinf accepts the
    split of the same global ``batch`` over ``ranks`` actor ranks (``batch_split_is_whole``), or
    None when no micro-batch can (``batch`` is not a multiple of ``ranks``). When a rank's share
    is at most the micro-batch, that is the share itself: what ``micro_batching`` costs anyway."""
    if batch % ranks:
        return None
    share = batch // ranks
    return max(d for d in range(1, min(micro_batch_size, share) + 1) if share % d == 0)


def whole_global_batch(batch: int, ranks: int, micro_batch_size: int) -> int:
    """The smallest global batch at or above ``batch`` that RLinf accepts on ``ranks`` actor
    ranks (a multiple of micro_batch_size x ranks): every rank runs whole micro-batches, so the
    per-rank batch, not the global one, stays as the workload had it on fewer GPUs."""
    unit = micro_batch_size * ranks
    return -(-batch // unit) * unit


def env_groups(envs_per_worker: int, stages: int, dynamic: bool) -> int:
    """Env groups per worker: its pipeline stages in lock-step; with dynamic batching, at least
    ASYNC_GROUPS_PER_WORKER groups (a multiple of the stages that divides the worker's envs)."""
    if not dynamic:
        return stages
    for g in range(max(stages, ASYNC_GROUPS_PER_WORKER), 0, -1):
        if g % stages == 0 and envs_per_worker % g == 0:
            return g
    return stages


def batch_fires(waiting_envs: int, b_max: int, waited_s: float, t_max_s: float) -> bool:
    """Dynamic batching: a batch fires once ``b_max`` envs wait or the first of them has waited
    ``t_max_s`` (``t_max_s`` = 0: fire whatever is waiting at once)."""
    return waiting_envs >= b_max or waited_s >= t_max_s

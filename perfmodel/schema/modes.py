"""The five pipeline modes as one table: each row says which mechanisms the mode has.

The modes are cumulative (../shared/reference/README.md, RL-VLA3): each adds one mechanism to
the one before. Every rule that depends on the mode reads a column of this table, never the
mode's name or position.

| mode          | disaggregated | async_training | dynamic_batching | streaming |
|---------------|---------------|----------------|------------------|-----------|
| colocated     | no            | no             | no               | no        |
| disaggregated | yes           | no             | no               | no        |
| train_async   | yes           | yes            | no               | no        |
| rollout_async | yes           | yes            | yes              | no        |
| streamer      | yes           | yes            | yes              | yes       |

- disaggregated: rollout (env workers + inference) and the actor on disjoint GPU sets; weights
  travel from the actor to every generator. Otherwise every GPU time-shares every phase and
  swaps models (offload/reload) between phases.
  The column is each mode's placement; a train_async plan may also put actor and rollout on
  the same GPUs (``allocation_ratio`` null, RLinf's ``actor,env,rollout: all`` with
  ``algorithm.staleness_threshold``): its row then reads "disaggregated: no"
  (``Plan.mechanisms``, ``Mode.on_shared_gpus``), and with no phases to alternate it swaps no
  models (``swaps_phases``): training and inference take the shared GPUs in turn as they come.
- async_training: rollout goes on within the staleness bound while the actor trains one global
  batch at a time as samples arrive; otherwise the actor waits for the whole rollout.
- dynamic_batching: envs step on their own and inference requests queue until ``b_max`` wait
  or ``t_max_s`` passes; otherwise a worker's envs step in lock-step, one call per env group.
  A synchronous mode may add it with the plan's ``rollout: per_env_async`` (the RL-VLA3 fork's
  ``col_as`` configs: colocated, per-env asynchronous rollout, synchronous training); its row
  then reads "dynamic_batching: yes" (``Plan.mechanisms``, ``Mode.with_rollout``).
- streaming: the first pass over a global batch starts per micro-batch as samples arrive.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mode:
    name: str
    disaggregated: bool
    async_training: bool
    dynamic_batching: bool
    streaming: bool

    @property
    def lockstep(self) -> bool:
        """A worker's envs step together and wait for the slowest (no dynamic batching)."""
        return not self.dynamic_batching

    @property
    def swaps_phases(self) -> bool:
        """Actor and rollout share the GPUs in alternating phases (colocated): only then is there
        an offload/reload between phases to pay (with ``plan.enable_offload``)."""
        return not self.disaggregated and not self.async_training

    @property
    def trains_beside_rollout(self) -> bool:
        """Actor and rollout on the same GPUs at the same time (train_async on shared GPUs):
        training and inference take each GPU in turn, and no GPU is the rollout's alone."""
        return not self.disaggregated and self.async_training

    def on_shared_gpus(self) -> "Mode":
        """This mode's row with actor and rollout on the same GPUs (``SHARED_GPU_MODES``)."""
        return replace(self, disaggregated=False)

    def with_rollout(self, rollout: str) -> "Mode":
        """This mode's row with the plan's rollout (``ROLLOUTS``): ``per_env_async`` is dynamic
        batching, the same mechanism whichever placement and training it runs beside."""
        return replace(self, dynamic_batching=rollout == "per_env_async")

    def ignores(self, knob: str) -> str | None:
        """Why this mode ignores the plan field ``knob`` (one of KNOB_MECHANISM), or None if it reads it."""
        mechanism, why = KNOB_MECHANISM[knob]
        return None if getattr(self, mechanism) else why


# The plan fields only one mechanism reads, and what a mode without it is.
KNOB_MECHANISM: dict[str, tuple[str, str]] = {
    "max_staleness": ("async_training", "synchronous"),
    "b_max": ("dynamic_batching", "no dynamic batching"),
    "t_max_s": ("dynamic_batching", "no dynamic batching"),
}


MODE_TABLE: dict[str, Mode] = {m.name: m for m in (
    Mode("colocated", disaggregated=False, async_training=False, dynamic_batching=False, streaming=False),
    Mode("disaggregated", disaggregated=True, async_training=False, dynamic_batching=False, streaming=False),
    Mode("train_async", disaggregated=True, async_training=True, dynamic_batching=False, streaming=False),
    Mode("rollout_async", disaggregated=True, async_training=True, dynamic_batching=True, streaming=False),
    Mode("streamer", disaggregated=True, async_training=True, dynamic_batching=True, streaming=True),
)}
MODES: tuple[str, ...] = tuple(MODE_TABLE)
# Modes whose plan may put actor and rollout on the same GPUs (allocation_ratio null): colocated
# always; train_async as RLinf's asynchronous PPO does with ``actor,env,rollout: all`` (its
# LIBERO *_async_ppo_* configs); rollout_async as the RL-VLA3 fork's ``libero_col_aa_*`` configs
# do (per-env asynchronous rollout, training beside it on the same GPUs). Streaming runs on
# disjoint GPUs in every config and run vlaperf knows of, so it is not offered shared.
SHARED_GPU_MODES: tuple[str, ...] = ("colocated", "train_async", "rollout_async")
# Which rollout a plan runs (``plan.rollout``): ``lockstep`` (a worker's envs step together, one
# inference call per env group) or ``per_env_async`` (envs step on their own, requests batched
# by b_max / t_max_s: the mode table's dynamic_batching). rollout_async and streamer run only the
# second; colocated and disaggregated run either (the RL-VLA3 fork's ``as``: asynchronous rollout,
# synchronous training); train_async with it is rollout_async.
ROLLOUTS: tuple[str, ...] = ("lockstep", "per_env_async")


def mode(name: str) -> Mode:
    return MODE_TABLE[name]

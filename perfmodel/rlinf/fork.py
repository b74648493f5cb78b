"""The RL-VLA3 fork's configs (github Haoran0301/RL-VLA3, examples/embodiment/config; the facts are
in ../shared/reference/scaling-facts.md, "The fork's asynchronous keys").

- Layout: the main configs sit in ``config/<suite>/``, the ``env/``, ``model/`` and
  ``training_backend/`` groups in ``config/``, found through ``hydra.searchpath:
  file://${oc.env:EMBODIED_PATH}/config/``; the fork's scripts set ``EMBODIED_PATH``.
  ``embodied_path`` says which folder stands for it when it is unset.
- Asynchronous keys: ``env.per_env_async.enabled`` and ``rollout.per_env_async.enabled`` (per-env
  asynchronous stepping with dynamic batching), ``rollout.per_env_async.max_batch_size`` (B_max)
  and ``batch_timeout_ms`` (T_max); in the "flex" workers (``rollout.per_env_async.flex.enabled``)
  B_max counts samples (envs), in the plain per-env-async worker requests.
  ``actor.streaming_mode: True`` with ``actor.gradient_accumulation_across_epochs: True`` is the
  streamer.
- Placements: ``col`` (env, rollout and actor on every GPU: RLinf's ``actor,env,rollout: all``)
  and ``hyb62``-style (simulator GPUs 0-5, generator GPUs 6-7, trainer time-sharing all 8).

Kept apart from the importer's own mapping (perfmodel.rlinf.importer.to_plan calls
``read_fork`` and ``hybrid_placement``), so that what is the fork's is in one place.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.schema.errors import ConfigError

ENV_ASYNC = "env.per_env_async.enabled"
ROLLOUT_ASYNC = "rollout.per_env_async.enabled"
MAX_BATCH = "rollout.per_env_async.max_batch_size"
TIMEOUT_MS = "rollout.per_env_async.batch_timeout_ms"
FLEX = "rollout.per_env_async.flex.enabled"
STREAMING = "actor.streaming_mode"
ACCUMULATE = "actor.gradient_accumulation_across_epochs"
# The runner's loop (code/rlinf/runners/embodied_runner.py, run): "sync" (_run_sync: every rollout
# epoch, then advantages, then training) or "async" (_run_async: each step syncs the weights once,
# then runs env.interact, rollout.generate and actor.async_train_loop at once; the actor trains on
# each rollout epoch's batch as it arrives and the step ends when both are done).
PIPELINE_MODE = "algorithm.pipeline_mode"
PIPELINE_MODES = ("sync", "async")
# The flex workers' table (code/rlinf/workers/per_env_flex_plan.py): env rank r runs one env
# manager per entry of MANAGERS[r] (that many envs stepping together), and ROUTES[r][s] lists the
# rollout ranks that serve manager s of env rank r.
MANAGERS = "env.per_env_async.flex.manager_batch_sizes_by_env_rank"
ROUTES = "rollout.per_env_async.flex.rollout_ranks_by_env_rank_stage"
# The fork's keys read here: the importer does not list them as unread asynchronous settings.
READ = (ENV_ASYNC, ROLLOUT_ASYNC, MAX_BATCH, TIMEOUT_MS, FLEX, STREAMING, ACCUMULATE, PIPELINE_MODE)


def embodied_path(config: Path) -> tuple[str, str | None]:
    """The folder ``EMBODIED_PATH`` stands for while ``config`` is composed, and the one line
    that says so when the environment leaves it unset and it matters (None otherwise). Unset: in
    RLinf's layout (``$EMBODIED_PATH/config/x.yaml``) the search path is the config's own folder,
    so the config folder's parent adds nothing and nothing is said; in the fork's
    (``$EMBODIED_PATH/config/<suite>/x.yaml``, the groups in ``config/``) it is the parent of the
    ``config`` folder above the file's, and the line says so."""
    if os.environ.get("EMBODIED_PATH"):
        return os.environ["EMBODIED_PATH"], None
    p = config.resolve()
    if p.parent.name != "config" and p.parent.parent.name == "config":
        guess = p.parent.parent.parent
        if "EMBODIED_PATH" in _text(p):
            return str(guess), (f"EMBODIED_PATH is not set: composed {config.name} with EMBODIED_PATH={guess} "
                                "(the parent of its config/ folder, as the RL-VLA3 fork's scripts set it); set it "
                                "if the env/ and model/ groups live elsewhere")
        return str(guess), None
    return str(p.parent.parent), None


def _text(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


@dataclass
class ForkAsync:
    """What the fork's asynchronous keys ask of the plan."""

    per_env_async: bool = False  # dynamic batching of per-env requests (rollout_async, streamer)
    streamer: bool = False
    b_max: int | None = None  # in envs, the plan's unit
    t_max_s: float | None = None
    # algorithm.pipeline_mode: async (the runner's _run_async: training beside the rollout)
    pipeline_async: bool = False
    # the flex table (env ranks, env managers per env rank, envs per manager): the config's pipe{P}
    flex_table: tuple[int, int, int] | None = None
    notes: list[str] = field(default_factory=list)


# What one request of the plain per-env-async worker carries: per-env asynchronous stepping sends
# each env's observation on its own, so B_max requests are B_max envs, the unit of the plan's
# b_max (the simulator's env groups, perfmodel.schema.rules.ASYNC_GROUPS_PER_WORKER, are an
# event granularity, not requests). An interpretation of the fork's per-env stepping, said in the
# import's warning.
ENVS_PER_REQUEST = 1


def read_fork(c: Any) -> ForkAsync:  # c: compose.Composed (which imports this module)
    """The fork's asynchronous keys of composed config ``c``."""
    envs_per_request = ENVS_PER_REQUEST
    out = ForkAsync()
    env_async, rollout_async = c.get_bool(ENV_ASYNC), c.get_bool(ROLLOUT_ASYNC)
    if env_async != rollout_async and (c.has(ENV_ASYNC) or c.has(ROLLOUT_ASYNC)):
        on, off = (ENV_ASYNC, ROLLOUT_ASYNC) if env_async else (ROLLOUT_ASYNC, ENV_ASYNC)
        raise ConfigError(off, f"is off but {on} is on: the fork's per-env asynchronous pipeline needs both "
                               "(env workers step each env apart, the rollout batches their requests)")
    out.per_env_async = env_async and rollout_async
    pipeline = c.get(PIPELINE_MODE, "sync")
    if pipeline not in PIPELINE_MODES:
        raise ConfigError(PIPELINE_MODE, f"must be one of {', '.join(PIPELINE_MODES)} (the fork's runner), got {pipeline!r}")
    out.pipeline_async = pipeline == "async"
    streaming, accumulate = c.get_bool(STREAMING), c.get_bool(ACCUMULATE)
    # Streaming without accumulation is refused: vlaperf's streamer accumulates across epochs.
    # Accumulation without streaming is the fork's own aa (async_train_loop_with_gradient_accumulation
    # in code/rlinf/workers/actor/fsdp_actor_worker.py: each epoch's batch trained as it arrives, an
    # optimizer step per global batch): asynchronous training, read with pipeline_mode below.
    if streaming and not accumulate:
        raise ConfigError(ACCUMULATE, f"{STREAMING} is True but {ACCUMULATE} is False: vlaperf models the fork's "
                                      "streamer, which sets both True (training on each micro-batch as it arrives, "
                                      "gradients accumulated across rollout epochs)")
    out.streamer = streaming
    if accumulate and not out.pipeline_async and not streaming:
        out.notes.append(f"{ACCUMULATE}: True has no effect with {PIPELINE_MODE} sync (the fork's _run_sync trains "
                         "after the whole rollout with run_training, which does not read it)")
    if out.streamer and not out.per_env_async:
        raise ConfigError(STREAMING, f"True without the per-env asynchronous rollout ({ENV_ASYNC}, {ROLLOUT_ASYNC}): "
                                     "vlaperf's streamer streams within the asynchronous rollout")
    if not out.per_env_async:
        for key in (MAX_BATCH, TIMEOUT_MS):
            if c.has(key):
                out.notes.append(f"{key}: no effect with the per-env asynchronous rollout off ({ROLLOUT_ASYNC})")
        return out
    b = c.get(MAX_BATCH, None)
    if b is not None:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ConfigError(MAX_BATCH, f"must be an integer >= 1, got {b!r}")
        if c.get_bool(FLEX):
            out.b_max = b
            out.notes.append(f"{MAX_BATCH}: {b} samples (flex worker: {FLEX}) = b_max {b} envs")
        else:
            out.b_max = b * envs_per_request
            out.notes.append(f"{MAX_BATCH}: {b} requests (plain per-env-async worker) x {envs_per_request} envs per "
                             f"request (per-env stepping: each env requests alone) = b_max {out.b_max} envs")
    t = c.get(TIMEOUT_MS, None)
    if t is not None:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ConfigError(TIMEOUT_MS, f"must be a number of milliseconds > 0, got {t!r}")
        out.t_max_s = float(t) / 1000.0
    if c.get_bool(FLEX):
        out.flex_table = _flex_table(c)
    return out


def _flex_table(c: Any) -> tuple[int, int, int] | None:
    """(env ranks, env managers per env rank, envs per manager) from the flex table, checked to be vlaperf's layout: every env
    rank the same managers of the same size, each served by the rollout rank of its own index
    (one generator beside each env worker). None when the table is not given (the fork's default:
    rollout.pipeline_stage_num managers per env rank)."""
    managers = c.get(MANAGERS, None)
    if managers is None:
        return None
    if (not isinstance(managers, list) or not managers
            or not all(isinstance(r, list) and r and all(isinstance(x, int) and not isinstance(x, bool) and x > 0
                                                         for x in r) for r in managers)):
        raise ConfigError(MANAGERS, f"must list, per env rank, the env managers' sizes (integers > 0), got {managers!r}")
    if any(r != managers[0] for r in managers) or len(set(managers[0])) != 1:
        raise ConfigError(MANAGERS, f"{managers!r}: env managers of different sizes or counts per env rank are not "
                                    "modelled (vlaperf's env workers are identical, their groups of one size)")
    routes = c.get(ROUTES, None)
    if routes is not None:
        own = [[[rank] for _ in managers[rank]] for rank in range(len(managers))]
        if routes != own:
            raise ConfigError(ROUTES, f"{routes!r}: vlaperf models each env rank's managers served by the rollout "
                                      f"rank of the same index ({own!r}), one generator beside each env worker")
    return len(managers), len(managers[0]), managers[0][0]


def hybrid_placement(actor: list[int], env: list[int], rollout: list[int]) -> str | None:
    """Why an ``hyb62``-style placement (simulators and generators on GPUs of their own, the
    trainer time-sharing all of them) is refused, or None for another placement."""
    if env and rollout and not set(env) & set(rollout) and set(actor) >= set(env) | set(rollout):
        return (f"a hybrid placement (hyb{len(env)}{len(rollout)}-style: env on {len(env)} GPUs, rollout on "
                f"{len(rollout)} others, actor time-sharing all {len(actor)}) is not a vlaperf mode: vlaperf runs "
                "one env worker beside each generator, with the actor on the same GPUs (colocated, the fork's col) "
                "or on GPUs of its own (disaggregated modes)")
    return None


def col_reading(fork: ForkAsync) -> str:
    """How a colocated (``col``) config with the fork's per-env asynchronous rollout is costed:
    its ``as`` (pipeline_mode sync) or ``aa`` (async), each with the code it follows."""
    rollout = ("the per-env asynchronous rollout (env managers step on their own, code/rlinf/workers/env/per_env_async/; "
               "each rollout rank batches its env ranks' requests up to max_batch_size or batch_timeout_ms, "
               "code/rlinf/workers/rollout/hf/flexible_per_env_async_rollout_worker.py) is rollout_async's dynamic "
               "batching (b_max, t_max_s) on the shared GPUs")
    if fork.pipeline_async:
        return (f"{PIPELINE_MODE}: async with actor and rollout on every GPU (the fork's col_aa): costed as "
                f"rollout_async on shared GPUs (allocation_ratio null), staleness 0: {rollout}; the runner's _run_async "
                "syncs the weights once a step and the actor trains each rollout epoch's batch as it arrives, an "
                f"optimizer step per global batch ({ACCUMULATE}), taking the GPUs in turn with inference")
    return (f"{PIPELINE_MODE}: sync with actor and rollout on every GPU (the fork's col_as): costed as colocated with "
            f"rollout per_env_async: {rollout}; training waits for the whole rollout (_run_sync)")

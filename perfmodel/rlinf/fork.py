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
# The fork's keys read here: the importer does not list them as unread asynchronous settings.
READ = (ENV_ASYNC, ROLLOUT_ASYNC, MAX_BATCH, TIMEOUT_MS, FLEX, STREAMING, ACCUMULATE)


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
    streaming, accumulate = c.get_bool(STREAMING), c.get_bool(ACCUMULATE)
    if streaming != accumulate:
        raise ConfigError(ACCUMULATE if streaming else STREAMING,
                          f"{STREAMING} is {streaming} but {ACCUMULATE} is {accumulate}: vlaperf models the fork's "
                          "streamer, which sets both True (training on each micro-batch as it arrives, gradients "
                          "accumulated across rollout epochs); either alone is not a vlaperf mode")
    out.streamer = streaming and accumulate
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
    return out


def hybrid_placement(actor: list[int], env: list[int], rollout: list[int]) -> str | None:
    """Why an ``hyb62``-style placement (simulators and generators on GPUs of their own, the
    trainer time-sharing all of them) is refused, or None for another placement."""
    if env and rollout and not set(env) & set(rollout) and set(actor) >= set(env) | set(rollout):
        return (f"a hybrid placement (hyb{len(env)}{len(rollout)}-style: env on {len(env)} GPUs, rollout on "
                f"{len(rollout)} others, actor time-sharing all {len(actor)}) is not a vlaperf mode: vlaperf runs "
                "one env worker beside each generator, with the actor on the same GPUs (colocated, the fork's col) "
                "or on GPUs of its own (disaggregated modes)")
    return None

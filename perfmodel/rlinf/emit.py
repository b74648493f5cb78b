"""Plan -> the RLinf YAML fragment a user pastes over their config (``perfmodel plan --emit rlinf``).

The fragment holds what the plan decides: ``cluster.num_nodes`` and ``cluster.component_placement``
(contiguous global GPU ranges: rollout and its env workers first, then the actor, as RLinf's
packed placement fills them), env / rollout / actor sizes and batch settings, and a ``vlaperf:``
block for what RLinf's schema cannot say (the mode's streaming, the batching knobs, the GPU
type, the profile); dynamic batching also sets RLinf's own ``runner.enable_decoupled_mode``.
Importing the fragment (``--rlinf-config``) gives the same plan back.
"""

from __future__ import annotations

from typing import Any

from perfmodel.schema.plan import Plan
from perfmodel.schema.rules import batch_split_is_whole


def _range(a: int, b: int) -> str:
    return f"{a}-{b}" if b > a else f"{a}"


def fragment(plan: Plan, backbone: str | None = None) -> dict[str, Any]:
    c, w, m = plan.cluster, plan.workload, plan.mechanisms
    nodes = c.nodes
    if not m.disaggregated and plan.rollout_gpus < c.gpus:  # colocated_rollout_gpus: the actor on all
        placement = {"actor": _range(0, c.gpus - 1), "env,rollout": _range(0, plan.rollout_gpus - 1)}
    elif not m.disaggregated:
        placement = {"actor,env,rollout": "all" if c.gpus == nodes * c.gpus_per_node else _range(0, c.gpus - 1)}
    else:
        r = plan.rollout_gpus
        placement = {"env,rollout": _range(0, r - 1), "actor": _range(r, c.gpus - 1)}
    # (adv_type, loss_type) as the importer reads them back (importer.ALGORITHMS)
    adv, loss = {"ppo": ("gae", "decoupled_actor_critic" if m.async_training else "actor_critic"),
                 "grpo": ("grpo", "actor"), "nft": ("grpo", "embodied_nft"), "opd": ("opd", "opd"),
                 "dsrl": ("embodied_sac", "embodied_sac"), "dagger": ("gae", "embodied_dagger")}[w.algorithm]
    algorithm: dict[str, Any] = {"adv_type": adv, "loss_type": loss,
                                 "update_epoch": w.update_epoch, "group_size": w.group_size}
    # A synchronous plan pasted over an asynchronous config must switch RLinf's asynchronous PPO
    # and dynamic batching off, not leave them as they were.
    algorithm["staleness_threshold"] = plan.max_staleness if m.async_training else None
    # Offload only acts in colocated (phase switches); RLinf's asynchronous rollout refuses it
    # (workers/rollout/hf/async_huggingface_worker.py), so the disaggregated modes emit false.
    offload = plan.enable_offload and not m.disaggregated
    model: dict[str, Any] = {"num_action_chunks": w.num_action_chunks}
    openpi, gr00t = backbone in ("pi05", "pi0"), backbone in ("gr00t_n15", "gr00t_n16")
    if openpi:  # RLinf openpi: train_expert_only freezes the VLM
        model["openpi"] = {"train_expert_only": plan.trained_part == "action_expert"}
    elif gr00t:  # GR00T's own fine-tuning switches for the VLM
        model["tune_llm"] = model["tune_visual"] = plan.trained_part == "full"
    # the policy's shape where the plan has its own (perfmodel.costs.with_policy_shape)
    if plan.denoising_steps is not None:
        model["denoising_steps" if gr00t else "num_steps"] = plan.denoising_steps
    if plan.action_horizon is not None and openpi:
        model["openpi"]["action_chunk"] = plan.action_horizon
    if w.algorithm == "dsrl" and openpi:  # RLinf's DSRL is the SAC worker on openpi with use_dsrl
        model["openpi"]["use_dsrl"] = True
    actor: dict[str, Any] = {"micro_batch_size": w.micro_batch_size, "global_batch_size": w.global_batch_size,
                             "enable_offload": offload, "model": model,
                             "fsdp_config": {"sharding_strategy": plan.sharding_strategy}}
    vl: dict[str, Any] = {"mode": plan.mode, "profile": plan.profile, "gpu": c.gpu,
                          "placement_strategy": plan.placement_strategy, "trained_part": plan.trained_part}
    # vlaperf.gpu reads back as that GPU's typical node (perfmodel.gpu.gpu_node): a node of the
    # plan's that differs from it is written beside it, so the fragment reads back as this plan
    from perfmodel.schema.hardware import accelerator

    typical = accelerator(c.gpu)
    for key, value in (("cpu_cores_per_node", typical.node_cpu_cores), ("node_ram_gb", typical.node_ram_gb),
                       ("gpus_per_node", typical.gpus_per_node)):
        if getattr(c, key) != value:
            vl[key] = getattr(c, key)
    if m.disaggregated:
        vl["allocation_ratio"] = plan.allocation_ratio
    if plan.rollout is not None:
        vl["rollout"] = plan.rollout  # the fork's per-env asynchronous rollout on colocated
    vl["b_max"] = plan.b_max  # dynamic batching (rollout_async, streamer); kept for the round trip
    vl["t_max_s"] = plan.t_max_s
    # RLinf's own switch for dynamic batching (0.3.0: 20 ms timeout, one worker's envs per batch)
    return {
        "cluster": {"num_nodes": nodes, "component_placement": placement},
        "runner": {"enable_decoupled_mode": m.dynamic_batching},
        "algorithm": algorithm,
        # steps per env per rollout epoch; the task's own max_episode_steps stays the user's
        "env": {"train": {"total_num_envs": w.total_num_envs,
                          "max_steps_per_rollout_epoch": w.max_episode_steps, "rollout_epoch": w.rollout_epoch}},
        "rollout": {"pipeline_stage_num": plan.pipeline_stage_num, "enable_offload": offload,
                    # DAgger's expert, OPD's teacher: the user's own checkpoint path stays theirs
                    **({"expert_model": {"model_path": "/path/to/expert_model"}}
                       if w.algorithm in ("dagger", "opd") else {})},
        "actor": actor,
        "vlaperf": vl,
    }


def emit_yaml(plan: Plan, backbone: str | None = None, header: str | None = None) -> str:
    import yaml

    lines = ["# RLinf config fragment written by `perfmodel plan --emit rlinf`: paste these keys over your config",
             "# (each key replaces the one in your file). Older RLinf reads env.train.rollout_epoch, newer",
             "# algorithm.rollout_epoch: keep the one your config has. RLinf ignores the vlaperf: block; vlaperf",
             "# reads it back (mode, dynamic batching) with --rlinf-config."]
    if plan.mechanisms.disaggregated and plan.placement_strategy == "split" and plan.cluster.nodes > 1:
        lines.append("# note: RLinf places components on contiguous GPU ranges (packed); this plan was costed with "
                     "every node split by the ratio (placement_strategy split): re-check it with placement_strategy packed.")
    m = plan.mechanisms
    if m.streaming:
        lines.append("# note: stock RLinf (0.3.0) streams training only in its synchronous runner "
                     "(runner.use_training_pipeline); streaming with asynchronous PPO needs the RL-VLA3 fork.")
    if m.dynamic_batching and plan.pipeline_stage_num > 1:
        lines.append("# note: RLinf's dynamic batching (runner.enable_decoupled_mode) requires "
                     "rollout.pipeline_stage_num 1.")
    w = plan.workload
    if not batch_split_is_whole(w.global_batch_size, plan.actor_gpus, w.micro_batch_size):
        lines.append(f"# warning: RLinf requires global_batch_size to be a multiple of micro_batch_size x actor GPUs "
                     f"({w.global_batch_size} / ({w.micro_batch_size} x {plan.actor_gpus}) is not whole) and will "
                     "refuse this fragment: change the ratio or the batch sizes.")
    if m.dynamic_batching and not m.disaggregated:
        lines.append("# note: dynamic batching on shared GPUs is the RL-VLA3 fork's per-env asynchronous rollout "
                     "(env.per_env_async.enabled and rollout.per_env_async.enabled"
                     + (", algorithm.pipeline_mode async" if m.async_training else "") + "), not stock RLinf's.")
    if m.async_training:
        lines.append("# note: asynchronous PPO and dynamic batching run with RLinf's asynchronous runner and workers "
                     "(AsyncPPOEmbodiedRunner), which your entry script chooses, not these keys.")
    if header:
        lines += [f"# {h}" for h in header.splitlines()]
    return "\n".join(lines) + "\n" + yaml.safe_dump(fragment(plan, backbone), sort_keys=False, default_flow_style=False)

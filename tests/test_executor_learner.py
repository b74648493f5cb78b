"""PPO / GRPO updates: loss goes down on a fixed batch, weights change, DP ranks stay in sync."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as tmp

from executor.learner import (LearnerConfig, advantage_stats, compute_gae, compute_losses, evaluate_loss, free_port,
                              grpo_advantages, grpo_update, init_distributed, make_optimizer, micro_batch_slice,
                              ppo_update, random_batch, update_global_batch)
from perfmodel.schema.rules import micro_batching
from executor.policies import make_policy
from perfmodel.schema.errors import ConfigError

# one intra-op thread: OpenMP workers spin badly when another process holds a core
torch.set_num_threads(1)


def _flat(policy):
    return torch.cat([p.detach().reshape(-1).clone() for p in policy.parameters()])


@pytest.mark.parametrize("name", ("pi05", "gr00t_n15"))
@pytest.mark.parametrize("algorithm", ("ppo", "grpo"))
def test_update_reduces_loss_and_changes_weights(name, algorithm):
    policy = make_policy(name, "tiny")
    batch = random_batch(policy, 16, image_size=64)
    cfg = LearnerConfig(algorithm=algorithm, update_epoch=2, micro_batch_size=4, global_batch_size=8, lr=1e-5)
    use_value = algorithm == "ppo"
    before_w = _flat(policy)
    before = evaluate_loss(policy, batch, cfg, use_value)
    update = ppo_update if use_value else grpo_update
    metrics = update(policy, make_optimizer(policy, cfg), batch, cfg)
    after = evaluate_loss(policy, batch, cfg, use_value)
    assert after < before
    assert not torch.equal(before_w, _flat(policy))
    # 16 samples / 8 per global batch x 2 epochs; 2 micro-batches of 4 per global batch
    assert metrics["charts/optimizer_steps"] == 4 and metrics["charts/micro_batches"] == 8
    for key in ("losses/policy", "losses/value", "losses/approx_kl", "losses/entropy", "losses/clipfrac",
                "losses/total", "charts/grad_norm"):
        assert key in metrics
    if not use_value:
        assert metrics["losses/value"] == 0.0


def test_gae_matches_hand_computation():
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.tensor([[0.5], [0.2], [0.1]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    adv, ret = compute_gae(rewards, values, dones, torch.tensor([9.0]), gamma=0.9, lam=0.8)
    d2 = 2.0 - 0.1  # episode ends: no bootstrap
    d1 = 0.0 + 0.9 * 0.1 - 0.2
    d0 = 1.0 + 0.9 * 0.2 - 0.5
    a2 = d2
    a1 = d1 + 0.9 * 0.8 * a2
    a0 = d0 + 0.9 * 0.8 * a1
    torch.testing.assert_close(adv[:, 0], torch.tensor([a0, a1, a2]))
    torch.testing.assert_close(ret, adv + values)


def test_grpo_advantages_are_group_relative():
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0]), group_size=3)
    assert adv.shape == (6,)
    torch.testing.assert_close(adv[:3].sum(), torch.tensor(0.0), atol=1e-5, rtol=0)
    assert adv[0] > 0 > adv[1]
    with pytest.raises(ConfigError):
        grpo_advantages(torch.zeros(5), group_size=2)


def test_config_checks():
    with pytest.raises(ConfigError, match="algorithm"):
        LearnerConfig(algorithm="dpo").check()
    with pytest.raises(ConfigError, match="micro_batch_size"):
        LearnerConfig(micro_batch_size=0).check()


def test_micro_batch_slices_cover_the_global_batch_once():
    for B, R, mbs in ((8, 1, 4), (8, 2, 2), (10, 2, 4), (7, 3, 2), (3, 4, 8), (16, 4, 3)):
        steps, per_rank = micro_batching(B, R, mbs)
        seen = []
        for m in range(steps):
            for r in range(R):
                lo, hi = micro_batch_slice(B, R, mbs, m, r)
                assert 0 <= hi - lo <= per_rank <= mbs
                seen += range(lo, hi)
        assert seen == list(range(B)), (B, R, mbs)


def test_gradient_accumulation_equals_the_whole_batch_gradient():
    """Micro-batches of equal size, loss / micro-steps: the accumulated gradient is the gradient
    of the loss on the whole global batch (advantages normalised over the global batch)."""
    cfg = LearnerConfig(micro_batch_size=2, global_batch_size=8, max_grad_norm=1e9, lr=0.0)
    policy = make_policy("pi05", "tiny", seed=3)
    batch = random_batch(policy, 8, image_size=32, seed=4)
    metrics = update_global_batch(policy, make_optimizer(policy, cfg), batch, cfg, use_value=True)
    assert metrics["charts/micro_batches"] == 4
    ref = make_policy("pi05", "tiny", seed=3)
    b = dict(batch)
    mean, std = advantage_stats(b["advantages"])
    b["advantages"] = (b["advantages"] - mean) / (std + 1e-8)
    compute_losses(ref, b, cfg, use_value=True)["total"].backward()
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in ref.parameters() if p.grad is not None]))
    torch.testing.assert_close(torch.tensor(metrics["charts/grad_norm"]), norm, rtol=1e-4, atol=1e-6)


def _dp_rank(rank, world, port, q):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    init_distributed(rank, world, "gloo")
    policy = make_policy("pi05", "tiny", seed=0)  # same initial weights on every rank
    batch = random_batch(policy, 8, image_size=32, seed=10)  # every rank holds the global batch, trains its slices
    cfg = LearnerConfig(update_epoch=1, micro_batch_size=2, global_batch_size=8, lr=1e-5)
    init = _flat(policy)
    metrics = ppo_update(policy, make_optimizer(policy, cfg), batch, cfg)
    w = _flat(policy)
    gathered = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(gathered, w)
    # the same global batch on one rank: the same averaged gradient
    dp = make_policy("pi05", "tiny", seed=0)
    dp_norm = update_global_batch(dp, make_optimizer(dp, cfg), batch, cfg, True, rank, world)["charts/grad_norm"]
    one = make_policy("pi05", "tiny", seed=0)
    one_norm = update_global_batch(one, make_optimizer(one, cfg), batch, cfg, True)["charts/grad_norm"]
    q.put((rank, metrics["charts/optimizer_steps"], bool(torch.equal(gathered[0], gathered[1])),
           bool(torch.equal(init, w)), dp_norm, one_norm))
    dist.destroy_process_group()


def test_data_parallel_ranks_stay_in_sync_and_average_the_global_batch():
    ctx = tmp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_dp_rank, args=(r, 2, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(q.get(timeout=180) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    for rank, steps, in_sync, unchanged, dp_norm, one_norm in results:
        assert steps == 1  # 8 samples: one global batch of 8 (2 micro-steps of 2 samples x 2 ranks)
        assert in_sync and not unchanged
        assert abs(dp_norm - one_norm) <= 1e-4 * one_norm


def test_nft_update_runs_the_passes_perfmodel_costs():
    """RLinf's NFT on the stand-in: GRPO's optimizer and micro-batch counts, each micro-batch
    two prefix passes (v with grad, v_old without) and one action-head step each, against PPO's
    one prefix pass and the whole denoising chain (Backbone.nft_train_flops / train_flops); the
    update trains (NFT's own loss moves with v_old, the current policy's: no before/after compare)."""
    policy = make_policy("pi05", "tiny")
    batch = random_batch(policy, 16, image_size=32)
    calls = {"prefix": 0, "head": 0}
    policy.llm_norm.register_forward_hook(lambda *a: calls.__setitem__("prefix", calls["prefix"] + 1))
    policy.head_norm.register_forward_hook(lambda *a: calls.__setitem__("head", calls["head"] + 1))
    counts = {}
    for algorithm in ("grpo", "nft"):
        cfg = LearnerConfig(algorithm=algorithm, update_epoch=1, micro_batch_size=4, global_batch_size=8, lr=1e-5)
        before = _flat(policy)
        calls.update(prefix=0, head=0)
        metrics = grpo_update(policy, make_optimizer(policy, cfg), batch, cfg)
        counts[algorithm] = dict(calls)
        assert metrics["charts/optimizer_steps"] == 2 and metrics["charts/micro_batches"] == 4
        assert metrics["charts/grad_norm"] > 0 and not torch.equal(before, _flat(policy))
    steps = policy.backbone.denoise_steps
    assert counts["grpo"] == {"prefix": 4, "head": 4 * steps}
    assert counts["nft"] == {"prefix": 8, "head": 8}


def test_dagger_update_runs_one_velocity_pass_per_sample():
    """RLinf's DAgger on the stand-in: a supervised flow-matching step per global batch, each
    micro-batch one prefix pass and one action-head step with grad (Backbone.sft_train_flops: NFT's
    pass without its no-grad twin); the loss falls on a fixed batch of expert chunks."""
    policy = make_policy("pi05", "tiny")
    batch = random_batch(policy, 16, image_size=32)
    calls = {"prefix": 0, "head": 0}
    policy.llm_norm.register_forward_hook(lambda *a: calls.__setitem__("prefix", calls["prefix"] + 1))
    policy.head_norm.register_forward_hook(lambda *a: calls.__setitem__("head", calls["head"] + 1))
    cfg = LearnerConfig(algorithm="dagger", update_epoch=1, micro_batch_size=4, global_batch_size=8, lr=1e-3)
    opt = make_optimizer(policy, cfg)
    metrics = grpo_update(policy, opt, batch, cfg)
    assert metrics["charts/optimizer_steps"] == 2 and metrics["charts/micro_batches"] == 4
    assert calls == {"prefix": 4, "head": 4}
    first = metrics["losses/policy"]
    for _ in range(5):
        metrics = grpo_update(policy, opt, batch, cfg)
    assert metrics["losses/policy"] < first


@pytest.mark.parametrize("algorithm", ["dagger", "opd"])
def test_the_rollout_runs_the_teacher_and_the_samples_carry_its_work(algorithm, monkeypatch):
    """DAgger's expert and OPD's teacher beside the student in the inference actor (RLinf's
    rollout.expert_model): DAgger's samples train on the expert's chunk (``target``), OPD's
    advantages are the teacher's log-probability of the student's chunk less the student's."""
    import numpy as np

    from executor.runtime.actors import InferenceActor
    from executor.runtime.driver import trajectory_samples

    import executor.runtime.actors as actors

    monkeypatch.setattr(actors, "_torch_threads", lambda n: None)  # this process keeps its threads and priority
    actor = InferenceActor("pi05", "tiny", "cpu", 0, 1, algorithm=algorithm)
    rng = np.random.default_rng(0)
    n = 2
    obs = {"images": rng.integers(0, 256, (n, actor.policy.backbone.images, 32, 32, 3), dtype=np.uint8),
           "state": rng.standard_normal((n, 9)).astype(np.float32), "language": ["pick up the bowl"] * n}
    out = actor.generate(obs)
    key = "target" if algorithm == "dagger" else "teacher_logprob"
    assert key in out and out[key].shape[0] == n
    steps = [{"obs": obs, "rewards": np.zeros(n, np.float32), "version": 0,
              **{k: out[k] for k in ("noise", "actions", "logprob", "value", key)}}]
    cfg = LearnerConfig(algorithm=algorithm, group_size=2 if algorithm == "opd" else 1)
    samples = trajectory_samples(cfg, steps)
    assert len(samples) == n
    if algorithm == "dagger":
        assert all(np.array_equal(s["actions"], out["target"][i]) for i, s in enumerate(samples))
        assert all(s["advantage"] == 0.0 for s in samples)
    else:
        want = out["teacher_logprob"] - out["logprob"]
        assert [s["advantage"] for s in samples] == pytest.approx(list(want), rel=1e-5)

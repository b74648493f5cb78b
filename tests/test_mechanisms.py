"""Issue 13 mechanisms: plan fields with cited defaults and the costs that grow with the cluster."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import run_cli
from perfmodel.bound import actor_iteration_s
from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.profile import Profile, load_profile
from perfmodel.simulate import simulate


def test_defaults_reproduce_the_published_setup():
    plan = published_plan(load_profile("pi05"), "streamer", 16, "1:1")
    assert plan.placement_strategy == "packed"  # RLinf packed placement
    assert plan.sharding_strategy == "full_shard"  # RL-VLA3 training_backend/fsdp.yaml
    assert plan.trained_part == "action_expert"  # RL-VLA3 model/pi0_5.yaml train_expert_only
    assert plan.enable_offload is False  # RL-VLA3 LIBERO configs
    assert plan.cluster.p2p is False  # RL-VLA3 scripts/run_libero.sh NCCL_P2P_DISABLE=1
    d = plan.to_dict()
    assert Plan.from_dict(d) == plan


@pytest.mark.parametrize("field,value", [("placement_strategy", "zigzag"), ("sharding_strategy", "hybrid"),
                                         ("trained_part", "vlm"), ("enable_offload", "yes")])
def test_bad_field_is_one_error_naming_it(field, value):
    d = published_plan(load_profile("pi05"), "streamer", 16, "1:1").to_dict()
    d[field] = value
    with pytest.raises(ConfigError) as e:
        Plan.from_dict(d)
    assert e.value.field == f"plan.{field}"


def test_sharding_strategy(scenario_dict):
    scenario_dict["costs"]["fsdp_gather_bytes"] = 3e9
    prof = Profile.from_dict(scenario_dict)
    full = StageCosts(published_plan(prof, "disaggregated", 8, "1:1"), prof)
    none = StageCosts(published_plan(prof, "disaggregated", 8, "1:1", sharding_strategy="no_shard"), prof)
    # full_shard: every micro-batch all-gathers (ring over 4 ranks at 100 GB/s with P2P)
    assert full.fsdp_gather_s() == pytest.approx(0.75 * 3e9 / 100e9)
    assert none.fsdp_gather_s() == 0.0
    # gradients: reduce-scatter (one pass) vs all-reduce (two passes); Adam on a 1/4 shard vs all
    assert full.allreduce_s() == pytest.approx(0.75 * 1e9 / 100e9)
    assert none.allreduce_s() == pytest.approx(2 * 0.75 * 1e9 / 100e9)
    assert full.optimizer_step_s() == pytest.approx(full.allreduce_s() + 0.3 / 4)
    assert none.optimizer_step_s() == pytest.approx(none.allreduce_s() + 0.3)


def test_p2p_off_sends_intra_node_collectives_through_host(scenario_dict):
    scenario_dict["node"].update(p2p=False, host_bw_GBps=5)
    prof = Profile.from_dict(scenario_dict)
    c = StageCosts(published_plan(prof, "disaggregated", 8, "1:1"), prof)
    assert c.allreduce_s() == pytest.approx(0.75 * 1e9 / 5e9)


def test_trained_part_scales_from_the_shapes():
    pi05 = load_profile("pi05")
    expert = StageCosts(published_plan(pi05, "disaggregated", 8, "1:1"), pi05)
    full = StageCosts(published_plan(pi05, "disaggregated", 8, "1:1", trained_part="full"), pi05)
    parts = pi05.costs.trained_parts
    assert parts["full"]["trained_bytes_scale"] > 5  # the expert is ~0.3B of ~3.2B parameters
    assert full.grad_bytes() == pytest.approx(expert.grad_bytes() * parts["full"]["trained_bytes_scale"])
    assert full.train_compute_s(64) > expert.train_compute_s(64)
    assert full.fsdp_gather_s() > expert.fsdp_gather_s()


def test_gpu_efficiency_saturates_with_the_per_rank_batch():
    pi05 = load_profile("pi05")
    c = StageCosts(published_plan(pi05, "disaggregated", 8, "1:1"), pi05)
    per_sample = [c.train_compute_s(b) / b for b in (8, 32, 128)]
    assert per_sample[0] > per_sample[1] > per_sample[2] > c.profile.costs.train_micro_batch_s.slope


def test_optimizer_steps_grow_with_the_env_count():
    """Fixed global batch: twice the envs give twice the optimizer steps, so the actor's time per
    sample grows from 8 to 16 GPUs even though each rank's micro-batches stay the same."""
    pi05 = load_profile("pi05")
    per_sample = []
    for gpus in (8, 16):
        plan = published_plan(pi05, "disaggregated", gpus, "1:1")
        per_sample.append(actor_iteration_s(StageCosts(plan, pi05)) * plan.actor_gpus
                          / plan.workload.samples_per_iteration)
    assert per_sample[1] > per_sample[0]


def test_weight_sync_crosses_nodes_with_packed_placement(scenario_profile):
    one = StageCosts(published_plan(scenario_profile, "disaggregated", 8, "1:1"), scenario_profile)
    two = StageCosts(published_plan(scenario_profile, "disaggregated", 16, "1:1"), scenario_profile)
    assert one.weight_sync_s() == pytest.approx(1e-0 * 2e9 / 100e9, rel=1e-3)  # inside the node
    assert two.weight_sync_s() == pytest.approx(2e9 / 10e9, rel=1e-3)  # actor node -> rollout node


def test_colocated_without_offload_must_fit_gpu_memory():
    pi05 = load_profile("pi05")
    c = pi05.costs
    ok = published_plan(pi05, "colocated", 8, None)
    part = c.trained_parts["action_expert"]
    # full_shard state over 8 ranks + the generator's weights + the larger phase's activations:
    # a training micro-batch of 128 per rank (measured GB per sample) against a call of 48 envs
    expect = part["train_state_gb"] / 8 + c.weights_gb + max(c.infer_activation_gb_per_sample * 48,
                                                             part["train_activation_gb_per_sample"] * 128)
    assert StageCosts(ok, pi05).gpu_memory_gb() == pytest.approx(expect)
    assert 0 < expect < ok.cluster.gpu_memory_gb
    big = published_plan(pi05, "colocated", 8, None, trained_part="full", sharding_strategy="no_shard")
    big = big.with_(workload=big.workload.__class__(**{**big.workload.__dict__, "micro_batch_size": 1}))
    small_gpu = big.with_(cluster=big.cluster.__class__(**{**big.cluster.__dict__, "gpu_memory_gb": 62.0}))
    with pytest.raises(ConfigError) as e:
        simulate(small_gpu, pi05, iterations=2, warmup=1)
    assert e.value.field == "plan.enable_offload"
    # With offload the generator's weights leave the GPU during training and it fits.
    assert StageCosts(small_gpu.with_(enable_offload=True), pi05).gpu_memory_gb() < 62


def test_a_micro_batch_must_fit_with_its_activations():
    """Training every pi0.5 weight at the published micro-batch of 128 per rank: the models fit an
    H100, the measured activations (2.5 GB per sample; an H200 ran out at 64) do not."""
    pi05 = load_profile("pi05")
    plan = published_plan(pi05, "disaggregated", 16, "1:1", trained_part="full")
    costs = StageCosts(plan, pi05)
    assert costs.gpu_memory_gb(activations=False) < 80 < costs.gpu_memory_gb()
    with pytest.raises(ConfigError, match="plan.workload.micro_batch_size: .* training micro-batch of 128 samples per rank"):
        simulate(plan, pi05, iterations=2, warmup=1)
    w = plan.workload
    small = plan.with_(workload=w.__class__(**{**w.__dict__, "micro_batch_size": 16}))
    assert StageCosts(small, pi05).gpu_memory_gb() < 80
    # a part whose activations were not measured counts the measured part's as a floor, said so
    g = load_profile("gr00t_n15")
    parts = dict(g.costs.trained_parts)
    parts["full"] = {k: v for k, v in parts["full"].items() if k != "train_activation_gb_per_sample"}
    g = replace(g, costs=replace(g.costs, trained_parts=parts))
    gc = StageCosts(published_plan(g, "colocated", 8, None, trained_part="full"), g)
    assert gc.activation_gb()[1] == pytest.approx(g.costs.trained_parts["action_expert"]["train_activation_gb_per_sample"] * 128)
    assert any("training activations of full are not measured" in w for w in gc.warnings)


def test_memory_refusal_is_one_line_exit_2(tmp_path):
    import json

    pi05 = load_profile("pi05")
    plan = published_plan(pi05, "colocated", 8, None, trained_part="full", sharding_strategy="no_shard")
    d = plan.to_dict()
    d["cluster"]["gpu_memory_gb"] = 62.0
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    r = run_cli("predict", "--plan", str(path), "--backbone", "pi05")
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: plan.enable_offload:") and len(r.stderr.strip().splitlines()) == 1


def test_policy_host_work_runs_on_the_env_cores(scenario_dict):
    """Costs.obs_cpu_s: the policy's host work per observation is CPU work on the env worker's
    cores beside the chunk's env steps. Disaggregated 1:1 on 2 GPUs, 16 envs on 2 cores:
    chunk = (5 steps x 0.1 + 0.5) x 16 / 2 = 8 s; reset and inference unchanged."""
    scenario_dict["node"]["cpu_cores_per_node"] = 4
    scenario_dict["node"]["gpus_per_node"] = 2  # the 2-GPU plan has the node to itself (a plan on part of a node gets that part of its cores)
    scenario_dict["costs"]["obs_cpu_s"] = 0.5
    prof = Profile.from_dict(scenario_dict)
    assert prof.to_dict()["costs"]["obs_cpu_s"] == 0.5
    plan = published_plan(prof, "disaggregated", 2, "1:1")
    c = StageCosts(plan, prof)
    assert c.env_chunk_s(16) == pytest.approx(8.0)
    res = simulate(plan, prof, iterations=2, warmup=1, trace=True)
    spans = [(s[0], round(s[3], 9), round(s[4], 9)) for s in res.recorder.spans
             if s[1] in ("env_worker_0", "rollout_gpu_0")][:5]
    assert spans == [("env_reset", 0.0, 4.0), ("inference", 4.0, 5.0), ("env_step", 5.0, 13.0),
                     ("inference", 13.0, 14.0), ("env_step", 14.0, 22.0)]
    # It goes with the env steps when env costs are scaled (a CPU share, an uncertainty).
    assert prof.costs.env_scaled(2.0, 1.0).obs_cpu_s == 1.0


def test_env_cpu_share_stretches_the_env_stages_of_its_mode(scenario_dict):
    """Costs.env_cpu_share (issue 30): in a disaggregated run the env processes got half their
    cores for steps and 0.8 for resets (the driver, Ray and the actors took the rest). The same
    scenario as the host-work test without it: chunk = 5 x 0.1 x 16 / 2 / 0.5 = 8 s, reset =
    0.5 x 16 / 2 / 0.8 = 5 s; inference unchanged; the CPU seconds the model compares with a
    run's are not; a mode the run did not measure keeps a share of 1."""
    scenario_dict["node"]["cpu_cores_per_node"] = 4
    scenario_dict["node"]["gpus_per_node"] = 2
    scenario_dict["costs"]["env_cpu_share"] = {"disaggregated": {"env_step": 0.5, "env_reset": 0.8}}
    prof = Profile.from_dict(scenario_dict)
    assert prof.to_dict()["costs"]["env_cpu_share"] == {"disaggregated": {"env_step": 0.5, "env_reset": 0.8}}
    plan = published_plan(prof, "disaggregated", 2, "1:1")
    c = StageCosts(plan, prof)
    assert c.env_chunk_s(16) == pytest.approx(8.0) and c.env_reset_s(16) == pytest.approx(5.0)
    assert c.env_cpu_s("step_lockstep", 16) == pytest.approx(0.1)
    res = simulate(plan, prof, iterations=2, warmup=1, trace=True)
    spans = [(s[0], round(s[3], 9), round(s[4], 9)) for s in res.recorder.spans
             if s[1] in ("env_worker_0", "rollout_gpu_0")][:5]
    assert spans == [("env_reset", 0.0, 5.0), ("inference", 5.0, 6.0), ("env_step", 6.0, 14.0),
                     ("inference", 14.0, 15.0), ("env_step", 15.0, 23.0)]
    other = StageCosts(published_plan(prof, "train_async", 2, "1:1"), prof)
    assert other.env_chunk_s(16) == pytest.approx(4.0) and other.env_reset_s(16) == pytest.approx(4.0)


@pytest.mark.parametrize("share,field", [({"streamr": {"env_step": 0.5, "env_reset": 0.5}}, "streamr"),
                                         ({"colocated": {"env_step": 0.5}}, "colocated"),
                                         ({"colocated": {"env_step": 0.0, "env_reset": 1.0}}, "colocated.env_step"),
                                         ({"colocated": {"env_step": 1.2, "env_reset": 1.0}}, "colocated.env_step")])
def test_env_cpu_share_field_refusals(scenario_dict, share, field):
    scenario_dict["costs"]["env_cpu_share"] = share
    with pytest.raises(ConfigError) as e:
        Profile.from_dict(scenario_dict)
    assert e.value.field == f"profile.costs.env_cpu_share.{field}"


def test_policy_host_work_field(scenario_dict):
    assert Profile.from_dict(scenario_dict).costs.obs_cpu_s == 0.0  # absent: none
    assert "obs_cpu_s" not in Profile.from_dict(scenario_dict).to_dict()["costs"]
    scenario_dict["costs"]["obs_cpu_s"] = -0.1
    with pytest.raises(ConfigError) as e:
        Profile.from_dict(scenario_dict)
    assert e.value.field == "profile.costs.obs_cpu_s"


def test_cpu_bound_async_rollout_grows_with_the_env_cores(scenario_dict):
    """Why the host work sits on the env cores: with dynamic batching and the GPU idle enough, the
    rollout is CPU-bound, so its throughput follows the env cores (as the published asynchronous
    modes grow with them from 8 to 16 GPUs) whatever the policy's share of that CPU work."""
    scenario_dict["costs"]["obs_cpu_s"] = 0.5
    scenario_dict["costs"]["infer_s"] = {"model": "linear", "intercept": 0.01, "slope": 0.001}
    scenario_dict["costs"]["train_micro_batch_s"] = {"model": "linear", "intercept": 0.001, "slope": 0.0001}
    rates = []
    for cores in (16, 24):
        scenario_dict["node"]["cpu_cores_per_node"] = cores
        prof = Profile.from_dict(scenario_dict)
        rates.append(simulate(published_plan(prof, "rollout_async", 8, "1:1"), prof).throughput_env_steps_per_s)
    assert rates[1] / rates[0] == pytest.approx((24 - 4 * 2) / (16 - 4 * 2), rel=0.05)
    # ... and the host work is CPU work there: per env and epoch, a 0.5 s reset and 4 chunks of
    # 5 steps x 0.1 s, plus 0.5 s of host work per chunk with it.
    scenario_dict["costs"]["obs_cpu_s"] = 0.0
    prof = Profile.from_dict(scenario_dict)
    without = simulate(published_plan(prof, "rollout_async", 8, "1:1"), prof).throughput_env_steps_per_s
    assert rates[1] / without == pytest.approx((0.5 + 4 * 0.5) / (0.5 + 4 * 1.0), rel=0.02)


@pytest.mark.parametrize("backbone", ["pi05", "gr00t_n15"])
def test_intervals_stay_usable_at_the_calibrated_points(backbone):
    """The linearised interval must not blow up where a simulated dynamic-batching rollout jumps
    for a tiny parameter step (perfmodel.calibration.uncertainty._direction_sensitivities): the
    refit with a loosely pinned GR00T obs_cpu_s once gave a 526 % wide interval at 8 GPUs."""
    from perfmodel.prediction import predict

    prof = load_profile(backbone)
    for gpus in (8, 16):
        for mode in ("colocated", "disaggregated", "train_async", "rollout_async", "streamer"):
            res = predict(published_plan(prof, mode, gpus, "1:1"), prof)
            # (the 30-point fit's residual scatter alone, z s = +-16.6 %, makes 33 %; pi0.5 reaches 47 % at
            # 16 GPUs rollout_async with the intake member; the blow-up this catches was 526 %)
            assert res["throughput_interval"]["width_pct"] < 60, (mode, gpus)


def _first_spans(res, n: int = 16) -> list[tuple]:
    spans = [(s[0], s[2], round(s[3], 9), round(s[4], 9)) for s in res.recorder.spans
             if s[1] in ("env_worker_0", "rollout_gpu_0")]
    return sorted(spans, key=lambda x: (x[2], x[1]))[:n]


def test_inference_host_latency_leaves_the_gpu_to_other_calls(scenario_dict):
    """Costs.infer_latency_s: the host-path part of a call does not hold the GPU. Dynamic batching,
    one rollout GPU, 4 groups of 4 envs on 16 cores, batches of one group (b_max 4): a call is
    0.2 s + 0.05 s x 4 = 0.4 s, a chunk step 5 x 0.1 = 0.5 s. With 0.2 s of it host latency the
    four first calls wait their latency together (0.5-0.7 s) and then take the GPU 0.2 s each;
    without it each call holds the GPU its whole 0.4 s, so the groups queue twice as long."""
    scenario_dict["node"]["actor_cpu_cores_per_gpu"] = 0
    scenario_dict["node"]["gpus_per_node"] = 2  # the 2-GPU plan has the node (its 16 cores) to itself
    got = {}
    for latency in (0.0, 0.2):
        scenario_dict["costs"]["infer_latency_s"] = latency
        prof = Profile.from_dict(scenario_dict)
        plan = published_plan(prof, "rollout_async", 2, "1:1", b_max=4)
        got[latency] = simulate(plan, prof, iterations=2, warmup=1, trace=True)
    # the groups start a quarter chunk step (0.125 s) apart (EnvWorker._group): their first
    # requests arrive 0.125 s apart, each behind the previous call's GPU time all the same
    resets = [("env_reset", f"group_{g}", 0.125 * g, 0.125 * g + 0.5) for g in range(4)]
    assert _first_spans(got[0.2]) == resets + [
        ("inference", "inference", 0.7, 0.9), ("env_step", "group_0", 0.9, 1.4),
        ("inference", "inference", 0.9, 1.1), ("env_step", "group_1", 1.1, 1.6),
        ("inference", "inference", 1.1, 1.3), ("env_step", "group_2", 1.3, 1.8),
        ("inference", "inference", 1.3, 1.5), ("env_step", "group_3", 1.5, 2.0),
        # group 0 asks again at 1.4, waits its latency to 1.6, and finds the GPU free
        ("inference", "inference", 1.6, 1.8), ("env_step", "group_0", 1.8, 2.3),
        ("inference", "inference", 1.8, 2.0), ("env_step", "group_1", 2.0, 2.5)]
    assert _first_spans(got[0.0]) == resets + [
        ("inference", "inference", 0.5, 0.9), ("env_step", "group_0", 0.9, 1.4),
        ("inference", "inference", 0.9, 1.3), ("env_step", "group_1", 1.3, 1.8),
        ("inference", "inference", 1.3, 1.7), ("env_step", "group_2", 1.7, 2.2),
        ("inference", "inference", 1.7, 2.1), ("env_step", "group_3", 2.1, 2.6),
        ("inference", "inference", 2.1, 2.5), ("env_step", "group_0", 2.5, 3.0),
        ("inference", "inference", 2.5, 2.9), ("env_step", "group_1", 2.9, 3.4)]
    assert got[0.2].throughput_env_steps_per_s > got[0.0].throughput_env_steps_per_s
    # In lock-step the latency waits in series like the rest of the call: nothing changes but
    # where the GPU span starts.
    lock = {}
    for latency in (0.0, 0.2):
        scenario_dict["costs"]["infer_latency_s"] = latency
        prof = Profile.from_dict(scenario_dict)
        lock[latency] = simulate(published_plan(prof, "disaggregated", 2, "1:1"), prof, iterations=2, warmup=1,
                                 trace=True)
    assert lock[0.2].throughput_env_steps_per_s == pytest.approx(lock[0.0].throughput_env_steps_per_s, rel=1e-12)
    first = [s for s in _first_spans(lock[0.2]) if s[0] == "inference"][0]
    assert first[2:] == (0.5 + 0.2, 0.5 + 0.2 + 0.05 * 16)  # 16 envs: 0.2 s host, then 0.8 s on the GPU


def test_inference_latency_field_and_the_gpu_part(scenario_dict):
    from perfmodel.bound import bound
    from perfmodel.gpu import profile_on

    prof = Profile.from_dict(scenario_dict)
    assert prof.costs.infer_latency_s == 0.0 and "infer_latency_s" not in prof.to_dict()["costs"]
    for bad in (-0.1, 0.3):  # negative; more than a whole call of one env (0.25 s)
        scenario_dict["costs"]["infer_latency_s"] = bad
        with pytest.raises(ConfigError) as e:
            Profile.from_dict(scenario_dict)
        assert e.value.field == "profile.costs.infer_latency_s"
    scenario_dict["costs"]["infer_latency_s"] = 0.2
    prof = Profile.from_dict(scenario_dict)
    plan = published_plan(prof, "rollout_async", 2, "1:1")
    c = StageCosts(plan, prof)
    assert c.infer_s(4) == pytest.approx(0.4) and c.infer_gpu_s(4) == pytest.approx(0.2)
    # The bound's inference time is GPU time only: 0.05 s per sample here.
    w = plan.workload
    samples = plan.envs_per_worker * w.chunk_steps_per_epoch * w.rollout_epoch
    assert bound(c).inference_s == pytest.approx(samples * 0.05)
    # Another GPU scales the GPU part of a call, not the host path.
    other = profile_on(load_profile("pi05"), "a100")
    base = load_profile("pi05").costs
    lat = base.infer_latency_s
    assert lat > 0 and other.costs.infer_latency_s == lat
    ratio = (other.costs.infer_s(8) - lat) / (base.infer_s(8) - lat)
    assert ratio > 1 and other.costs.infer_s.intercept == pytest.approx(lat)  # the fixed part is all host


@pytest.mark.parametrize("mode", ["rollout_async", "disaggregated"])
@pytest.mark.parametrize("b_max, t_max", [(4, 0.05), (16, 0.3), (40, 0.3), (None, 0.05)])
def test_a_vanishing_latency_is_no_latency(scenario_dict, mode, b_max, t_max):
    """The host-path latency enters continuously: a request in transit for a nanosecond gives
    the timeline of none, however the batches form (a first version let every batch go its own
    way once any latency was set, and jumped by 21 %)."""
    scenario_dict["costs"]["env_step_core_s"] = 0.03
    knobs = {"b_max": b_max, "t_max_s": t_max} if mode == "rollout_async" else {}
    thr = {}
    for latency in (0.0, 1e-9):
        scenario_dict["costs"]["infer_latency_s"] = latency
        prof = Profile.from_dict(scenario_dict)
        thr[latency] = simulate(published_plan(prof, mode, 8, "1:1", **knobs), prof).throughput_env_steps_per_s
    assert thr[1e-9] == pytest.approx(thr[0.0], rel=1e-6)


# -- train_async with actor and rollout on the same GPUs (allocation_ratio null; issue 31) ----------

def _shared_scenario(scenario_dict) -> tuple[Plan, Profile]:
    """One GPU, train_async on shared GPUs: 2 envs in one lock-step group on the GPU's 2 cores
    (16 cores / 8 GPUs), 2 chunk steps of 5 env steps per epoch, one epoch; 4 samples an
    iteration trained in one global batch of 2 micro-batches (one rank)."""
    from perfmodel.calibration.reference import default_cluster
    from perfmodel.schema.plan import Workload

    scenario_dict["costs"]["env_reset_s"] = 0.1
    prof = Profile.from_dict(scenario_dict)
    w = Workload(total_num_envs=2, max_episode_steps=10, num_action_chunks=5, rollout_epoch=1, update_epoch=1,
                 micro_batch_size=2, global_batch_size=4)
    plan = Plan("train_async", w, default_cluster(prof, 1), profile="scenario", allocation_ratio=None, max_staleness=1)
    plan.check()
    return plan, prof


def test_shared_gpus_take_training_and_inference_in_turn(scenario_dict):
    """Costs by hand: reset 0.1 s; an inference call of 2 envs 0.2 + 0.05 x 2 = 0.3 s; a chunk step
    5 x 0.1 = 0.5 s (each env on a core of its own); a micro-batch of 2 samples 0.1 + 0.02 x 2 =
    0.14 s; an optimizer step 0.3 s (one rank: no all-reduce). Iteration 0's rollout ends at 1.7;
    with staleness 1 iteration 1 starts at once (reset 1.7-1.8) while the trainer takes the GPU for
    its first micro-batch (1.7-1.84). The inference call asked for at 1.8 waits for it (1.84-2.14);
    the second micro-batch, asked for at 1.84 behind the call, waits for the call (2.14-2.28), and
    the optimizer step follows (2.28-2.58): version 1. Iteration 2 needs version 1 and starts when
    iteration 1's rollout ends (3.44); its call at 3.54 waits for the first micro-batch (3.44-3.58);
    the trainer's optimizer step (4.02-4.32) then waits for nothing. Iteration 3's rollout (5.18)
    overlaps the trainer's last iteration as iteration 1's did the first."""
    plan, prof = _shared_scenario(scenario_dict)
    assert (plan.mechanisms.disaggregated, plan.placement.colocated, plan.split) == (False, True, (1, 1))
    c = StageCosts(plan, prof)
    assert (c.env_reset_s(2), c.infer_gpu_s(2), c.env_chunk_s(2, True), c.micro_batch_s(2), c.optimizer_step_s()) \
        == pytest.approx((0.1, 0.3, 0.5, 0.14, 0.3))
    assert c.weight_sync_s() == 0.0 and c.phase_switch_s() == 0.0  # weights in place; no phases to swap
    got = {}
    for collapse in (True, False):  # no block collapses here: the same events either way
        res = simulate(plan, prof, iterations=3, warmup=1, trace=True, collapse=collapse)
        got[collapse] = [(s[0], round(s[3], 9), round(s[4], 9)) for s in res.recorder.spans
                         if s[0] != "weight_sync"]
    assert got[True] == got[False]
    spans = sorted(got[True], key=lambda s: (s[1], s[0]))
    assert spans == [
        ("env_reset", 0.0, 0.1), ("inference", 0.1, 0.4), ("env_step", 0.4, 0.9),
        ("inference", 0.9, 1.2), ("env_step", 1.2, 1.7),
        ("env_reset", 1.7, 1.8), ("train", 1.7, 1.84),
        ("inference", 1.84, 2.14),  # waited 1.8-1.84 for the micro-batch
        ("env_step", 2.14, 2.64), ("train", 2.14, 2.28),  # the micro-batch waited 1.84-2.14 for the call
        ("optimizer_step", 2.28, 2.58),
        ("inference", 2.64, 2.94), ("env_step", 2.94, 3.44),
        ("env_reset", 3.44, 3.54), ("train", 3.44, 3.58),
        ("inference", 3.58, 3.88),  # waited 3.54-3.58
        ("env_step", 3.88, 4.38), ("train", 3.88, 4.02), ("optimizer_step", 4.02, 4.32),
        ("inference", 4.38, 4.68), ("env_step", 4.68, 5.18),
        # the rollout goes on past the trainer's last iteration (perfmodel.simulate), so that one
        # shares the GPU too: its first micro-batch (5.18-5.32) delays the call asked for at 5.28
        ("env_reset", 5.18, 5.28), ("train", 5.18, 5.32), ("inference", 5.32, 5.62),
        ("train", 5.62, 5.76), ("optimizer_step", 5.76, 6.06)]
    # versions published at 2.58, 4.32, 6.06: the window after the warm-up iteration is 2.58-6.06
    assert res.iteration_time_s == pytest.approx((6.06 - 2.58) / 2)


def test_shared_gpus_prediction_lies_between_colocated_and_the_bound():
    """train_async on shared GPUs, pi0.5 at the published 8 and 16 GPUs. By construction: no faster
    than its bound, where each GPU's inference and training add up; and no slower than colocated
    on the same GPUs without offload, whose iteration is the rollout then the training: with
    staleness 1 the rollout of iteration k+1 only waits for the GPU units of iteration k's training
    (at most all of it), and training k ends within that rollout plus k's training."""
    from perfmodel.bound import bound

    pi05 = load_profile("pi05")
    for gpus in (8, 16):
        col = published_plan(pi05, "colocated", gpus, None)
        shared = published_plan(pi05, "train_async", gpus, None).with_(allocation_ratio=None)
        shared.check()
        b = bound(StageCosts(shared, pi05))
        assert b.bottleneck in ("env", "inference+actor")
        assert b.iteration_s == pytest.approx(max(b.env_s, b.inference_s + b.actor_s))
        got = simulate(shared, pi05).throughput_env_steps_per_s
        assert simulate(col, pi05).throughput_env_steps_per_s < got <= b.throughput_env_steps_per_s


def test_shared_gpus_hold_both_models_and_both_activations():
    """Colocated without offload holds the larger phase's activations; on shared GPUs a training
    micro-batch and an inference call can run at once (two processes), so both count."""
    pi05 = load_profile("pi05")
    col = StageCosts(published_plan(pi05, "colocated", 8, None), pi05)
    shared_plan = published_plan(pi05, "train_async", 8, None).with_(allocation_ratio=None)
    shared = StageCosts(shared_plan, pi05)
    infer_act, train_act = shared.activation_gb()
    assert infer_act > 0 and train_act > 0
    assert shared.gpu_memory_gb() == pytest.approx(col.gpu_memory_gb() + min(infer_act, train_act))
    # a GPU between the two needs: colocated fits, the shared plan's activations do not
    between = (col.gpu_memory_gb() + shared.gpu_memory_gb()) / 2
    for plan in (col.plan, shared_plan):
        plan = plan.with_(cluster=plan.cluster.__class__(**{**plan.cluster.__dict__, "gpu_memory_gb": between}))
        if plan.mode == "colocated":
            StageCosts(plan, pi05).check_gpu_memory()
            continue
        with pytest.raises(ConfigError) as e:
            StageCosts(plan, pi05).check_gpu_memory()
        assert e.value.field == "plan.workload.micro_batch_size"
    # a GPU too small for the two models themselves: the refusal names what helps there, a split
    # (offload, which colocated would be told to use, is refused on shared GPUs)
    tiny = shared_plan.with_(cluster=shared_plan.cluster.__class__(**{**shared_plan.cluster.__dict__, "gpu_memory_gb": 4}))
    with pytest.raises(ConfigError) as e:
        StageCosts(tiny, pi05).check_gpu_memory()
    assert e.value.field == "plan.allocation_ratio" and "1:1" in str(e.value)


@pytest.mark.parametrize("change, field", [
    ({"mode": "streamer", "allocation_ratio": None}, "plan.allocation_ratio"),
    ({"mode": "rollout_async", "allocation_ratio": None, "enable_offload": True}, "plan.enable_offload"),
    # the plan's rollout: train_async with the per-env asynchronous rollout is rollout_async
    ({"rollout": "per_env_async"}, "plan.rollout"),
    ({"mode": "rollout_async", "rollout": "lockstep"}, "plan.rollout"),
    ({"mode": "colocated", "allocation_ratio": None, "rollout": "free"}, "plan.rollout"),
    ({"mode": "train_async", "allocation_ratio": None, "enable_offload": True}, "plan.enable_offload"),
])
def test_shared_gpus_bad_combinations_are_one_line_errors(tmp_path, change, field):
    import json

    d = published_plan(load_profile("pi05"), "train_async", 8, "1:1").to_dict()
    d.update(change)
    with pytest.raises(ConfigError) as e:
        Plan.from_dict(d)
    assert e.value.field == field and "\n" not in str(e.value)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(d))
    r = run_cli("predict", "--plan", str(path), "--no-interval")
    assert r.returncode == 2 and r.stderr.startswith(f"error: {field}:") and r.stderr.strip().count("\n") == 0

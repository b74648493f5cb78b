"""The node a user describes (issue 32): --cpu-cores-per-node, --gpus-per-node, --nic-gbps,
--node-ram-gb on predict, plan and sweep and in an RLinf config's vlaperf: block, the assumed values
said when not given; and more of a resource never predicts less."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from perfmodel.calibration.reference import published_plan
from perfmodel.costs import StageCosts
from perfmodel.rlinf.importer import load_rlinf
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import load_profile
from perfmodel.simulate import check_fits, simulate
from tests.conftest import run_cli
from tests.test_rlinf import REFERENCE, write_config

PI05_CONFIG = REFERENCE / "libero_10_ppo_openpi_pi05.yaml"


def _throughput(plan, profile) -> float | None:
    """The simulated throughput, or None where the plan does not fit its node."""
    try:
        plan.check()
        check_fits(plan, StageCosts(plan, profile))
    except ConfigError:
        return None
    return simulate(plan, profile).throughput_env_steps_per_s


# Cluster field -> (least, most, whole number): more of each never predicts less.
RESOURCES = {"cpu_cores_per_node": (16, 256, True), "inter_node_bw_GBps": (2.0, 100.0, False),
             "intra_node_bw_GBps": (10.0, 900.0, False), "host_bw_GBps": (2.0, 64.0, False),
             "node_ram_gb": (64.0, 4096.0, False), "gpu_memory_gb": (24.0, 192.0, False)}


def _value(resource: str, u: float) -> float:
    lo, hi, whole = RESOURCES[resource]
    v = lo + u * (hi - lo)
    return round(v) if whole else v


def side_by_side(plan, profile) -> int:
    """How many of an env worker's groups step at once: its cores go to them in whole blocks
    (perfmodel/sim/workers.py EnvWorker: a group takes min(its envs, the worker's cores) cores)."""
    c = StageCosts(plan, profile)
    group = c.env_cores_used(plan.placement.envs_per_group)
    return min(plan.placement.env_groups, int(c.cores_per_worker // group + 1e-9))


# The one place where more of a resource may predict less (docs/metrics.md, "Where more of a
# resource predicts less"): more CPU cores that change how many of a worker's env groups step side
# by side. There the rollout's phases shift; the loss is bounded by MAX_PACKING_LOSS. Anywhere
# else, and for every other resource, more never predicts less.
MAX_PACKING_LOSS = 0.10
SEEDS = range(5)
CASES_PER_SEED = 8
BACKBONES = ["pi05", "gr00t_n15"]
MODE_NAMES = ["colocated", "disaggregated", "train_async", "rollout_async", "streamer"]
RATIOS = ["1:1", "3:1", "1:3"]
ENVS_PER_GPU = [4, 6, 8, 12, 16, 24, 48]


def _plan(backbone: str, mode: str, ratio: str, envs_per_gpu: int):
    profile = load_profile(backbone)
    gpus = 32
    plan = published_plan(profile, mode, gpus, None if mode == "colocated" else "1:1")
    if mode != "colocated":
        plan = plan.with_(allocation_ratio=ratio)
    return plan.with_(workload=replace(plan.workload, total_num_envs=envs_per_gpu * gpus)), profile


def more_predicts_less(backbone, mode, ratio, envs_per_gpu, resource, a, b) -> tuple[float, float, bool] | None:
    """(throughput with less, with more, whether the packing of env groups changes between
    them), or None where the plan does not fit with less."""
    plan, profile = _plan(backbone, mode, ratio, envs_per_gpu)
    lo_plan = plan.with_(cluster=replace(plan.cluster, **{resource: a}))
    hi_plan = plan.with_(cluster=replace(plan.cluster, **{resource: b}))
    low = _throughput(lo_plan, profile)
    if low is None:
        return None
    high = _throughput(hi_plan, profile)
    assert high is not None, f"{resource} {a} -> {b} made the plan not fit"
    return low, high, side_by_side(lo_plan, profile) != side_by_side(hi_plan, profile)


@pytest.mark.parametrize("seed", SEEDS)
def test_more_of_a_resource_never_predicts_less(seed) -> None:
    """The property over random cases, several seeds (issue 41 item 10): more of a resource never
    predicts less, except where more cores change how many env groups step side by side (then
    within MAX_PACKING_LOSS). Each seed draws its own CASES_PER_SEED cases; a failure names them."""
    rng = random.Random(seed)
    checked = 0
    for _ in range(CASES_PER_SEED):
        case = (rng.choice(BACKBONES), rng.choice(MODE_NAMES), rng.choice(RATIOS), rng.choice(ENVS_PER_GPU))
        resource = rng.choice(sorted(RESOURCES))
        a, b = sorted((_value(resource, rng.random()), _value(resource, rng.random())))
        if a >= b:
            continue
        got = more_predicts_less(*case, resource, a, b)
        if got is None:
            continue
        low, high, packing = got
        checked += 1
        what = f"seed {seed}: {case} {resource} {a} -> {b}: {low:.2f} -> {high:.2f} env steps/s"
        if high >= low * (1 - 1e-9):
            continue
        assert resource == "cpu_cores_per_node" and packing, f"more predicts less outside the packing step: {what}"
        assert high >= low * (1 - MAX_PACKING_LOSS), f"the packing step loses more than {MAX_PACKING_LOSS:.0%}: {what}"
    assert checked >= CASES_PER_SEED // 2


def test_the_doc_states_the_bound_the_property_test_holds() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    section = text.split("## Where more of a resource predicts less", 1)[1].split("\n## ", 1)[0]
    assert f"at most {100 * MAX_PACKING_LOSS:.0f} %" in section and "tests/test_node.py" in section


# issue 32's case (96 -> 128 cores lost 9 % before the groups were staggered), and two more the
# in-phase groups lost at (6 envs per GPU: 96 -> 112 cores; 12: 176 -> 192): no loss at all now
@pytest.mark.parametrize("backbone,mode,ratio,envs_per_gpu,a,b", [
    ("pi05", "rollout_async", "1:1", 8, 96, 128), ("pi05", "streamer", "1:1", 6, 96, 112),
    ("pi05", "rollout_async", "1:3", 6, 176, 192)])
def test_the_in_phase_cases_no_longer_lose(backbone, mode, ratio, envs_per_gpu, a, b) -> None:
    low, high, _ = more_predicts_less(backbone, mode, ratio, envs_per_gpu, "cpu_cores_per_node", a, b)
    assert high >= low * (1 - 1e-9), f"{low:.2f} -> {high:.2f}"


def test_the_known_case_is_a_packing_step_within_its_bound() -> None:
    """gr00t_n15, rollout_async 1:1 on 32 GPUs at 16 envs per GPU, 4 groups of 8 envs on each
    worker: from 184 to 192 cores a node (23 -> 24 cores a worker) a third group's 8 cores fit
    beside two others. The property test found it losing 4.6 % on the profiles fitted to 16
    points; it is the documented packing step (docs/metrics.md), so it loses at most
    MAX_PACKING_LOSS."""
    low, high, packing = more_predicts_less("gr00t_n15", "rollout_async", "1:1", 16, "cpu_cores_per_node", 184, 192)
    assert packing
    assert high >= low * (1 - MAX_PACKING_LOSS), f"{low:.2f} -> {high:.2f}"


@pytest.mark.skipif(not PI05_CONFIG.is_file(), reason="the reference RLinf configs are not beside the checkout")
def test_config_at_32_gpus_does_not_lose_throughput_as_cores_grow() -> None:
    """Issue 32's case: 637 env steps/s at 96-120 cores, 582 at 128-160, when rollout_async's env
    groups started in phase and ample cores kept them so (perfmodel/sim/workers.py EnvWorker._group)."""
    im = load_rlinf(PI05_CONFIG, mode="rollout_async")
    profile = load_profile(im.plan.profile)
    plan = im.plan.with_(cluster=replace(im.plan.cluster, gpus=32),
                         workload=replace(im.plan.workload, total_num_envs=256))
    seq = [_throughput(plan.with_(cluster=replace(plan.cluster, cpu_cores_per_node=c)), profile)
           for c in range(64, 161, 16)]
    assert all(t is not None for t in seq)
    assert all(b >= a * (1 - 1e-9) for a, b in zip(seq, seq[1:])), seq
    # the in-phase schedule left the rollout GPUs idle while every group stepped: the staggered
    # one at 128 cores beats the old 582 (measured here: 666)
    assert seq[4] > 600


def test_dynamic_groups_start_spread_over_a_chunk_step() -> None:
    """The mechanism itself: with cores to spare, the groups' first env steps do not start together."""
    profile = load_profile("pi05")
    plan = published_plan(profile, "rollout_async", 8, "1:1")
    plan = plan.with_(workload=replace(plan.workload, total_num_envs=32, rollout_epoch=1),
                      cluster=replace(plan.cluster, cpu_cores_per_node=256))
    r = simulate(plan, profile, trace=True, iterations=2, warmup=1)
    # the first iteration's resets, one a group
    first = sorted(s for s, _, _ in r.recorder.busy["env_reset"])[:plan.placement.env_groups]
    assert plan.placement.env_groups == 4 and len({round(s, 9) for s in first}) == 4


def test_options_reach_the_plan_and_assumed_values_are_said(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, placement="    actor: 0-3\n    env,rollout: 4-7",
                       extra_algorithm="  staleness_threshold: 1", extra="vlaperf:\n  cpu_cores_per_node: 96\n")
    im = load_rlinf(cfg)
    assert im.plan.cluster.cpu_cores_per_node == 96
    assert "cpu_cores_per_node" not in (im.assumed_node or "") and "--gpus-per-node" in im.assumed_node
    # an option wins over the block, and every value given leaves nothing assumed
    im = load_rlinf(cfg, node={"cpu_cores_per_node": 64, "gpus_per_node": 8, "inter_node_bw_GBps": 50.0,
                               "node_ram_gb": 1024.0})
    c = im.plan.cluster
    assert (c.cpu_cores_per_node, c.gpus_per_node, c.inter_node_bw_GBps, c.node_ram_gb) == (64, 8, 50.0, 1024.0)
    assert im.assumed_node is None
    r = run_cli("predict", "--rlinf-config", str(cfg), "--no-interval", "--json", "--cpu-cores-per-node", "48")
    assert r.returncode == 0, r.stderr
    assert "note: node assumed" in r.stderr and "--gpus-per-node" in r.stderr and "--cpu-cores-per-node" not in r.stderr
    r2 = run_cli("predict", "--mode", "rollout_async", "--gpus", "8", "--no-interval", "--json",
                 "--cpu-cores-per-node", "32")
    r3 = run_cli("predict", "--mode", "rollout_async", "--gpus", "8", "--no-interval", "--json")
    import json

    assert json.loads(r2.stdout)["throughput_env_steps_per_s"] < json.loads(r3.stdout)["throughput_env_steps_per_s"]


@pytest.mark.parametrize("args, field", [(("--cpu-cores-per-node", "0"), "--cpu-cores-per-node"),
                                         (("--nic-gbps", "-1"), "--nic-gbps"),
                                         (("--node-ram-gb", "nan"), "--node-ram-gb")])
def test_bad_node_option_is_one_line(args, field) -> None:
    r = run_cli("predict", "--mode", "colocated", "--gpus", "8", *args)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {field}:") and "Traceback" not in r.stderr


def test_bad_block_value_names_the_key(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, extra="vlaperf:\n  gpus_per_node: many\n")
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == "vlaperf.gpus_per_node"


def test_extrapolation_names_the_workload_fields_beyond_the_calibration(monkeypatch, tmp_path) -> None:
    """Issue 32 item 4: the published workload is the calibrated one (nothing flagged); a plan at
    another envs per GPU, batch or epoch count names those fields, and, without a measured width
    along them (no widths file here), says that no measured width exists for them."""
    import perfmodel.extrapolation as extrapolation
    from perfmodel.prediction import predict

    monkeypatch.setattr(extrapolation, "WORKLOAD_WIDTHS", tmp_path / "none.json")
    profile = load_profile("pi05")
    plan = published_plan(profile, "rollout_async", 16, "1:1")
    ext = predict(plan, profile, interval=False)["extrapolation"]
    assert ext["beyond_calibrated_workload"] == [] and ext["calibrated_workload"]["envs_per_gpu"] == 48
    other = plan.with_(workload=replace(plan.workload, total_num_envs=8 * 16, global_batch_size=2048, update_epoch=4))
    ext = predict(other, profile, interval=False)["extrapolation"]
    assert ext["beyond_calibrated_workload"] == ["envs_per_gpu", "update_epoch", "global_batch_size"]
    assert ext["workload"] == {"envs_per_gpu": 8, "update_epoch": 4, "global_batch_size": 2048}
    assert ext["workload_widths"] == {"envs_per_gpu": None, "update_epoch": None, "global_batch_size": None}
    assert ext["workload_interval"].startswith("no measured width exists for envs_per_gpu, update_epoch, global_batch_size")
    assert "not widened" not in ext["workload_interval"]


@pytest.mark.skipif(not PI05_CONFIG.is_file(), reason="the reference RLinf configs are not beside the checkout")
def test_predict_json_flags_the_configs_workload_and_denoising_steps() -> None:
    import json

    r = run_cli("predict", "--rlinf-config", str(PI05_CONFIG), "--json", "--no-interval")
    assert r.returncode == 0, r.stderr
    ext = json.loads(r.stdout)["extrapolation"]
    assert {"envs_per_gpu", "global_batch_size", "denoising_steps"} <= set(ext["beyond_calibrated_workload"])
    assert (ext["workload"]["denoising_steps"], ext["calibrated_workload"]["denoising_steps"]) == (5, 4)
    r = run_cli("predict", "--rlinf-config", str(PI05_CONFIG), "--no-interval")
    assert "workload beyond the calibrated one: envs_per_gpu 8 (calibrated 48)" in r.stdout


def test_emitted_fragment_names_the_algorithm_change(tmp_path: Path) -> None:
    """Issue 32 item 5: a plan that turns synchronous PPO into decoupled PPO with a staleness bound
    says so first in the fragment's header and on the terminal."""
    cfg = write_config(tmp_path, envs=64)
    r = run_cli("plan", "--rlinf-config", str(cfg), "--gpus", "8", "--modes", "rollout_async", "--ratios", "1:1",
                "--emit", "rlinf", "--quiet")
    assert r.returncode == 0, r.stderr
    header = [ln for ln in r.stdout.splitlines() if ln.startswith("#")]
    assert any(ln.startswith("# ALGORITHM CHANGE: your config trains synchronous PPO") for ln in header)
    assert "note: algorithm change: your config trains synchronous PPO" in r.stderr
    r = run_cli("plan", "--rlinf-config", str(cfg), "--gpus", "8", "--modes", "colocated", "--emit", "rlinf", "--quiet")
    assert r.returncode == 0 and "ALGORITHM CHANGE" not in r.stdout and "algorithm change" not in r.stderr


def test_node_defaults_come_from_one_table_and_gpu_applies_its_node() -> None:
    """Issue 41: the node values a note prints, `perfmodel gpus` lists and `--help` points to are
    one table (perfmodel.commands.gpus.assumed_nodes); `--gpu h100` is a DGX H100 node (112 cores), not the
    published cluster's (128), unless a node option says otherwise."""
    import json

    from perfmodel.commands.gpus import assumed_nodes
    from perfmodel.schema.node import NODE_FIELDS

    rows = {r["option"]: r for r in assumed_nodes(load_profile("pi05"))}
    own, h100 = rows["(no --gpu)"], rows["--gpu h100"]
    assert (own["cpu_cores_per_node"], h100["cpu_cores_per_node"]) == (128, 112)
    listed = run_cli("gpus").stdout
    cfg = "examples/rlinf/libero_10_ppo_openpi_pi05.yaml"
    for flags, row in (([], own), (["--gpu", "h100"], h100)):
        r = run_cli("predict", "--rlinf-config", cfg, "--mode", "colocated", "--no-interval", "--json", *flags)
        (note,) = [ln for ln in r.stderr.splitlines() if ln.startswith("note: node assumed")]
        for f, (option, _, unit) in NODE_FIELDS.items():
            assert f"{row[f]:.4g} {unit} ({option})" in note, note
        assert f"| {row['option']} | {row['node']} | {row['gpu']} | " + " | ".join(
            f"{row[f]:.4g}" for f in NODE_FIELDS) + " |" in listed
    assert "perfmodel gpus lists both" in run_cli("predict", "--help").stdout

    def thr(*flags: str) -> float:
        r = run_cli("predict", "--mode", "rollout_async", "--gpus", "16", "--no-interval", "--json", *flags)
        return json.loads(r.stdout)["throughput_env_steps_per_s"]

    plain = thr()
    assert thr("--gpu", "h100") < plain  # env-bound: fewer cores per node
    assert thr("--gpu", "h100", "--cpu-cores-per-node", "128") == pytest.approx(plain, rel=1e-9)

"""RLinf configs in and out: Hydra composition, the key mapping, refusals with a named reason,
and the `plan --emit rlinf` round trip. The tests write their own small configs in RLinf's format
(a config directory with ``defaults:`` pulled from env/ and model/ subdirectories)."""

from __future__ import annotations

import json
import subprocess
from typing import Any
import sys
from pathlib import Path

import pytest

from perfmodel.calibration.reference import published_plan
from perfmodel.rlinf.emit import emit_yaml
from perfmodel.rlinf.importer import RATIO_APART_NOTE, SHARED_ASYNC_NOTE, load_rlinf
from perfmodel.schema.errors import ConfigError
from tests.conftest import run_cli
from perfmodel.schema.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
# CI keeps shared/ beside the clone; a worktree under /work/wt/ has it two levels up.
REFERENCE = next((p / "shared" / "reference" / "rlinf-configs" for p in (ROOT.parent, ROOT.parent.parent)
                  if (p / "shared" / "reference" / "rlinf-configs").is_dir()),
                 ROOT.parent / "shared" / "reference" / "rlinf-configs")

ENV = """env_type: libero
task_suite_name: libero_10
total_num_envs: null
max_steps_per_rollout_epoch: 512
max_episode_steps: 512
reward_coef: 5.0
"""
PI05 = """model_type: "openpi"
precision: null
num_action_chunks: 10
action_dim: 7
is_lora: False
num_steps: 4
openpi:
  config_name: "pi05_libero"
  action_chunk: ${..num_action_chunks}
  num_steps: ${..num_steps}
  train_expert_only: True
"""
GR00T = """model_type: "gr00t"
precision: "bf16"
num_action_chunks: 5
denoising_steps: 4
"""
MAIN = """defaults:
  - env/libero_10@env.train
  - model/{model}@actor.model
  - override hydra/job_logging: stdout

hydra:
  searchpath:
    - file://${{oc.env:EMBODIED_PATH}}/config/

cluster:
  num_nodes: {nodes}
  component_placement:
{placement}
runner:
  task_type: embodied
algorithm:
  group_size: {group}
  update_epoch: 2
  adv_type: {adv}
  loss_type: {loss}
  reward_coef: 1.0
{extra_algorithm}
env:
  train:
    rollout_epoch: 4
    total_num_envs: {envs}
    max_episode_steps: 480
    max_steps_per_rollout_epoch: 480
    reward_coef: ${{algorithm.reward_coef}}
rollout:
  enable_offload: False
  pipeline_stage_num: {stages}
actor:
  micro_batch_size: 128
  global_batch_size: 1024
  enable_offload: False
  model:
    model_path: "/path/to/model"
  fsdp_config:
    sharding_strategy: "{shard}"
{extra}
"""


def write_config(d: Path, name: str = "mine", *, model: str = "pi0_5", nodes: int = 1,
                 placement: str = "    actor,env,rollout: all", envs: int = 384, stages: int = 1,
                 adv: str = "gae", loss: str = "actor_critic", group: int = 1, shard: str = "full_shard",
                 extra_algorithm: str = "", extra: str = "") -> Path:
    (d / "env").mkdir(parents=True, exist_ok=True)
    (d / "model").mkdir(exist_ok=True)
    (d / "env" / "libero_10.yaml").write_text(ENV)
    (d / "model" / "pi0_5.yaml").write_text(PI05)
    (d / "model" / "gr00t.yaml").write_text(GR00T)
    (d / "model" / "openvla_oft.yaml").write_text("model_type: openvla_oft\nnum_action_chunks: 8\n")
    (d / "model" / "starvla.yaml").write_text("model_type: starvla\nnum_action_chunks: 8\n")  # no profile
    p = d / f"{name}.yaml"
    p.write_text(MAIN.format(model=model, nodes=nodes, placement=placement, envs=envs, stages=stages, adv=adv,
                             loss=loss, group=group, shard=shard, extra_algorithm=extra_algorithm, extra=extra))
    return p


def test_colocated_config_maps_every_field(tmp_path: Path) -> None:
    im = load_rlinf(write_config(tmp_path, stages=2, shard="no_shard"))
    p = im.plan
    assert (p.mode, p.cluster.gpus, p.allocation_ratio, p.profile) == ("colocated", 8, None, "pi05")
    w = p.workload
    # ${...} resolved, the defaults' values overridden by the main file's.
    assert (w.total_num_envs, w.max_episode_steps, w.num_action_chunks, w.rollout_epoch, w.update_epoch) == \
        (384, 480, 10, 4, 2)
    assert (w.micro_batch_size, w.global_batch_size, w.algorithm) == (128, 1024, "ppo")
    assert (p.pipeline_stage_num, p.sharding_strategy, p.trained_part, p.enable_offload) == \
        (2, "no_shard", "action_expert", False)
    assert im.warnings == []


def test_disaggregated_ranges_async_and_grpo(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, nodes=2, placement="    actor: 12-15\n    env,rollout: 0-11", adv="grpo",
                       loss="actor", group=8, extra_algorithm="  staleness_threshold: 2")
    p = load_rlinf(cfg).plan
    assert (p.mode, p.cluster.gpus, p.allocation_ratio, p.max_staleness) == ("train_async", 16, "3:1", 2)
    assert (p.workload.algorithm, p.workload.group_size) == ("grpo", 8)
    assert p.placement_strategy == "packed"
    # Without a staleness threshold: synchronous disaggregated. gr00t -> gr00t_n15.
    p = load_rlinf(write_config(tmp_path, "g", model="gr00t", placement="    actor: 0-3\n    env: 4-7\n    rollout: 4-7")).plan
    assert (p.mode, p.allocation_ratio, p.profile, p.workload.num_action_chunks) == ("disaggregated", "1:1",
                                                                                       "gr00t_n15", 5)


def test_fork_block_says_the_mode_and_warnings_list_what_is_not_modelled(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, placement="    actor: 0-1\n    env,rollout: 2-7",
                       extra_algorithm="  staleness_threshold: 1",
                       extra="vlaperf:\n  mode: streamer\n  b_max: 16\n  t_max_s: 0.02\n"
                             "rollout_extra:\n  x: 1\n")
    cfg.write_text(cfg.read_text().replace("  pipeline_stage_num: 1", "  pipeline_stage_num: 1\n  async_batching: true\n"
                                           "  recompute_logprobs: true"))
    im = load_rlinf(cfg)
    assert (im.plan.mode, im.plan.b_max, im.plan.t_max_s, im.plan.allocation_ratio) == ("streamer", 16, 0.02, "3:1")
    text = "\n".join(im.warnings)
    assert "rollout.async_batching" in text and "rollout.recompute_logprobs" in text


@pytest.mark.parametrize("kw, field", [
    ({"model": "starvla"}, "actor.model.model_type"),
    ({"adv": "embodied_sac", "loss": "embodied_sac"}, "algorithm.loss_type"),
    ({"extra_algorithm": "  staleness_threshold: 1", "extra": "rollout_offload"}, "rollout.enable_offload"),
    ({"placement": "    actor: 0-5\n    env,rollout: 4-7"}, "cluster.component_placement.actor"),
    ({"placement": "    actor: 0-3\n    env: 0-3\n    rollout: 4-7"}, "cluster.component_placement.env"),
    ({"placement": "    actor,env,rollout: 0-9"}, "cluster.component_placement.actor,env,rollout"),
    ({"shard": "hybrid_shard"}, "actor.fsdp_config.sharding_strategy"),
    ({"envs": 100}, "env.train.total_num_envs"),
])
def test_refusals_name_the_key(tmp_path: Path, kw: dict, field: str) -> None:
    offload = kw.pop("extra", None) == "rollout_offload"
    cfg = write_config(tmp_path, **kw)
    if offload:  # asynchronous PPO on shared GPUs with offload: RLinf's asynchronous rollout refuses it
        text = cfg.read_text()
        i = text.index("rollout:\n")
        cfg.write_text(text[:i] + text[i:].replace("enable_offload: False", "enable_offload: True", 1))
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == field, str(e.value)
    assert "\n" not in str(e.value)


def test_async_ppo_on_shared_gpus_is_train_async_on_shared_gpus(tmp_path: Path) -> None:
    """RLinf's asynchronous PPO with actor, env and rollout on the same GPUs (its
    libero_*_async_ppo_* configs): train_async with no rollout:actor split, a stderr note saying
    how it is costed; naming the mode keeps the placement, a vlaperf ratio puts them apart."""
    cfg = write_config(tmp_path, extra_algorithm="  staleness_threshold: 2")
    im = load_rlinf(cfg)
    p = im.plan
    assert (p.mode, p.allocation_ratio, p.max_staleness, p.cluster.gpus, p.enable_offload) == \
        ("train_async", None, 2, 8, False)
    assert (p.mechanisms.disaggregated, p.mechanisms.async_training, p.placement.colocated) == (False, True, True)
    assert p.split == (8, 8) and p.version_granularity == "iteration"
    note = [w for w in im.warnings if "shared GPUs" in w]
    assert len(note) == 1 and "staleness counted in iterations" in note[0] and "no MPS" in note[0]
    assert load_rlinf(cfg, mode="train_async").plan.allocation_ratio is None
    assert load_rlinf(cfg, mode="colocated").plan.mode == "colocated"
    apart = write_config(tmp_path, "r", extra_algorithm="  staleness_threshold: 2",
                         extra="vlaperf:\n  allocation_ratio: '1:1'\n")
    assert load_rlinf(apart).plan.allocation_ratio == "1:1"
    # a sweep or plan over it: the config's own mode, on the GPUs it shares (the base plan)
    r = _cli("predict", "--rlinf-config", str(cfg), "--no-interval")
    assert r.returncode == 0 and "actor and rollout share every GPU" in r.stdout
    assert "costed as train_async on shared GPUs" in r.stderr
    # --ratio puts them apart: the note says that, not how shared GPUs are costed
    r = _cli("predict", "--rlinf-config", str(cfg), "--ratio", "1:1", "--no-interval")
    assert r.returncode == 0 and "rollout 4 : actor 4 (ratio 1:1)" in r.stdout
    assert [line for line in r.stderr.splitlines() if line.startswith("warning:")] == \
        ["warning: --ratio 1:1: the config's actor and rollout share every GPU; costed apart, train_async at "
         "rollout:actor 1:1"]


def test_the_importer_told_the_ratio_writes_its_note_instead_of_the_shared_gpu_one(tmp_path: Path) -> None:
    """The importer given ``--ratio`` says the shared GPUs are costed apart and not how they are
    costed shared (one note, never both); the note comes after the config's own notes; a
    config whose actor and rollout are apart already gets no note about the option."""
    cfg = write_config(tmp_path, extra_algorithm="  staleness_threshold: 2")
    assert load_rlinf(cfg).warnings == [SHARED_ASYNC_NOTE.format(staleness=2)]
    im = load_rlinf(cfg, ratio="3:1")
    assert im.warnings == [RATIO_APART_NOTE.format(ratio="3:1", mode="train_async")]
    assert im.plan.allocation_ratio is None  # the caller applies the split (commands/predict.py)
    more = write_config(tmp_path, "more", extra_algorithm="  staleness_threshold: 2", group=4,
                        placement="    actor,env,rollout: 0-3")
    w = load_rlinf(more, ratio="1:1").warnings
    assert len(w) == 3 and w[0].startswith("algorithm.group_size") and w[1].startswith("cluster.component_placement")
    assert w[2] == RATIO_APART_NOTE.format(ratio="1:1", mode="train_async")
    apart = write_config(tmp_path, "apart", extra_algorithm="  staleness_threshold: 2",
                         placement="    actor: 0-3\n    env,rollout: 4-7")
    assert load_rlinf(apart, ratio="3:1").warnings == load_rlinf(apart).warnings == []


def _costs(cfg: Path) -> tuple[float, float, Any]:
    """(inference seconds of a 16-sample call, training seconds of a 16-sample micro-batch, plan)."""
    from perfmodel.costs import StageCosts

    plan = load_rlinf(cfg).plan
    c = StageCosts(plan, load_profile(plan.profile))
    return c.infer_s(16), c.train_compute_s(16), plan


@pytest.mark.parametrize("model, text, change, field, value, infer, train", [
    # pi0.5 (openpi): more denoising steps cost more inference and training (the chain is recomputed)
    ("pi0_5", PI05, ("num_steps: 4", "num_steps: 8"), "denoising_steps", 8, ">", ">"),
    # a shorter chunk (openpi.action_chunk follows num_action_chunks) is fewer expert tokens
    ("pi0_5", PI05, ("num_action_chunks: 10", "num_action_chunks: 5"), "action_horizon", 5, "<", "<"),
    # GR00T: denoising_steps counts; num_action_chunks is what the env executes of the DiT's own horizon 16
    ("gr00t", GR00T, ("denoising_steps: 4", "denoising_steps: 2"), "denoising_steps", 2, "<", "<"),
    ("gr00t", GR00T, ("num_action_chunks: 5", "num_action_chunks: 8"), "action_horizon", None, "=", "="),
    # OpenVLA-OFT: the chunk is decoded in parallel in the LLM pass, chunk x action_dim tokens
    ("openvla_oft", "model_type: openvla_oft\nnum_action_chunks: 8\n", ("num_action_chunks: 8", "num_action_chunks: 16"),
     "action_horizon", 16, ">", ">"),
])
def test_config_denoising_steps_and_chunk_change_the_costs(tmp_path: Path, model: str, text: str, change: tuple,
                                                           field: str, value: Any, infer: str, train: str) -> None:
    base = write_config(tmp_path / "a", model=model)
    other = write_config(tmp_path / "b", model=model)
    (tmp_path / "b" / "model" / f"{model}.yaml").write_text(text.replace(*change))
    (i0, t0, p0), (i1, t1, p1) = _costs(base), _costs(other)
    assert getattr(p0, field) is None and getattr(p1, field) == value
    for got, want in ((i1 / i0, infer), (t1 / t0, train)):
        assert {"<": got < 0.999, ">": got > 1.001, "=": abs(got - 1) < 1e-12}[want], (got, want)
    # the plan keeps the field (a plan file written from it predicts the same) and the prediction moves
    if value is not None:
        from perfmodel.schema.plan import Plan

        assert Plan.from_dict(p1.to_dict(), "plan") == p1
        r0 = run_cli("predict", "--rlinf-config", str(base), "--json", "--no-interval")
        r1 = run_cli("predict", "--rlinf-config", str(other), "--json", "--no-interval")
        assert r0.returncode == 0 and r1.returncode == 0, r0.stderr + r1.stderr
        assert json.loads(r0.stdout)["stage_time_s"] != json.loads(r1.stdout)["stage_time_s"]


def test_emit_keeps_the_configs_denoising_steps_and_horizon(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    (tmp_path / "model" / "pi0_5.yaml").write_text(PI05.replace("num_steps: 4", "num_steps: 8")
                                                   .replace("num_action_chunks: 10", "num_action_chunks: 5"))
    plan = load_rlinf(cfg).plan
    assert (plan.denoising_steps, plan.action_horizon) == (8, 5)
    f = tmp_path / "frag.yaml"
    f.write_text(emit_yaml(plan, "pi05"))
    assert load_rlinf(f).plan.to_dict() == plan.to_dict()


@pytest.mark.parametrize("mode, gpus, ratio", [("colocated", 8, None), ("streamer", 16, "3:1"),
                                               ("disaggregated", 24, "1:2"), ("rollout_async", 4, "1:1"),
                                               ("train_async", 8, "shared")])
def test_emit_round_trips(tmp_path: Path, mode: str, gpus: int, ratio: str | None) -> None:
    plan = published_plan(load_profile("pi05"), mode, gpus, "1:1" if ratio == "shared" else ratio,
                          b_max=8 if mode != "colocated" else None)
    if ratio == "shared":  # train_async with actor and rollout on the same GPUs
        plan = plan.with_(allocation_ratio=None)
    f = tmp_path / "frag.yaml"
    f.write_text(emit_yaml(plan, "pi05"))
    assert load_rlinf(f).plan.to_dict() == plan.to_dict()
    # Dynamic batching also sets RLinf's own switch; streaming says stock RLinf cannot run it.
    import yaml
    dynamic = mode in ("rollout_async", "streamer")
    assert (yaml.safe_load(f.read_text()).get("runner") == {"enable_decoupled_mode": True}) == dynamic
    assert ("streams training only in its synchronous runner" in f.read_text()) == (mode == "streamer")
    # A synchronous plan switches RLinf's asynchronous settings off; offload only in colocated;
    # RLinf's batch-split rule is warned about (disaggregated 24 at 1:2: 16 actor GPUs, 1024 / (128 x 16)).
    frag = yaml.safe_load(f.read_text())
    asynchronous = mode in ("rollout_async", "streamer", "train_async")
    assert frag["runner"]["enable_decoupled_mode"] == dynamic
    assert (frag["algorithm"]["staleness_threshold"] is None) == (not asynchronous)
    assert "max_episode_steps" not in frag["env"]["train"]
    if mode != "colocated":
        assert frag["rollout"]["enable_offload"] is False and frag["actor"]["enable_offload"] is False
    assert ("RLinf requires global_batch_size" in f.read_text()) == (mode == "disaggregated")
    # Pasted over a user's config, the config runs the same plan.
    base = write_config(tmp_path, "user")
    import yaml
    merged = yaml.safe_load(base.read_text())
    frag = yaml.safe_load(f.read_text())

    def deep(a, b):
        for k, v in b.items():
            a[k] = deep(a.get(k, {}), v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
        return a
    merged = deep(merged, frag)
    merged["cluster"]["component_placement"] = frag["cluster"]["component_placement"]
    (tmp_path / "pasted.yaml").write_text(yaml.safe_dump(merged, sort_keys=False))
    assert load_rlinf(tmp_path / "pasted.yaml").plan.to_dict() == plan.to_dict()


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfmodel.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})


def test_a_wide_interval_at_the_calibrated_scale_says_why() -> None:
    """A 3:1 split at 8 GPUs is within the calibrated scale but away from the published 1:1
    split: its interval is mostly the parameters' and the text says so; the published setup at
    8 GPUs gets no such note."""
    r = _cli("predict", "--mode", "rollout_async", "--gpus", "8", "--ratio", "3:1")
    assert r.returncode == 0, r.stderr
    # (a structural member may part here too, through its refitted parameters: its own note,
    # perfmodel.calibration.structural, tested in tests/test_structural.py)
    note = [ln for ln in r.stdout.splitlines() if ln.startswith("note ") and "cannot tell today's fit" not in ln]
    assert len(note) == 1 and "fitted parameters' uncertainty" in note[0]
    r = _cli("predict", "--mode", "colocated", "--gpus", "8")
    assert r.returncode == 0 and not any(ln.startswith("note ") for ln in r.stdout.splitlines())
    # Beyond the calibrated scale the extrapolation warning says why instead.
    r = _cli("predict", "--mode", "rollout_async", "--gpus", "64", "--ratio", "3:1")
    assert r.returncode == 0 and not any(ln.startswith("note ") and "cannot tell today's fit" not in ln
                                         for ln in r.stdout.splitlines())
    assert any(ln.startswith("warning ") and "extrapolation" in ln for ln in r.stdout.splitlines())


def test_cli_predict_and_plan_emit_round_trip(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, envs=384)
    r = _cli("predict", "--rlinf-config", str(cfg), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == "colocated" and out["total_num_envs"] == 384 and out["rlinf_import"]["warnings"] == []
    r = _cli("plan", "--rlinf-config", str(cfg), "--modes", "colocated,streamer", "--ratios", "1:1,3:1",
             "--emit", "rlinf", "-o", str(tmp_path / "plan.json"), "--quiet")
    assert r.returncode == 0, r.stderr
    (tmp_path / "frag.yaml").write_text(r.stdout)
    chosen = json.loads((tmp_path / "plan.json").read_text())
    assert load_rlinf(tmp_path / "frag.yaml").plan.to_dict() == chosen
    # The config's workload went into the plan: 384 envs on 8 GPUs.
    assert chosen["workload"]["total_num_envs"] == 384 and chosen["cluster"]["gpus"] == 8


def test_cli_refusal_is_one_line_exit_2(tmp_path: Path) -> None:
    r = _cli("predict", "--rlinf-config", str(write_config(tmp_path, model="starvla")))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: actor.model.model_type:")
    r = _cli("predict", "--rlinf-config", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr


REFUSED_REASONS = ("actor.model.model_type", "algorithm.loss_type", "rollout.enable_offload", "--rlinf-config",
                   "cluster.component_placement.actor")


def test_every_reference_config_imports_or_is_refused_with_a_reason() -> None:
    """RLinf's and the fork's LIBERO configs: each imports or is refused in one line naming its
    key; the tables of docs/formats.md and docs/backbones.md are what the importer reads now."""
    from perfmodel.rlinf import catalogue

    if not REFERENCE.is_dir():
        pytest.skip(f"RLinf reference configs not found at {REFERENCE} (CI keeps ../shared/reference beside the clone)")
    rows = catalogue.rows(REFERENCE.parent)
    for kind, doc in catalogue.DOCS.items():
        assert catalogue.table(rows, kind) in doc.read_text(), \
            f"docs/{doc.name} is stale: python -m perfmodel.rlinf.catalogue --write"
    mine = [r for r in rows if r.source == "RLinf"]
    assert len(mine) == len(list(REFERENCE.glob("*.yaml"))) > 0
    imported, refused = [], []
    for r in mine:
        if not r.imported:
            field = r.reading.split("`")[1]
            assert field in REFUSED_REASONS, f"{r.name}: {r.reading}"
            assert "\n" not in r.reading and len(r.reading) > 20
            refused.append(r.name)
            continue
        assert ("train_async (shared GPUs)" in r.reading) == ("async_ppo" in r.name)
        imported.append(r.name)
    # Every pi0.5, pi0, GR00T (N1.5) and OpenVLA-OFT PPO/GRPO config with a modelled placement
    # imports, and GR00T N1.6's and Dexbotic's pi0 (docs/backbones.md).
    expected = {f"libero_{suite}_{algo}_{model}.yaml" for suite in ("10", "goal", "object", "spatial")
                for algo, model in (("ppo", "openpi_pi05"), ("grpo", "openpi_pi05"), ("ppo", "gr00t"),
                                    ("ppo", "openpi"), ("grpo", "openpi"), ("grpo", "openvlaoft"),
                                    ("ppo", "dexbotic_pi0"))}
    expected |= {"libero_90_grpo_openvlaoft.yaml", "libero_130_grpo_openvlaoft.yaml",
                 "libero_spatial_ppo_gr00t_n1d6.yaml", "libero_spatial_ppo_openpi_quickstart.yaml"}
    # RLinf's asynchronous PPO with actor and rollout on the same GPUs: train_async on shared GPUs
    # (libero_goal_async_ppo_gr00t asks for rollout offload, which RLinf's asynchronous rollout refuses)
    shared_async = {"libero_object_async_ppo_openpi_pi05.yaml", "libero_spatial_async_ppo_openpi.yaml",
                    "libero_spatial_async_ppo_openpi_pi05.yaml"}
    expected |= shared_async
    # RLinf's NFT: GRPO's pipeline with NFT's training pass
    expected.add("libero_object_0_nft_openpi.yaml")
    # DSRL (sync and async configs, pi0 and pi0.5), DAgger, on-policy distillation (issue 42)
    dsrl = {f"libero_spatial_{a}dsrl_openpi{m}.yaml" for a in ("", "async_") for m in ("", "_pi05")}
    expected |= dsrl | {"libero_spatial_dagger_openpi.yaml", "libero_10_opd_openvlaoft.yaml",
                        "libero_spatial_opd_openvlaoft.yaml"}
    # RLinf's MLP policy, from its shapes (perfmodel.backbones.MLP_POLICY)
    expected.add("libero_spatial_0_grpo_mlp.yaml")
    # composes with the fork's training_backend/fsdp.yaml; its actor on 0-7 spans rollout on 4-7:
    # colocated with the rollout on 4 of the 8 GPUs (plan.colocated_rollout_gpus)
    expected.add("libero_spatial_dagger_openpi_lerobot.yaml")
    assert len(expected) == 45
    assert "libero_goal_async_ppo_gr00t.yaml" in refused
    assert set(imported) == expected, sorted(set(imported) ^ expected)
    lerobot = next(r for r in mine if r.name == "libero_spatial_dagger_openpi_lerobot.yaml")
    assert lerobot.reading.startswith("colocated (rollout on 4 of the 8 GPUs)"), lerobot.reading
    by_name = {r.name: r for r in mine}
    assert all(by_name[n].reading.endswith(", dsrl") and "colocated" in by_name[n].reading for n in dsrl)
    assert by_name["libero_spatial_dagger_openpi.yaml"].reading.startswith("disaggregated (rollout:actor 1:1)")
    assert by_name["libero_spatial_0_grpo_mlp.yaml"].backbone == "mlp_policy"
    # every model refusal says why its shapes are missing, not only that there is no profile
    for r in mine:
        if not r.imported and r.reading.startswith("`actor.model.model_type`"):
            assert "has no profile: " in r.reading, r.reading


def tiny_config(d: Path) -> Path:
    """A 4-env colocated config on the measured tiny CPU profile (the executor's example scale)."""
    cfg = write_config(d, "tiny", envs=4, extra="vlaperf:\n  profile: pi05_tiny_cpu\n")
    text = cfg.read_text().replace("max_episode_steps: 480", "max_episode_steps: 20") \
        .replace("max_steps_per_rollout_epoch: 480", "max_steps_per_rollout_epoch: 20") \
        .replace("rollout_epoch: 4", "rollout_epoch: 1").replace("update_epoch: 2", "update_epoch: 1") \
        .replace("micro_batch_size: 128", "micro_batch_size: 4").replace("global_batch_size: 1024", "global_batch_size: 8")
    cfg.write_text(text)
    return cfg


def test_executor_run_takes_an_rlinf_config_in_place_of_a_plan(tmp_path: Path) -> None:
    from inproc import run_main

    cfg = tiny_config(tmp_path)
    plan = load_rlinf(cfg).plan
    assert (plan.cluster.gpus, plan.workload.total_num_envs, plan.profile) == (2, 4, "pi05_tiny_cpu")
    r = run_main("run", "--rlinf-config", str(cfg), "--plan", "x.json", module="executor.cli")
    assert r.exit_code == 2 and "not both" in r.output
    # The imported plan reaches the command's own checks (here: a bad option after the import).
    r = run_main("run", "--rlinf-config", str(cfg), "--iterations", "0", module="executor.cli")
    assert r.exit_code == 2 and "iterations" in r.output



@pytest.mark.parametrize("right, typo", [("update_epoch:", "update_epochs:"), ("num_nodes:", "num_node:"),
                                         ("adv_type:", "adv_typ:"), ("task_type:", "task_typ:")])
def test_a_misspelt_key_is_refused_not_defaulted(tmp_path: Path, right: str, typo: str) -> None:
    """A key this tool reads, misspelt, would silently take its default and change the
    prediction (update_epochs for update_epoch: 1 update epoch instead of 2): refused, naming
    the misspelt key and the one meant."""
    cfg = write_config(tmp_path)
    text = cfg.read_text()
    assert right in text
    cfg.write_text(text.replace(right, typo, 1))
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field.endswith(typo.rstrip(":")) and "did you mean" in str(e.value)
    assert right.rstrip(":") in str(e.value) and "\n" not in str(e.value)


def test_a_yaml_syntax_error_says_where(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("num_nodes: 1", "num_nodes: [1", 1))
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == "--rlinf-config" and f"{cfg.name} line " in str(e.value) and "column" in str(e.value)


def _with_runner(cfg: Path, lines: str) -> Path:
    cfg.write_text(cfg.read_text().replace("  task_type: embodied", "  task_type: embodied\n" + lines))
    return cfg


def test_rlinf_runner_switches_set_or_refuse_the_mode(tmp_path: Path) -> None:
    """RLinf's own switches (rlinf 0.3.0): runner.enable_decoupled_mode is dynamic batching, so
    with asynchronous PPO on disjoint GPUs the mode is rollout_async (RLinf's 20 ms timeout, the
    plan default); without asynchronous PPO it is no vlaperf mode, and neither is
    runner.use_training_pipeline (streaming inside RLinf's synchronous runner): both are refused
    by name unless --mode says how to cost them, and then a switch the mode lacks is a warning."""
    disjoint = {"placement": "    actor: 0-3\n    env,rollout: 4-7"}
    cfg = _with_runner(write_config(tmp_path, "a", extra_algorithm="  staleness_threshold: 1", **disjoint),
                       "  enable_decoupled_mode: True")
    im = load_rlinf(cfg)
    assert (im.plan.mode, im.plan.b_max, im.plan.t_max_s) == ("rollout_async", None, 0.02) and im.warnings == []
    im = load_rlinf(cfg, mode="train_async")
    assert im.plan.mode == "train_async" and im.warnings == [
        "runner.enable_decoupled_mode: dynamic batching has no effect in mode train_async"]
    sync = _with_runner(write_config(tmp_path, "b", **disjoint), "  enable_decoupled_mode: True")
    with pytest.raises(ConfigError) as e:
        load_rlinf(sync)
    assert e.value.field == "runner.enable_decoupled_mode" and "--mode" in str(e.value)
    pipe = _with_runner(write_config(tmp_path, "c", **disjoint), "  use_training_pipeline: True")
    with pytest.raises(ConfigError) as e:
        load_rlinf(pipe)
    assert e.value.field == "runner.use_training_pipeline" and "--mode" in str(e.value)
    im = load_rlinf(pipe, mode="disaggregated")
    assert im.plan.mode == "disaggregated" and im.warnings == [
        "runner.use_training_pipeline: streaming training has no effect in mode disaggregated"]
    # Switched off, they change nothing.
    off = _with_runner(write_config(tmp_path, "d", **disjoint), "  use_training_pipeline: False\n  enable_decoupled_mode: False")
    assert load_rlinf(off).plan.mode == "disaggregated" and load_rlinf(off).warnings == []


def test_sweep_and_plan_take_the_mode_of_a_config_from_modes(tmp_path: Path) -> None:
    """A config whose own mode vlaperf cannot name (RLinf's use_training_pipeline) is refused by
    sweep and plan with the option they have (--modes); given --modes, the first one stands for
    the config and the comparison runs."""
    cfg = _with_runner(write_config(tmp_path, "p", placement="    actor: 0-3\n    env,rollout: 4-7"),
                       "  use_training_pipeline: True")
    for cmd in ("sweep", "plan"):
        r = run_cli(cmd, "--rlinf-config", str(cfg), "--gpus", "8")
        assert r.returncode == 2 and "(sweep and plan: --modes)" in r.stderr, r.stderr
        r = run_cli(cmd, "--rlinf-config", str(cfg), "--gpus", "8", "--modes", "bogus,disaggregated")
        assert r.returncode == 2 and r.stderr.strip().endswith("--modes: must be among colocated, disaggregated, "
                                                               "train_async, rollout_async, streamer; got 'bogus'")
    r = run_cli("plan", "--rlinf-config", str(cfg), "--gpus", "8", "--modes", "colocated,train_async")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Best plans for exactly 8 GPUs by throughput:\n#  mode"), r.stdout
    table = [line.split() for line in r.stdout.splitlines()[2:] if line[:1].isdigit()]
    assert {row[1] for row in table} == {"colocated", "train_async"} and {row[2] for row in table} == {"8"}
    # the mode that stands for it keeps its placement (disjoint GPUs: train_async, not colocated)
    assert "runner.use_training_pipeline: streaming training has no effect in mode train_async" in r.stderr
    # A config vlaperf can name is imported as it is, whatever --modes lists first.
    named = write_config(tmp_path, "n", placement="    actor: 0-3\n    env,rollout: 4-7")
    alone = run_cli("sweep", "--rlinf-config", str(named), "--gpus", "8")
    listed = run_cli("sweep", "--rlinf-config", str(named), "--gpus", "8", "--modes", "colocated,disaggregated")
    assert alone.returncode == listed.returncode == 0, listed.stderr
    assert [l for l in listed.stderr.splitlines() if l.startswith("warning")] == \
        [l for l in alone.stderr.splitlines() if l.startswith("warning")]


def test_a_mode_that_adds_mechanisms_says_so(tmp_path: Path) -> None:
    """--mode streamer on a synchronous disjoint config predicts the mode, not the config: the
    warning names each mechanism the config does not switch on; a mode within the config's adds
    nothing and says nothing."""
    disjoint = {"placement": "    actor: 0-3\n    env,rollout: 4-7"}
    cfg = write_config(tmp_path, "a", **disjoint)
    im = load_rlinf(cfg, mode="streamer")
    assert im.plan.mode == "streamer" and len(im.warnings) == 1
    w = im.warnings[0]
    assert w.startswith("--mode: streamer adds ") and "algorithm.staleness_threshold" in w
    assert "runner.enable_decoupled_mode" in w and "streaming training" in w
    asyn = write_config(tmp_path, "b", extra_algorithm="  staleness_threshold: 1", **disjoint)
    w = load_rlinf(asyn, mode="rollout_async").warnings
    assert len(w) == 1 and "dynamic batching" in w[0] and "staleness_threshold" not in w[0]
    assert load_rlinf(asyn, mode="train_async").warnings == []
    assert load_rlinf(cfg, mode="disaggregated").warnings == []


def test_a_profile_for_another_model_is_named_and_a_matching_one_is_not(tmp_path: Path) -> None:
    """--profile (or the emitted vlaperf.profile) for the config's own backbone costs it without a
    warning (a round trip of --emit rlinf is quiet); one made for another model is named."""
    cfg = write_config(tmp_path)
    assert load_rlinf(cfg, profile_ref="pi05").warnings == []
    w = load_rlinf(cfg, profile_ref="gr00t_n15").warnings
    assert w == ["actor.model.model_type: openpi costed with profile gr00t_n15 (backbone gr00t_n15) as given"]


def test_emit_switches_offload_off_outside_colocated() -> None:
    """RLinf's asynchronous rollout refuses offload and the model charges it only in colocated's
    phase switches: a disaggregated plan carrying enable_offload (imported from a colocated
    config) emits false; colocated keeps it."""
    import yaml

    prof = load_profile("pi05")
    for mode, gpus, ratio, want in (("rollout_async", 8, "1:1", False), ("colocated", 8, None, True)):
        plan = published_plan(prof, mode, gpus, ratio).with_(enable_offload=True)
        frag = yaml.safe_load(emit_yaml(plan, "pi05"))
        assert frag["rollout"]["enable_offload"] is want and frag["actor"]["enable_offload"] is want


def test_rlinf_decoupled_mode_needs_one_stage_and_queue_size_is_listed(tmp_path: Path) -> None:
    """RLinf asserts one pipeline stage in decoupled mode; rollout.rollout_queue_size (its batch
    cap there) is not read, so it is listed."""
    disjoint = {"placement": "    actor: 0-3\n    env,rollout: 4-7"}
    cfg = _with_runner(write_config(tmp_path, "s", stages=2, extra_algorithm="  staleness_threshold: 1", **disjoint),
                       "  enable_decoupled_mode: True")
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == "rollout.pipeline_stage_num"
    cfg = _with_runner(write_config(tmp_path, "q", extra_algorithm="  staleness_threshold: 1", **disjoint),
                       "  enable_decoupled_mode: True")
    cfg.write_text(cfg.read_text().replace("  pipeline_stage_num: 1", "  pipeline_stage_num: 1\n  rollout_queue_size: 4"))
    assert any(w.startswith("rollout.rollout_queue_size") for w in load_rlinf(cfg).warnings)


def test_plan_from_a_sweep_refuses_options_it_would_ignore(tmp_path: Path) -> None:
    sweep = tmp_path / "s.json"
    assert run_cli("sweep", "--modes", "colocated", "--gpus", "8", "--no-interval", "--quiet", "-o", str(sweep)).returncode == 0
    for args, field in ((["--rlinf-config", str(ROOT / "examples/rlinf/libero_10_ppo_openpi_pi05.yaml")], "--rlinf-config"),
                        (["--gpu", "a100"], "--gpu")):
        r = run_cli("plan", "--sweep", str(sweep), "--gpus", "8", *args)
        assert r.returncode == 2 and r.stderr.startswith(f"error: {field}: contradicts --sweep"), r.stderr


def test_a_misspelt_key_beside_a_defaulted_one_is_refused(tmp_path: Path) -> None:
    """num_action_chunk: 5 next to num_action_chunks (set to 10 by the model's Hydra default) was
    silently unused (+63 % env steps/s); now it is refused by name. The 52 reference configs
    still import (test_every_reference_config_imports_or_is_refused_with_a_reason)."""
    cfg = write_config(tmp_path, "t")
    cfg.write_text(cfg.read_text().replace('    model_path: "/path/to/model"',
                                           '    model_path: "/path/to/model"\n    num_action_chunk: 5'))
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == "actor.model.num_action_chunk" and "did you mean actor.model.num_action_chunks" in str(e.value)


@pytest.mark.parametrize("line, field", [("  allocation_ratio: 5:3", "vlaperf.allocation_ratio"),
                                         ("  b_max: 0", "vlaperf.b_max")])
def test_a_bad_vlaperf_value_is_named_by_its_key(tmp_path: Path, line: str, field: str) -> None:
    cfg = write_config(tmp_path, "v", placement="    actor: 0-3\n    env,rollout: 4-7",
                       extra_algorithm="  staleness_threshold: 1", extra=f"vlaperf:\n  mode: rollout_async\n{line}\n")
    with pytest.raises(ConfigError) as e:
        load_rlinf(cfg)
    assert e.value.field == field, str(e.value)


def test_gr00t_vlm_tuning_switches_do_not_reach_stock_rlinf(tmp_path: Path) -> None:
    """RLinf 0.3.0 hardcodes tune_llm / tune_visual False when it loads GR00T: a config asking for
    them is costed as training the action head, with a warning; the vlaperf block can say full."""
    cfg = write_config(tmp_path, "g", model="gr00t")
    cfg.write_text(cfg.read_text().replace('    model_path: "/path/to/model"',
                                           '    model_path: "/path/to/model"\n    tune_llm: True'))
    im = load_rlinf(cfg)
    assert im.plan.trained_part == "action_expert"
    assert any(w.startswith("actor.model.tune_llm: True has no effect in RLinf 0.3.0") for w in im.warnings)
    cfg.write_text(cfg.read_text() + "vlaperf:\n  trained_part: full\n")
    im = load_rlinf(cfg)
    assert im.plan.trained_part == "full" and not any("tune_llm" in w for w in im.warnings)


def test_offload_is_costed_only_where_models_swap(tmp_path: Path) -> None:
    """Offload switches that differ are one vlaperf switch, costed so, in colocated; with actor
    and rollout on GPUs of their own nothing swaps, and the warning says it has no effect."""
    def warned(placement: str) -> str:
        cfg = write_config(tmp_path, placement=placement, extra_algorithm="  staleness_threshold: 1"
                           if "0-3" in placement else "")
        cfg.write_text(cfg.read_text().replace("rollout:\n  enable_offload: False", "rollout:\n  enable_offload: True"))
        return "\n".join(w for w in load_rlinf(cfg).warnings if "enable_offload" in w)

    assert "costed as enable_offload True" in warned("    actor,env,rollout: all")
    apart = warned("    actor: 0-3\n    env,rollout: 4-7")
    assert "no effect in mode train_async" in apart and "costed as" not in apart


def test_whole_micro_batch_rule() -> None:
    from perfmodel.schema.rules import batch_split_is_whole, whole_micro_batch

    assert whole_micro_batch(2048, 32, 128) == 64 and whole_micro_batch(2048, 64, 128) == 32
    assert whole_micro_batch(1536, 8, 128) == 96  # a share above the micro-batch: its largest divisor below
    assert whole_micro_batch(2048, 24, 128) is None  # no micro-batch splits 2048 over 24 ranks
    for batch, ranks, micro in ((2048, 32, 128), (1024, 16, 128), (1536, 8, 128), (960, 12, 64)):
        m = whole_micro_batch(batch, ranks, micro)
        assert m is not None and m <= micro and batch_split_is_whole(batch, ranks, m)


def test_plan_emit_repairs_the_micro_batch_or_refuses(tmp_path: Path) -> None:
    """Issue 32: at 64 GPUs 1:1 the published batch (1024 over 128 x 32 actor GPUs) is a split RLinf
    refuses; the fragment carries a micro-batch that splits it whole, said in one stderr line, and
    the sweep's rows say whether RLinf runs them as emitted."""
    cfg = write_config(tmp_path, envs=384)
    r = _cli("plan", "--rlinf-config", str(cfg), "--gpus", "64", "--modes", "rollout_async", "--ratios", "1:1",
             "--emit", "rlinf", "-o", str(tmp_path / "plan.json"), "--quiet")
    assert r.returncode == 0, r.stderr
    # the search ranks the plan as RLinf runs it (issue 41): the chosen row's micro-batch, said once
    notes = [ln for ln in r.stderr.splitlines() if "micro_batch_size" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: chosen plan: micro_batch_size 128 -> 32"), r.stderr
    (tmp_path / "frag.yaml").write_text(r.stdout)
    back = load_rlinf(tmp_path / "frag.yaml").plan
    w = back.workload
    from perfmodel.schema.rules import batch_split_is_whole

    assert (w.global_batch_size, w.micro_batch_size, back.actor_gpus) == (1024, 32, 32)
    assert w.global_batch_size % (w.micro_batch_size * back.actor_gpus) == 0  # RLinf's assert, written out
    assert batch_split_is_whole(w.global_batch_size, back.actor_gpus, w.micro_batch_size)
    assert back.to_dict() == json.loads((tmp_path / "plan.json").read_text())
    # 1:3 on 32 GPUs: 24 actor GPUs split 1024 with no micro-batch: refused, naming the key
    cfg = write_config(tmp_path, "eight", envs=64)
    r = _cli("plan", "--rlinf-config", str(cfg), "--gpus", "32", "--modes", "rollout_async", "--ratios", "1:3",
             "--emit", "rlinf", "--quiet")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[-1].startswith("error: actor.global_batch_size:")
    # the sweep's rows and CSV carry the verdict
    csv = tmp_path / "s.csv"
    r = _cli("sweep", "--rlinf-config", str(cfg), "--gpus", "32", "--modes", "rollout_async", "--ratios", "1:1,1:3",
             "--csv", str(csv), "--quiet", "--no-interval")
    assert r.returncode == 0, r.stderr
    import csv as csvmod

    rows = {row["allocation_ratio"]: row["rlinf_runs_as_emitted"] for row in csvmod.DictReader(csv.open())}
    assert rows == {"1:1": "True", "1:3": "False"}


def test_nft_is_grpos_pipeline_with_its_own_training_pass(tmp_path: Path) -> None:
    """RLinf's NFT (grpo + embodied_nft): GRPO's rollout, groups and batches; per training sample
    one velocity evaluation and its no-grad forward for v_old instead of the denoising chain
    (Backbone.nft_train_flops), so only the training slope changes, by that FLOP ratio."""
    from dataclasses import replace

    from perfmodel.backbones import BACKBONES
    from perfmodel.costs import StageCosts
    from perfmodel.schema.profile import load_profile

    cfg = write_config(tmp_path, adv="grpo", loss="embodied_nft", group=8,
                       extra_algorithm="  nft_xcur_source: resample\n  nft_tau: 1.0")
    im = load_rlinf(cfg)
    p = im.plan
    assert (p.workload.algorithm, p.workload.group_size) == ("nft", 8)
    assert any("embodied_nft costed as GRPO's pipeline" in w and "upper bound" not in w for w in im.warnings)
    profile = load_profile(p.profile)
    grpo = StageCosts(p.with_(workload=replace(p.workload, algorithm="grpo")), profile).profile.costs
    nft = StageCosts(p, profile).profile.costs
    spec = BACKBONES["pi05"]
    assert nft.train_micro_batch_s.slope == pytest.approx(
        grpo.train_micro_batch_s.slope * spec.nft_train_flops() / spec.train_flops())
    assert nft.infer_s == grpo.infer_s
    # pi0.5's prefix dominates: v_old's extra prefix forward about doubles the training pass
    assert 1.5 < spec.nft_train_flops() / spec.train_flops() < 2.5
    # without the v_old recompute the costs are said to be an upper bound
    im = load_rlinf(write_config(tmp_path, "r", adv="grpo", loss="embodied_nft", group=8))
    assert any("upper bound" in w for w in im.warnings)
    # NFT trains a flow-matching head: OpenVLA-OFT has none
    with pytest.raises(ConfigError) as e:
        load_rlinf(write_config(tmp_path, "o", model="openvla_oft", adv="grpo", loss="embodied_nft", group=8))
    assert e.value.field == "algorithm.loss_type" and "flow-matching" in e.value.message


def test_a_refused_algorithm_says_what_it_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:  # SAC without use_dsrl: not DSRL
        load_rlinf(write_config(tmp_path, adv="embodied_sac", loss="embodied_sac"))
    assert e.value.field == "algorithm.loss_type" and "use_dsrl" in e.value.message


def _with_model_keys(cfg: Path, lines: str, rollout: str = "") -> Path:
    """``cfg`` with ``lines`` (indented under actor.model) and ``rollout`` (under rollout) added."""
    text = cfg.read_text().replace('    model_path: "/path/to/model"', '    model_path: "/path/to/model"\n' + lines)
    if rollout:
        text = text.replace("rollout:\n  enable_offload: False", "rollout:\n  enable_offload: False\n" + rollout)
    cfg.write_text(text)
    return cfg


def test_dsrl_is_the_frozen_vlas_rollout_and_a_small_replay_learner(tmp_path: Path) -> None:
    """RLinf's DSRL (embodied_sac with openpi.use_dsrl): the rollout is the VLA's inference, the
    actor takes update_epoch gradient steps on batches drawn from a replay buffer, each the small
    nets' FLOPs (DsrlNets) plus the target model's soft update over every parameter; only the
    small nets sync. A sync config imports as colocated; SAC without use_dsrl stays refused."""
    from dataclasses import replace

    from perfmodel.backbones import BACKBONES, SOFT_UPDATE_BYTES_PER_PARAM, DsrlNets
    from perfmodel.costs import StageCosts
    from perfmodel.schema.hardware import accelerator
    from perfmodel.simulate import simulate

    cfg = _with_model_keys(write_config(tmp_path, adv="embodied_sac", loss="embodied_sac", shard="no_shard"),
                           "    openpi:\n      use_dsrl: True")
    im = load_rlinf(cfg)
    p, w = im.plan, im.plan.workload
    assert (p.mode, w.algorithm) == ("colocated", "dsrl")
    assert any("costed as DSRL" in x for x in im.warnings)
    assert w.optimizer_steps_per_iteration == w.update_epoch == 2  # not samples / global batch x update_epoch
    profile = load_profile(p.profile)
    ppo, dsrl = StageCosts(p.with_(workload=replace(w, algorithm="ppo")), profile), StageCosts(p, profile)
    spec = BACKBONES["pi05"]
    nets = DsrlNets()
    assert dsrl.profile.costs.infer_s == ppo.profile.costs.infer_s  # the frozen VLA's own calls
    assert dsrl.profile.costs.train_micro_batch_s.slope == pytest.approx(
        ppo.profile.costs.train_micro_batch_s.slope * nets.train_flops() / spec.train_flops())
    assert 4e6 < nets.params < 6e6 and 5e8 < nets.train_flops() < 8e8  # two 2.1M encoders; ten 63 MFLOP passes
    doc = (ROOT / "docs" / "backbones.md").read_text()  # the numbers docs/backbones.md gives
    assert f"{nets.params / 1e6:.2f}M parameters, {nets.train_flops() / 1e6:.0f} MFLOP" in " ".join(doc.split())
    hbm = accelerator(p.cluster.gpu).hbm_GBps * 1e9
    assert dsrl.soft_update_s() == pytest.approx(SOFT_UPDATE_BYTES_PER_PARAM * (spec.params + nets.params) / hbm)
    assert dsrl.optimizer_step_s() > dsrl.soft_update_s() > 0.01  # the frozen VLA's EMA: tens of ms a step
    apart = p.with_(mode="disaggregated", allocation_ratio="1:1", placement_strategy="packed")
    assert StageCosts(apart, profile).weight_sync_s() < StageCosts(
        apart.with_(workload=replace(w, algorithm="ppo")), profile).weight_sync_s() / 100
    # the actor holds the VLA, its target and the target's float32 shadow
    assert dsrl.gpu_memory_gb(activations=False) > ppo.gpu_memory_gb(activations=False)
    r = simulate(p, profile, iterations=3, warmup=1)
    assert r.counts["optimizer_steps"] == 3 * w.update_epoch
    assert r.counts["samples"] == 3 * w.samples_per_iteration
    assert r.throughput_env_steps_per_s > simulate(ppo.plan, profile, iterations=3, warmup=1).throughput_env_steps_per_s
    # DSRL steers an openpi policy's noise: GR00T is refused, naming the switch
    gr = _with_model_keys(write_config(tmp_path, "g", model="gr00t", adv="embodied_sac", loss="embodied_sac"),
                          "    openpi:\n      use_dsrl: True")
    with pytest.raises(ConfigError) as e:
        load_rlinf(gr)
    assert e.value.field == "actor.model.openpi.use_dsrl"


def test_replay_algorithms_refuse_streaming_training() -> None:
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.rules import training_runs

    assert training_runs(1000, 256, 3) == ([(256, 3), (232, 1)], 3)
    assert training_runs(1000, 256, 3, replay=True) == ([(256, 3)], 1)
    prof = load_profile("pi05")
    plan = published_plan(prof, "streamer", 8, "1:1").to_dict()
    plan["workload"]["algorithm"] = "dagger"
    with pytest.raises(ConfigError) as e:
        Plan.from_dict(plan)
    assert e.value.field == "plan.mode" and "replay buffer" in e.value.message


def test_dagger_and_opd_run_a_second_model_in_the_rollout(tmp_path: Path) -> None:
    """DAgger (embodied_dagger) and on-policy distillation (opd): a model of the policy's shapes
    beside it in the rollout worker (rollout.expert_model): its GPU work per call 2 - beta_min
    (DAgger) or 2 (OPD) times the policy's, both resident; DAgger trains by supervised flow
    matching on replay batches (one velocity evaluation a sample), OPD with GRPO's pass."""
    from dataclasses import replace

    from perfmodel.backbones import BACKBONES
    from perfmodel.costs import DAGGER_BETA_MIN, StageCosts

    expert = "  expert_model:\n    model_path: /path/to/expert\n"
    dag = load_rlinf(_with_model_keys(write_config(tmp_path, "d", adv="gae", loss="embodied_dagger",
                                                   placement="    actor: 0-3\n    env: 4-7\n    rollout: 4-7"),
                                      "", rollout=expert))
    opd = load_rlinf(_with_model_keys(write_config(tmp_path, "o", adv="opd", loss="opd", group=8), "", rollout=expert))
    assert (dag.plan.mode, dag.plan.workload.algorithm) == ("disaggregated", "dagger")
    assert (opd.plan.workload.algorithm, opd.plan.workload.group_size) == ("opd", 8)
    assert dag.plan.workload.optimizer_steps_per_iteration == dag.plan.workload.update_epoch
    assert any("costed as DAgger" in x for x in dag.warnings) and any("opd" in x for x in opd.warnings)
    spec = BACKBONES["pi05"]
    for im, passes, train in ((dag, 2 - DAGGER_BETA_MIN, spec.sft_train_flops() / spec.train_flops()),
                              (opd, 2.0, 1.0)):
        p = im.plan
        profile = load_profile(p.profile)
        base = StageCosts(p.with_(workload=replace(p.workload, algorithm="ppo", group_size=1)), profile)
        mine = StageCosts(p, profile)
        b, m = base.profile.costs, mine.profile.costs
        assert m.infer_s.slope == pytest.approx(b.infer_s.slope * passes)
        assert m.infer_s.intercept - m.infer_latency_s == pytest.approx((b.infer_s.intercept - b.infer_latency_s) * passes)
        assert m.train_micro_batch_s.slope == pytest.approx(b.train_micro_batch_s.slope * train)
        assert mine.gpu_memory_gb(activations=False) > base.gpu_memory_gb(activations=False)
    # without the second model there is nothing to cost
    with pytest.raises(ConfigError) as e:
        load_rlinf(write_config(tmp_path, "n", adv="opd", loss="opd", group=8))
    assert e.value.field == "rollout.expert_model"


@pytest.mark.parametrize("algorithm", ["dsrl", "dagger", "opd"])
def test_emit_round_trips_the_new_algorithms(tmp_path: Path, algorithm: str) -> None:
    from dataclasses import replace

    prof = load_profile("pi05")
    plan = published_plan(prof, "colocated", 8, None)
    plan = plan.with_(workload=replace(plan.workload, algorithm=algorithm,
                                       group_size=8 if algorithm == "opd" else 1))
    cfg = tmp_path / "frag.yaml"
    cfg.write_text(emit_yaml(plan, "pi05"))
    back = load_rlinf(cfg).plan
    assert back.workload.algorithm == algorithm


def test_a_group_rlinf_lacks_composes_from_the_forks_file_and_says_so(tmp_path: Path) -> None:
    """libero_spatial_dagger_openpi_lerobot.yaml names training_backend/fsdp, which neither RLinf's
    config folder nor rlinf 0.3.0 holds: it composes with the fork's file (bundled unmodified), whose
    keys are RLinf's hybrid_engines/fsdp.yaml's but for fsdp_size and amp (neither read by rlinf
    0.3.0 nor here), and the import says which file supplied it; a group no file holds still fails."""
    import yaml

    from perfmodel.rlinf.compose import FALLBACK_GROUPS, compose

    if not REFERENCE.is_dir():
        pytest.skip(f"RLinf reference configs not found at {REFERENCE}")
    bundled = FALLBACK_GROUPS / "training_backend" / "fsdp.yaml"
    fork_file = REFERENCE.parent / "rl-vla3-fork" / "config" / "training_backend" / "fsdp.yaml"
    assert bundled.read_bytes() == fork_file.read_bytes()
    ours, rlinf = yaml.safe_load(bundled.read_text()), yaml.safe_load((REFERENCE / "hybrid_engines" / "fsdp.yaml").read_text())
    assert set(ours) ^ set(rlinf) == {"fsdp_size", "amp", "amp_autocast", "grad_scaler"}
    assert all(ours[k] == rlinf[k] for k in set(ours) & set(rlinf))
    c = compose(REFERENCE / "libero_spatial_dagger_openpi_lerobot.yaml")
    assert c.get("actor.fsdp_config.sharding_strategy") == "no_shard" and c.get("actor.fsdp_config.fsdp_size") == -1
    assert any("training_backend/fsdp" in n and "perfmodel/rlinf/groups/training_backend/fsdp.yaml" in n
               for n in c.notes), c.notes
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("defaults:\n", "defaults:\n  - training_backend/megatron@actor.x\n", 1))
    with pytest.raises(ConfigError) as e:
        compose(cfg)
    assert "Could not load 'training_backend/megatron'" in str(e.value)


def test_an_actor_spanning_the_rollouts_gpus_is_colocated_with_the_rollout_on_those(tmp_path: Path) -> None:
    """``actor: 0-7`` with ``env,rollout: 4-7`` (libero_spatial_dagger_openpi_lerobot.yaml's
    placement): RLinf's synchronous runner rolls out on 4-7, then trains on all 8: colocated with
    colocated_rollout_gpus 4, said in a warning; the emitted fragment reads back as the same plan;
    asynchronous settings or another mode on that placement are refused, naming the key."""
    nested = "    actor: 0-7\n    env,rollout: 4-7"
    im = load_rlinf(write_config(tmp_path, placement=nested))
    p = im.plan
    assert (p.mode, p.cluster.gpus, p.rollout_gpus, p.actor_gpus, p.colocated_rollout_gpus) == ("colocated", 8, 4, 8, 4)
    assert p.envs_per_worker == 96
    assert any("spans env and rollout on 4-7" in w and "embodied_runner.py" in w for w in im.warnings), im.warnings
    frag = tmp_path / "frag.yaml"
    frag.write_text(emit_yaml(p, "pi05"))
    assert load_rlinf(frag).plan.to_dict() == p.to_dict()
    with pytest.raises(ConfigError) as e:
        load_rlinf(write_config(tmp_path, "a", placement=nested, extra_algorithm="  staleness_threshold: 1"))
    assert e.value.field == "cluster.component_placement.actor"
    with pytest.raises(ConfigError) as e:
        load_rlinf(write_config(tmp_path, "m", placement=nested), mode="disaggregated")
    assert e.value.field == "--mode"
    # `plan` compares its best with the config as written: this placement, not colocated on all 8
    r = run_cli("plan", "--rlinf-config", str(write_config(tmp_path, "w", placement=nested, envs=64)), "--json")
    assert r.returncode == 0, r.stderr
    written = json.loads(r.stdout)["config_gains"]["over_config"]["throughput_env_steps_per_s"]
    r = run_cli("predict", "--rlinf-config", str(tmp_path / "w.yaml"), "--json", "--no-interval")
    assert written == pytest.approx(json.loads(r.stdout)["throughput_env_steps_per_s"], rel=1e-9)
    # an actor that covers only part of the rollout's GPUs stays refused
    with pytest.raises(ConfigError) as e:
        load_rlinf(write_config(tmp_path, "p", placement="    actor: 0-5\n    env,rollout: 4-7"))
    assert e.value.field == "cluster.component_placement.actor" and "partly overlaps" in e.value.message


def test_the_lerobot_dagger_config_predicts_on_its_own_placement() -> None:
    if not REFERENCE.is_dir():
        pytest.skip(f"RLinf reference configs not found at {REFERENCE}")
    im = load_rlinf(REFERENCE / "libero_spatial_dagger_openpi_lerobot.yaml")
    p = im.plan
    assert (p.mode, p.rollout_gpus, p.actor_gpus, p.workload.algorithm, im.backbone) == ("colocated", 4, 8, "dagger", "pi0")
    assert any(w.startswith("algorithm.dagger.online_lerobot") for w in im.warnings), im.warnings
    r = run_cli("predict", "--rlinf-config", str(REFERENCE / "libero_spatial_dagger_openpi_lerobot.yaml"), "--json",
                "--no-interval")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["rollout_gpus"], out["actor_gpus"], out["gpus"]) == (4, 8, 8)
    assert out["throughput_env_steps_per_s"] <= out["bound_env_steps_per_s"] * (1 + 1e-9)
    # on another cluster size the rollout keeps its share of the GPUs, as the envs keep theirs
    cfg = str(REFERENCE / "libero_spatial_dagger_openpi_lerobot.yaml")
    r = run_cli("predict", "--rlinf-config", cfg, "--gpus", "16", "--json", "--no-interval")
    assert r.returncode == 0, r.stderr
    assert (json.loads(r.stdout)["rollout_gpus"], json.loads(r.stdout)["total_num_envs"]) == (8, 16)
    r = run_cli("predict", "--rlinf-config", cfg, "--gpus", "3")
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: --gpus: the config's rollout on 4")

"""The RL-VLA3 fork's configs (issue 29, item 3) on a reconstruction of its layout
(tests/data/rlvla3_fork/README.md): composed with EMBODIED_PATH as the fork's scripts set it, its
asynchronous keys mapped onto the plan, its hybrid placement refused naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.rlinf.importer import UnnamedModeError, load_rlinf
from perfmodel.schema.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
FORK = ROOT / "tests" / "data" / "rlvla3_fork"
LIBERO = FORK / "config" / "libero"


@pytest.fixture
def embodied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBODIED_PATH", str(FORK))


def test_async_config_becomes_an_async_plan_with_its_batch_and_timeout(embodied: None) -> None:
    im = load_rlinf(LIBERO / "libero_10_ppo_pi05_async.yaml")
    p = im.plan
    assert (p.mode, p.allocation_ratio, p.cluster.gpus) == ("rollout_async", "1:1", 8)
    # plain per-env-async worker: 2 requests of one env each; 200 ms
    assert (p.b_max, p.t_max_s) == (2, 0.2)
    assert p.max_staleness == 1
    assert any("2 requests (plain per-env-async worker)" in w and "b_max 2 envs" in w for w in im.warnings)
    assert any("staleness_threshold" in w and "staleness 1" in w for w in im.warnings)
    # the fork's keys are read, not listed as unread asynchronous settings
    assert not any("does not read it" in w for w in im.warnings)
    assert not any("EMBODIED_PATH" in w for w in im.warnings)  # it is set


def test_flex_worker_counts_samples_and_streaming_is_the_streamer(embodied: None) -> None:
    im = load_rlinf(LIBERO / "libero_10_ppo_pi05_async_flex_stream.yaml")
    assert (im.plan.mode, im.plan.b_max, im.plan.t_max_s) == ("streamer", 48, 0.1)
    assert any("48 samples (flex worker" in w for w in im.warnings)


def test_col_is_colocated(embodied: None) -> None:
    im = load_rlinf(LIBERO / "libero_10_ppo_pi05_col.yaml")
    assert (im.plan.mode, im.plan.cluster.gpus, im.plan.b_max) == ("colocated", 8, None)
    assert im.plan.workload.total_num_envs == 384 and im.plan.workload.max_episode_steps == 480


def test_hyb62_is_refused_naming_the_placement(embodied: None) -> None:
    with pytest.raises(ConfigError) as e:
        load_rlinf(LIBERO / "libero_10_ppo_pi05_hyb62.yaml")
    assert e.value.field == "cluster.component_placement" and "hyb62-style" in e.value.message


def test_without_embodied_path_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBODIED_PATH", raising=False)
    im = load_rlinf(LIBERO / "libero_10_ppo_pi05_async.yaml")
    notes = [w for w in im.warnings if "EMBODIED_PATH is not set" in w]
    assert len(notes) == 1 and str(FORK) in notes[0]
    assert im.plan.mode == "rollout_async"


def test_embodied_path_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A wrong EMBODIED_PATH is used as given (the groups are not found there), not replaced."""
    monkeypatch.setenv("EMBODIED_PATH", str(tmp_path))
    with pytest.raises(ConfigError) as e:
        load_rlinf(LIBERO / "libero_10_ppo_pi05_async.yaml")
    assert "cannot compose" in e.value.message


def _write(tmp_path: Path, src: str, old: str, new: str) -> Path:
    """A copy of a fixture config with one change, in a copy of the fork's layout."""
    import shutil

    root = tmp_path / "fork"
    shutil.copytree(FORK, root)
    p = root / "config" / "libero" / src
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new))
    return p


@pytest.mark.parametrize("src, old, new, field", [
    ("libero_10_ppo_pi05_async.yaml", "max_batch_size: 2", "max_batch_size: 0", "rollout.per_env_async.max_batch_size"),
    ("libero_10_ppo_pi05_async.yaml", "batch_timeout_ms: 200", "batch_timeout_ms: -5",
     "rollout.per_env_async.batch_timeout_ms"),
    ("libero_10_ppo_pi05_async.yaml", "streaming_mode: False", "streaming_mode: True",
     "actor.gradient_accumulation_across_epochs"),
    ("libero_10_ppo_pi05_async.yaml", "env:\n  per_env_async:\n    enabled: True",
     "env:\n  per_env_async:\n    enabled: False", "env.per_env_async.enabled"),
])
def test_bad_fork_values_are_refused_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, src: str,
                                                    old: str, new: str, field: str) -> None:
    p = _write(tmp_path, src, old, new)
    monkeypatch.setenv("EMBODIED_PATH", str(tmp_path / "fork"))
    with pytest.raises(ConfigError) as e:
        load_rlinf(p)
    assert e.value.field == field


def test_per_env_async_on_col_is_colocated_with_the_per_env_asynchronous_rollout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fork's col_as (pipeline_mode sync, the default): colocated, its rollout per-env
    asynchronous (dynamic batching beside synchronous training); --mode still names another."""
    p = _write(tmp_path, "libero_10_ppo_pi05_col.yaml", "    enabled: False\n  train:", "    enabled: True\n  train:")
    text = p.read_text().replace("  per_env_async:\n    enabled: False\n", "  per_env_async:\n    enabled: True\n")
    p.write_text(text)
    monkeypatch.setenv("EMBODIED_PATH", str(tmp_path / "fork"))
    im = load_rlinf(p)
    assert (im.plan.mode, im.plan.rollout, im.plan.allocation_ratio) == ("colocated", "per_env_async", None)
    assert im.plan.mechanisms.dynamic_batching and not im.plan.mechanisms.async_training
    assert any("the fork's col_as" in w for w in im.warnings)
    assert load_rlinf(p, mode="disaggregated").plan.rollout == "per_env_async"
    # with pipeline_mode async it is the fork's col_aa: rollout_async on the shared GPUs
    p.write_text(text.replace("algorithm:\n", "algorithm:\n  pipeline_mode: async\n", 1))
    im = load_rlinf(p)
    assert (im.plan.mode, im.plan.allocation_ratio, im.plan.max_staleness, im.plan.rollout) == (
        "rollout_async", None, 0, None)
    m = im.plan.mechanisms
    assert m.trains_beside_rollout and m.dynamic_batching and not m.disaggregated
    p.write_text(text.replace("algorithm:\n", "algorithm:\n  pipeline_mode: later\n", 1))
    with pytest.raises(ConfigError) as e:
        load_rlinf(p)
    assert e.value.field == "algorithm.pipeline_mode"


# The fork's own LIBERO configs in its layout (../shared/reference/rl-vla3-fork/config).
FORK_REFERENCE = next((p / "shared" / "reference" / "rl-vla3-fork" for p in (ROOT.parent, ROOT.parent.parent)
                       if (p / "shared" / "reference" / "rl-vla3-fork" / "config").is_dir()),
                      ROOT.parent / "shared" / "reference" / "rl-vla3-fork")


def _fork_configs() -> list[Path]:
    if not (FORK_REFERENCE / "config" / "libero").is_dir():
        pytest.skip(f"the fork's configs not found at {FORK_REFERENCE} (CI keeps ../shared/reference beside the clone)")
    return sorted((FORK_REFERENCE / "config" / "libero").glob("libero_col_*.yaml"))


def test_every_fork_libero_config_imports_as_its_name_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """ss: colocated, lock-step; as: colocated with the per-env asynchronous rollout; aa:
    rollout_async on the shared GPUs, staleness 0 (a step's rollout starts from the weights the
    step before trained). pipe{P} is the pipeline stages; the flex workers' max_batch_size is b_max."""
    from perfmodel.prediction import predict
    from perfmodel.schema.profile import load_profile

    monkeypatch.setenv("EMBODIED_PATH", str(FORK_REFERENCE))
    configs = _fork_configs()
    assert len(configs) == 7
    seen = {}
    for cfg in configs:
        _, _, kind, _, pipe = cfg.stem.split("_")
        p = load_rlinf(cfg).plan
        assert p.cluster.gpus == 8 and p.pipeline_stage_num == int(pipe.removeprefix("pipe")), cfg.name
        assert p.allocation_ratio is None and not p.mechanisms.disaggregated
        assert (p.mode, p.rollout_kind, p.mechanisms.async_training) == {
            "ss": ("colocated", "lockstep", False), "as": ("colocated", "per_env_async", False),
            "aa": ("rollout_async", "per_env_async", True)}[kind], cfg.name
        if kind != "ss":
            assert p.effective_b_max == 384 // 8 // p.pipeline_stage_num  # one env manager's envs
        if kind == "aa":
            assert p.max_staleness == 0
        seen[kind, pipe] = p
    # one of each asynchronous kind predicts (the simulator runs the fork's rollout beside either training)
    for key in (("as", "pipe2"), ("aa", "pipe2")):
        d = predict(seen[key], load_profile(seen[key].profile), interval=False)
        assert d["throughput_env_steps_per_s"] > 0
        # the prediction names the plan's rollout where the plan does (as), not the mode's own (aa)
        assert d.get("rollout") == ("per_env_async" if key[0] == "as" else None)
    from inproc import run_main

    r = run_main("predict", "--rlinf-config", str(FORK_REFERENCE / "config" / "libero" / "libero_col_as_env256_pipe4.yaml"),
                 "--no-interval")
    assert r.exit_code == 0 and "colocated, rollout per_env_async" in r.output


@pytest.mark.parametrize("old, new, field", [
    ("        - [[1],[1]]\n", "        - [[0],[1]]\n", "rollout.per_env_async.flex.rollout_ranks_by_env_rank_stage"),
    ("        - [24,24]   # env rank 1\n", "        - [24,12,12]   # env rank 1\n",
     "env.per_env_async.flex.manager_batch_sizes_by_env_rank"),
    ("    total_num_envs: 384", "    total_num_envs: 320", "env.per_env_async.flex.manager_batch_sizes_by_env_rank"),
])
def test_a_flex_table_vlaperf_cannot_run_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              old: str, new: str, field: str) -> None:
    import shutil

    _fork_configs()
    shutil.copytree(FORK_REFERENCE / "config", tmp_path / "config")
    p = tmp_path / "config" / "libero" / "libero_col_aa_env256_pipe2.yaml"
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    monkeypatch.setenv("EMBODIED_PATH", str(tmp_path))
    with pytest.raises(ConfigError) as e:
        load_rlinf(p)
    assert e.value.field == field and "\n" not in str(e.value)


def _tiny_fork_plan(**changes):
    """The fork's col layout at the executor's test scale: 4 envs on 2 shared slots, 2 env
    managers (pipeline stages) per worker, 2 rollout epochs (gradients accumulate across them)."""
    from perfmodel.schema.plan import Plan

    d = {"mode": "rollout_async", "allocation_ratio": None, "pipeline_stage_num": 2, "b_max": 1, "t_max_s": 0.05,
         "max_staleness": 0, "profile": "gr00t_n15_tiny_cpu",
         "workload": {"total_num_envs": 4, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 2,
                      "update_epoch": 1, "micro_batch_size": 2, "global_batch_size": 4, "group_size": 1,
                      "algorithm": "ppo"},
         "cluster": {"gpus": 2, "gpus_per_node": 2, "cpu_cores_per_node": 2, "node_ram_gb": 24,
                     "intra_node_bw_GBps": 2.4, "inter_node_bw_GBps": 2.4}}
    d.update(changes)
    return Plan.from_dict(d)


def test_the_executor_wires_the_forks_col_as_and_aa_from_the_plan() -> None:
    """Without Ray: as = the colocated wiring with dynamic batching (models swap, the trainer
    waits for the rollout); aa = the shared-GPU wiring with dynamic batching, staleness 0."""
    from executor.runtime.modes import layout

    as_ = layout(_tiny_fork_plan(mode="colocated", rollout="per_env_async", max_staleness=1))
    assert (as_.dynamic_batching, as_.phase_swaps, as_.trains_after_rollout, as_.staleness) == (True, True, True, 0)
    aa = layout(_tiny_fork_plan())
    assert (aa.dynamic_batching, aa.phase_swaps, aa.trains_after_rollout, aa.staleness) == (True, False, False, 0)
    assert aa.rollout_slots == aa.actor_slots == [0, 1] and aa.b_max == 1


@pytest.mark.slow
def test_the_executor_runs_the_forks_col_aa(ray_session) -> None:
    """The fork's aa for real (2 envs, 2 env managers, on one shared slot, 2 rollout epochs):
    per-env batches of b_max, the trainer taking
    each global batch as it fills, the next iteration's rollout waiting for its weights."""
    from quick_envs import QUICK_ENVS

    from executor.runtime.modes import RunOptions
    from executor.runtime.session import execute

    plan = _tiny_fork_plan(workload={**_tiny_fork_plan().workload.__dict__, "total_num_envs": 2},
                           cluster={**_tiny_fork_plan().cluster.__dict__, "gpus": 1, "gpus_per_node": 1})
    record, rec = execute(plan, iterations=2, warmup=1, progress=False,
                          opts=RunOptions(backbone="gr00t_n15", image_size=64, **QUICK_ENVS))
    w, c = plan.workload, record["counts"]
    assert record["status"] == "ok" and c["env_steps"] == w.env_steps_per_iteration * 2
    assert c["optimizer_steps"] == w.optimizer_steps_per_iteration * 2 and c["weight_versions"] == 2
    assert record["staleness"]["max"] == 0
    batches = [e["args"]["batch"] for e in rec.chrome_trace()["traceEvents"] if e["name"] == "inference"]
    assert batches and max(batches) <= plan.b_max and sum(batches) == w.samples_per_iteration * 2


def test_plan_from_a_col_as_config_keeps_its_rollout_on_the_synchronous_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config's per-env asynchronous rollout carries to colocated (the config as written) and
    not to train_async (which would be rollout_async): no row is lost as infeasible for it."""
    from inproc import run_main

    monkeypatch.setenv("EMBODIED_PATH", str(FORK_REFERENCE))
    cfg = _fork_configs()[2]
    assert cfg.name == "libero_col_as_env256_pipe2.yaml"
    r = run_main("plan", "--rlinf-config", str(cfg), "--gpus", "8")
    assert r.exit_code == 0 and "plan.rollout" not in r.output
    assert "Over your config as written (colocated" in r.output
    assert any(line.split()[1:2] == ["train_async"] for line in r.output.splitlines() if line[:1].isdigit())

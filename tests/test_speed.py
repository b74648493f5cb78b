"""Issue 14: what makes answers fast, checked without timing anything (imports, order, Ray)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_plain_predict_imports_nothing_heavy():
    """A prediction without replications loads no scipy (about 1 s of start-up on this
    machine kind), nor torch, Ray or LIBERO (numpy is allowed: the default interval uses it)."""
    mods = _modules_after(
        "from perfmodel.cli import main\n"
        "try:\n    main(['predict', '--mode', 'streamer', '--gpus', '32', '--ratio', '1:1', '--json'])\n"
        "except SystemExit:\n    pass")
    for heavy in ("scipy", "torch", "ray", "libero"):
        assert heavy not in mods, heavy


def test_interval_loads_scipy_only_when_asked(scenario_dict):
    mods = _modules_after(
        "import json\nfrom perfmodel.schema.profile import Profile\n"
        "from perfmodel.calibration.reference import published_plan\nfrom perfmodel.prediction import predict\n"
        f"d = json.loads({json.dumps(json.dumps({**scenario_dict, 'variability': {'infer_cv': 0.1}}))})\n"
        "p = Profile.from_dict(d)\npredict(published_plan(p, 'rollout_async', 8, '1:1'), p, replications=3)")
    assert "scipy.special" in mods and "scipy.stats" not in mods


def test_replication_interval_is_students_t(scenario_dict):
    """The replications' 95 % interval uses scipy.special.stdtrit, which is scipy.stats.t.ppf
    bit for bit (checked here for every replication count the CLI allows), and deterministic
    costs run one simulation for all replications (a zero-width interval, up to rounding)."""
    from scipy import special, stats

    from perfmodel.calibration.reference import published_plan
    from perfmodel.schema.profile import Profile
    from perfmodel.prediction import predict

    assert all(float(special.stdtrit(n - 1, 0.975)) == float(stats.t.ppf(0.975, n - 1)) for n in range(2, 1001))
    scenario_dict["variability"] = {"env_step_cv": 0.2, "infer_cv": 0.1, "train_cv": 0.2}
    prof = Profile.from_dict(scenario_dict)
    plan = published_plan(prof, "rollout_async", 8, "1:1")
    p = predict(plan, prof, replications=4, seed=3, interval=False)
    thr = [predict(plan, prof, seed=3 + r, interval=False)["throughput_env_steps_per_s"] for r in range(4)]
    mean = sum(thr) / 4
    sd = (sum((t - mean) ** 2 for t in thr) / 3) ** 0.5
    half = float(stats.t.ppf(0.975, 3)) * sd / 2
    assert p["throughput_ci95"] == pytest.approx([mean - half, mean + half], rel=1e-12)
    assert len(set(thr)) == 4
    fixed = Profile.from_dict({**scenario_dict, "variability": {}})
    q = predict(published_plan(fixed, "rollout_async", 8, "1:1"), fixed, replications=3, interval=False)
    assert q["throughput_ci95"] == pytest.approx([q["throughput_env_steps_per_s"]] * 2, rel=1e-12)


def test_sweep_without_address_never_imports_ray(scenario_dict):
    mods = _modules_after(
        "import json\nfrom perfmodel.schema.profile import Profile\n"
        "from perfmodel.planning.sweep import SweepSpec, run_sweep\n"
        f"p = Profile.from_dict(json.loads({json.dumps(json.dumps(scenario_dict))}))\n"
        "run_sweep(SweepSpec(profile_ref='x', gpus=(8,), ratios=('1:1',)), p, jobs=2)")
    assert "ray" not in mods


def test_sweep_runs_expensive_plans_first_and_keeps_row_order(scenario_profile):
    from perfmodel.planning.sweep import SweepSpec, _cost_order, combinations, run_sweep

    spec = SweepSpec(profile_ref="x", gpus=(8, 16), ratios=("1:1", "1:3"))
    order = _cost_order(combinations(spec))
    dyn = [c.mode in ("rollout_async", "streamer") for c in order]
    assert dyn == sorted(dyn, reverse=True) and any(dyn) and not all(dyn)
    doc = run_sweep(spec, scenario_profile, jobs=2)
    assert [r["index"] for r in doc["rows"]] == list(range(len(doc["rows"])))
    serial = run_sweep(spec, scenario_profile, jobs=1)
    assert [r.get("throughput_env_steps_per_s") for r in doc["rows"]] == \
        [r.get("throughput_env_steps_per_s") for r in serial["rows"]]


def test_sweep_bar_off_when_stdout_is_not_a_terminal(tmp_path):
    from conftest import run_cli

    res = run_cli("sweep", "--modes", "colocated", "--gpus", "8")
    assert res.returncode == 0, res.stderr
    assert "it/s" not in res.stderr and "plan/s" not in res.stderr and "%|" not in res.stderr


def test_sweep_on_a_local_ray_cluster_matches_the_pool():
    """``--address local`` (a new local Ray cluster, ray.init()): the same rows as the process
    pool, intervals included, with progress up to every plan (about 20 s here, mostly Ray's
    start-up, so not marked slow)."""
    from perfmodel.planning.sweep import SweepSpec, run_sweep
    from perfmodel.schema.profile import load_profile

    prof = load_profile("pi05")
    spec = SweepSpec(profile_ref="pi05", gpus=(8, 16), ratios=("1:1", "3:1"), b_max=(None, 64))
    pool = run_sweep(spec, prof, jobs=2)
    seen: list[tuple[int, int]] = []
    ray_doc = run_sweep(spec, prof, address="local", progress=lambda done, total: seen.append((done, total)))
    assert ray_doc["rows"] == pool["rows"] and ray_doc["summary"] == pool["summary"]
    assert sum(r["status"] == "ok" for r in pool["rows"]) >= 8
    assert any(r.get("throughput_low") is not None for r in pool["rows"])
    assert seen[-1] == (len(pool["rows"]), len(pool["rows"]))


def test_bad_ray_address_is_one_line():
    from conftest import run_cli

    res = run_cli("sweep", "--modes", "colocated", "--gpus", "8", "--address", "127.0.0.1:1", "--quiet")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().startswith("error: --address:") and len(res.stderr.strip().splitlines()) == 1, res.stderr

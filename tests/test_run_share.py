"""``executor profile --run-share`` (issue 30): the share of their cores the env processes get in a
real run of a mode on this host, stored as Costs.env_cpu_share and charged by the simulator."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli
from quick_envs import QUICK_ENVS
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import Profile, load_profile

pytest.importorskip("ray")

TINY = {"total_num_envs": 2, "max_episode_steps": 10, "num_action_chunks": 5, "rollout_epoch": 1,
        "update_epoch": 1, "micro_batch_size": 2, "global_batch_size": 4, "group_size": 1, "algorithm": "ppo"}


def test_parse_modes_and_refusals(tmp_path: Path) -> None:
    from executor.profiling.runshare import parse_modes, share_plan

    assert parse_modes("none") == () and parse_modes("all")[0] == "colocated"
    assert parse_modes("colocated, rollout_async") == ("colocated", "rollout_async")
    with pytest.raises(ConfigError, match="run-share: must be none, all or modes among"):
        parse_modes("colocated,streamr")
    with pytest.raises(ConfigError, match="needs 2 or more"):
        share_plan("disaggregated", TINY, 1, "x", 24.0)
    r = run_cli("profile", "--backbone", "pi05", "--out", str(tmp_path / "p.json"), "--run-share", "fast",
                module="executor.cli")
    assert r.returncode == 2 and r.stderr.startswith("error: run-share:") and len(r.stderr.splitlines()) == 1
    r = run_cli("profile", "--comm", "--out", str(tmp_path / "p.json"), "--run-share", "all", module="executor.cli")
    assert r.returncode == 2 and "--run-share" in r.stderr and not (tmp_path / "p.json").exists()


def test_adding_the_share_to_a_profile_refuses_what_it_cannot_measure(tmp_path: Path) -> None:
    """``--run-share MODES --base-profile P`` measures the shares alone on this host and adds them to
    P: refused, one line naming the option and nothing written, for a --base-profile without
    --run-share or --comm, for an option it would not use, for a profile that was fitted or
    measured on another host or device (a GPU profile on this CPU device)."""
    from inproc import run_main

    out = tmp_path / "p.json"
    root = Path(__file__).resolve().parent.parent / "profiles"
    cases = [
        (["--base-profile", str(root / "pi05_tiny_cpu.json")], "error: --base-profile: only with --comm"),
        (["--run-share", "rollout_async", "--base-profile", str(root / "pi05_tiny_cpu.json"), "--backbone", "pi05"],
         "error: --backbone: is not for --run-share with --base-profile"),
        (["--run-share", "rollout_async", "--base-profile", str(root / "pi05.json")],
         "error: --base-profile: with --run-share it must be a profile executor profile measured"),
        (["--run-share", "rollout_async", "--base-profile", str(root / "pi05_full_gpu.json")],
         "error: --base-profile: with --run-share it must be measured on this host and device"),
    ]
    for args, first in cases:
        r = run_main("profile", *args, "--out", str(out), "--no-progress", module="executor.cli")
        assert r.returncode == 2 and r.stderr.startswith(first) and len(r.stderr.splitlines()) == 1, (args, r.stderr)
        assert not out.exists()


@pytest.mark.slow
def test_a_real_run_measures_the_share_and_the_prediction_charges_it(tmp_path: Path) -> None:
    """A 3-iteration disaggregated run on this host (real LIBERO scenes stepped the quick_envs way,
    tiny stand-in, Ray actors):
    the env processes' share of their cores is measured in (0, 1], kept with the run's raw
    figures, and a profile carrying it predicts that mode slower by no more than the share says
    (env stages stretched, the rest unchanged) and every other mode as before."""
    from executor.profiling.runshare import measure_run_share
    from executor.runtime.modes import RunOptions
    from perfmodel.calibration.reference import published_plan
    from perfmodel.simulate import simulate

    got = measure_run_share(("disaggregated",), TINY, 2, "pi05_tiny_cpu", 24.0,
                            RunOptions(backbone="pi05", scale="tiny", image_size=64, **QUICK_ENVS))
    share = got["disaggregated"]
    assert 0 < share["env_step"] <= 1 and 0 < share["env_reset"] <= 1
    raw = share["raw"]
    assert raw["env_cpu"]["env_step"]["cpu_s"] > 0 and raw["plan"]["mode"] == "disaggregated"
    prof = load_profile("pi05_tiny_cpu")
    charged = replace(prof, costs=replace(prof.costs, env_cpu_share={
        "disaggregated": {k: share[k] for k in ("env_step", "env_reset")}}))
    Profile.from_dict(json.loads(json.dumps(charged.to_dict())))  # what a reader accepts
    for mode in ("disaggregated", "colocated"):
        plan = published_plan(prof, mode, 2, None if mode == "colocated" else "1:1")
        a = simulate(plan, prof, iterations=3, warmup=1).throughput_env_steps_per_s
        b = simulate(plan, charged, iterations=3, warmup=1).throughput_env_steps_per_s
        if mode == "colocated":
            assert b == a
        else:
            assert a * min(share["env_step"], share["env_reset"]) * (1 - 1e-9) <= b <= a
    print("run share:", json.dumps({k: v for k, v in share.items() if k != "raw"}), "load", raw["loadavg_before_after"])

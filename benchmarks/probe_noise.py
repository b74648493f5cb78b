"""How closely a probe taken before a run can know the env cost the run's measured window pays, on
this host: the noise floor of any prediction made before the run, with no model involved.

Each repetition takes the workload grid's point ``colo_e4_c5`` (4 LIBERO envs, 2 a core, chunk 5,
horizon 30; real scenes, rendered) and measures, one after the other, as a run would meet them:

1. **the pre-run probe**, as ``executor run --compare`` takes it (``executor.runtime.probe.probe_host``:
   env processes of its own, created, stepped, closed);
2. **the run's env processes**, laid out as the run pins them (``probe_layout``):
   - first stepped as the probe steps (``probe_steps``): the probe it would be on the run's own processes;
   - then one episode (the run's warm-up iteration);
   - then ``--episodes`` episodes (the measured window): reset, then ``horizon / chunk`` chunk steps
     with the stand-in policy's action spread.

The CPU seconds per env step of each probe over the window's is what a prediction made before the
run gets wrong about the env cost, whatever the model: for a point whose throughput follows its
env cost, its error. The summary gives each probe's ratios (geometric mean, standard deviation of
their logarithms, median |ratio - 1|, the share beyond 10 %) and the workload grid's own "run / probe
env step" column beside them.

    python benchmarks/probe_noise.py [--repeats 6] [--episodes 3] [--out FILE]
    python benchmarks/probe_noise.py --summary [--out FILE]     # recompute the summary only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "probe_noise.json"
GRID = ROOT / "benchmarks" / "results" / "workload_grid_current_host.json"
POINT = "colo_e4_c5"
PROBES = ("pre_run_probe", "probe_on_run_processes")


def ratio_stats(ratios: list[float]) -> dict:
    """A probe's CPU seconds per env step over the window's, across repetitions (1.0: the probe
    knew what the window paid): geometric mean, standard deviation of the logarithms, median
    |ratio - 1| and the share of |ratio - 1| above 10 %."""
    logs = [math.log(r) for r in ratios]
    dev = [abs(r - 1) for r in ratios]
    return {"n": len(ratios), "geometric_mean": math.exp(statistics.fmean(logs)),
            "sd_log": statistics.stdev(logs) if len(logs) > 1 else None,
            "median_abs_deviation": statistics.median(dev), "share_beyond_10pct": sum(d > 0.10 for d in dev) / len(dev)}


def summary(reps: list[dict], grid_ratios: list[float]) -> dict:
    """Each probe's stats over the repetitions (its step CPU seconds over the window's), and the
    workload grid's run-over-probe column's."""
    out = {k: ratio_stats([r[k]["step_cpu_s_mean"] / r["window"]["step_cpu_s_mean"] for r in reps]) for k in PROBES}
    out["workload_grid_run_over_probe"] = ratio_stats([1.0 / g for g in grid_ratios]) if grid_ratios else None
    return out


def grid_ratios(path: Path = GRID) -> list[float]:
    """The workload grid's "run / probe env step" column (the run's env CPU seconds per step over
    its pre-run probe's)."""
    doc = json.loads(path.read_text())
    return [r["env_step_cpu_run_over_probe"] for r in doc["points"] if r.get("env_step_cpu_run_over_probe")]


def markdown(doc: dict) -> str:
    """The sentence docs/validation.md states, from the stored result."""
    s = doc["summary"]
    pre, own, g = s["pre_run_probe"], s["probe_on_run_processes"], s["workload_grid_run_over_probe"]
    return (f"Over {pre['n']} repetitions, the pre-run probe's CPU seconds per env step were off the measured "
            f"window's by {100 * pre['median_abs_deviation']:.1f} % at the median (their logarithms' standard "
            f"deviation {pre['sd_log']:.2f}; {pre['share_beyond_10pct'] * pre['n']:.0f} of "
            f"{pre['n']} beyond 10 %); the same probe on the run's own env processes, just before their "
            f"warm-up episode, by {100 * own['median_abs_deviation']:.1f} % ({own['sd_log']:.2f}; "
            f"{own['share_beyond_10pct'] * own['n']:.0f} beyond 10 %). In the grid above, the probe against the "
            f"run's own env CPU seconds: {100 * g['median_abs_deviation']:.1f} % at the median "
            f"({g['sd_log']:.2f}; {g['share_beyond_10pct'] * g['n']:.0f} of {g['n']} beyond 10 %).")


def window(group, cores: list, chunk: int, horizon: int, episodes: int) -> dict:
    """The run's warm-up episode, then ``episodes`` measured: CPU seconds per env step of each."""
    import numpy as np

    from executor.envs import ACTION_DIM, policy_like_actions

    rng = np.random.default_rng(1)
    per_episode = []
    for e in range(1 + episodes):
        group.reset()
        cpu = [np.asarray(group.chunk_step(policy_like_actions(rng, (len(cores), chunk, ACTION_DIM)))["step_cpu_s"])
               for _ in range(horizon // chunk)]
        per_episode.append(float(np.mean(cpu)))
    return {"warm_up_step_cpu_s": per_episode[0], "episode_step_cpu_s": per_episode[1:],
            "step_cpu_s_mean": statistics.fmean(per_episode[1:])}


def repetition(plan, profile, opts, episodes: int) -> dict:
    from dataclasses import replace

    from executor.envs import EnvProcessGroup
    from executor.runtime.probe import probe_env_config, probe_host, probe_layout, probe_steps

    t0 = time.time()
    pre = probe_host(plan, profile, opts)
    cores = probe_layout(plan, profile.costs.env_memory_gb)
    chunk, horizon = plan.workload.num_action_chunks, plan.workload.max_episode_steps
    cfg = probe_env_config(plan, opts)
    cfg = replace(cfg, max_episode_steps=max(horizon, cfg.max_episode_steps))  # the probe's chunks, then episodes
    with EnvProcessGroup(cfg, num_envs=len(cores), cores=tuple(cores), render_threads=1) as group:
        own = probe_steps(group, cores, chunk)
        win = window(group, cores, chunk, horizon, episodes)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "wall_s": time.time() - t0,
            "pre_run_probe": {"step_cpu_s_mean": statistics.fmean(pre.step_cpu_s), "samples": pre.step_cpu_s},
            "probe_on_run_processes": {"step_cpu_s_mean": statistics.fmean(own["step_cpu_s"]),
                                       "samples": own["step_cpu_s"]},
            "window": win}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--episodes", type=int, default=3, help="measured episodes after the warm-up one")
    ap.add_argument("--profile", default=str(ROOT / "benchmarks" / "results" / "workload_grid_profile_current_host.json"))
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--summary", action="store_true", help="recompute the stored result's summary only")
    a = ap.parse_args(argv)
    if a.repeats < 2 or a.episodes < 1:  # a spread needs two repetitions, a window one episode
        ap.error(f"--repeats must be >= 2 and --episodes >= 1; got {a.repeats} and {a.episodes}")
    from perfmodel.schema.jsonio import write_json_atomic

    out = Path(a.out)
    if a.summary:
        doc = json.loads(out.read_text())
        doc["summary"] = summary(doc["repetitions"], grid_ratios())
        write_json_atomic(out, doc)
        print(markdown(doc))
        return 0
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import workload_grid

    from executor.runtime.modes import RunOptions
    from executor.runtime.probe import this_host
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile

    point = next(p for p in workload_grid.GRID if p.name == POINT)
    plan = Plan.from_dict(workload_grid.plan_of(point, a.profile), "plan")
    profile, opts = load_profile(a.profile), RunOptions(seed=0)
    doc = {"source": "python benchmarks/probe_noise.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "point": POINT, "host": this_host(), "loadavg_1min_before": os.getloadavg()[0],
           "unit": "CPU seconds per env step", "repetitions": []}
    for k in range(a.repeats):
        doc["repetitions"].append(repetition(plan, profile, opts, a.episodes))
        r = doc["repetitions"][-1]
        print(f"{k}: pre-run probe / window {r['pre_run_probe']['step_cpu_s_mean'] / r['window']['step_cpu_s_mean']:.3f}, "
              f"on the run's processes {r['probe_on_run_processes']['step_cpu_s_mean'] / r['window']['step_cpu_s_mean']:.3f}",
              flush=True)
        write_json_atomic(out, doc)  # a stopped benchmark keeps what it measured
    doc["loadavg_1min_after"] = os.getloadavg()[0]
    doc["summary"] = summary(doc["repetitions"], grid_ratios())
    write_json_atomic(out, doc)
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The workload grid: RLinf's workloads and the paper's, run for real by the executor and predicted
before each run, on this machine (issue 39).

Each point is one ``executor run PLAN --compare --json`` (real LIBERO scenes in MuJoCo, the
stand-in policy, real Ray actors; one fresh process and Ray session per point); ``--compare``
predicts the plan from the profile, scaled to this host by its pre-run probe, before anything of
the run starts. The profile is measured on this host before the grid (``executor profile``),
unless ``--profile`` names one. The axes, each spanning RLinf's values and the paper's:
- envs per core of an env worker, from below 1 (1 env on 2 cores) to 4 (8 envs on 2 cores; at the
  paper's 48 envs on 16 cores it is 3, at RLinf's 8 on 16 it is 0.5);
- action chunk 5 (RLinf's openpi configs) and 10 (the paper's);
- denoising steps (the backbone's own, and 10: they scale the inference call);
- rollout and update epochs, global and micro batch;
- modes colocated, rollout_async, and train_async on shared GPUs (RLinf's asynchronous PPO).
Colocated's offload/reload costs nothing on CPU device slots (executor.runtime.driver), so the
offload axis needs a GPU: benchmarks/device_h200.sh.

Every point's record keeps the 1-minute load average before and after it (the issue's quiet
machine is below 0.5 before the run); the results are written atomically after each point to
``--out`` (``--resume`` keeps the points already there). The summary: error = prediction /
measurement - 1 per point (docs/metrics.md), median and max |error|, and the slope of the error
against envs per core with its 90 % interval (least squares).

    python benchmarks/workload_grid.py                          # measure the profile, then the grid
    python benchmarks/workload_grid.py --profile P.json --resume --points colo_e4_c5,ra_e1_c5
    python benchmarks/workload_grid.py --smoke --profile profiles/pi05_tiny_cpu.json --out /tmp/g.json
    python benchmarks/workload_grid.py --summary --figure docs/workload_grid.html  # the stored grid
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "workload_grid.json"
PROFILE = ROOT / "benchmarks" / "results" / "workload_grid_profile.json"
QUIET_LOAD = 0.5  # the issue's quiet machine: 1-minute load average below this before a run
# A steady host: the probe run again just after a point measured CPU seconds per env step within
# this fraction of the probe's before it. A prediction made before the run cannot follow a host
# that moved more while the point ran; the summary reports those points apart, never drops them.
STEADY_DRIFT = 0.10
# What the smoke points add to executor run: the scenes without cameras or settle steps (the
# mechanics, at a fraction of the env cost: tests/quick_envs.py).
QUICK = ["--soft-reset", "--settle-steps", "0", "--no-render"]


@dataclass(frozen=True)
class Point:
    name: str
    mode: str
    envs: int  # total_num_envs
    chunk: int = 5
    horizon: int = 30
    gpus: int = 2  # device slots (CPU cores here)
    ratio: str | None = None  # rollout_async 1:1; None: colocated, or train_async on shared GPUs
    rollout_epoch: int = 1
    update_epoch: int = 1
    micro_batch: int = 2  # global batches are multiples of micro x actor GPUs (RLinf refuses others)
    global_batch: int = 12
    denoising_steps: int | None = None


GRID = (
    # colocated: 2 slots, an env worker of 1 core on each
    Point("colo_e2_c5", "colocated", 2),
    Point("colo_e4_c5", "colocated", 4),
    Point("colo_e8_c5", "colocated", 8, horizon=20, global_batch=16),
    Point("colo_e4_c10", "colocated", 4, chunk=10),
    Point("colo_e4_c5_d10", "colocated", 4, denoising_steps=10),
    Point("colo_e4_c5_ep2", "colocated", 4, rollout_epoch=2, update_epoch=2, micro_batch=2, global_batch=8),
    # colocated on one slot: its env worker has both cores
    Point("colo1_e1_c5", "colocated", 1, gpus=1, micro_batch=2, global_batch=6),
    # rollout_async 1:1: one env worker with both cores, dynamic batching
    Point("ra_e1_c5", "rollout_async", 1, ratio="1:1", micro_batch=2, global_batch=6),
    Point("ra_e4_c5", "rollout_async", 4, ratio="1:1"),
    Point("ra_e8_c10", "rollout_async", 8, chunk=10, horizon=20, ratio="1:1", global_batch=16),
    # train_async on shared GPUs (RLinf's asynchronous PPO): an env worker of 1 core on each slot
    Point("ta_e2_c10", "train_async", 2, chunk=10, horizon=60),
    Point("ta_e4_c5", "train_async", 4),
    Point("ta_e8_c5", "train_async", 8, horizon=20, global_batch=16),
)
SMOKE = (
    Point("smoke_colo_e2_c5", "colocated", 2, horizon=10, global_batch=4, micro_batch=2),
    Point("smoke_ra_e1_c5", "rollout_async", 1, horizon=10, ratio="1:1", global_batch=2, micro_batch=2),
)


def plan_of(p: Point, profile: str) -> dict:
    """The point's plan JSON (the cluster is this machine: 2 cores, 24 GB). ``profile``: a path,
    absolute in the plan (a plan's relative profile path is read from the plan's directory)."""
    path = Path(profile)
    profile = str(path if path.is_absolute() else (ROOT / path).resolve()) if path.suffix == ".json" else profile
    plan = {
        "mode": p.mode, "allocation_ratio": p.ratio, "pipeline_stage_num": 1, "b_max": None, "t_max_s": 0.05,
        "max_staleness": 1, "profile": profile,
        "workload": {"total_num_envs": p.envs, "max_episode_steps": p.horizon, "num_action_chunks": p.chunk,
                     "rollout_epoch": p.rollout_epoch, "update_epoch": p.update_epoch,
                     "micro_batch_size": p.micro_batch, "global_batch_size": p.global_batch, "group_size": 1,
                     "algorithm": "ppo"},
        "cluster": {"gpus": p.gpus, "gpus_per_node": p.gpus, "cpu_cores_per_node": 2, "node_ram_gb": 24,
                    "intra_node_bw_GBps": 2.39, "inter_node_bw_GBps": 2.39, "actor_cpu_cores_per_gpu": 0.0},
    }
    if p.denoising_steps is not None:
        plan["denoising_steps"] = p.denoising_steps
    return plan


def envs_per_core(plan: dict) -> float:
    """Envs of an env worker over its cores (perfmodel's placement: what the run pins them to)."""
    from perfmodel.schema.plan import Plan

    pl = Plan.from_dict(plan, "plan")
    return pl.envs_per_worker / max(1.0, pl.placement.env_cores_per_worker)


def wait_quiet(max_wait_s: float, poll_s: float = 5.0) -> float:
    """Sleep until the 1-minute load average is below the quiet threshold (the previous point's Ray
    processes and envs take about two minutes to decay out of it), at most ``max_wait_s``; the
    load average then."""
    deadline = time.time() + max_wait_s
    while os.getloadavg()[0] >= QUIET_LOAD and time.time() < deadline:
        time.sleep(poll_s)
    return os.getloadavg()[0]


def run_point(p: Point, profile: str, runs: Path, iterations: int, warmup: int, extra: list[str]) -> dict:
    """One ``executor run --compare``; the row kept for the point."""
    runs.mkdir(parents=True, exist_ok=True)
    plan = plan_of(p, profile)
    plan_path = runs / f"{p.name}.json"
    plan_path.write_text(json.dumps(plan, indent=2) + "\n")
    out = runs / p.name
    load_before = os.getloadavg()[0]
    cmd = [sys.executable, "-m", "executor.cli", "run", str(plan_path), "--out", str(out), "--overwrite",
           "--iterations", str(iterations), "--warmup-iterations", str(warmup), "--compare", "--json",
           "--no-progress", "--profile", profile, *extra]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    row = {"name": p.name, "axes": asdict(p), "envs_per_core": envs_per_core(plan),
           "loadavg_1min_before": load_before, "loadavg_1min_after": os.getloadavg()[0],
           "quiet": load_before < QUIET_LOAD, "wall_s": time.time() - t0, "command": " ".join(cmd[1:]),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {**row, "status": "failed", "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    rec = json.loads(lines[-1])
    unscaled = rec.get("prediction_unscaled") or {}
    return {**row, "status": "ok", "mode": rec["mode"],
            "predicted_env_steps_per_s": rec["predicted_throughput_env_steps_per_s"],
            "measured_env_steps_per_s": rec["throughput_env_steps_per_s"], "error_pct": rec["error_pct"],
            "unscaled_error_pct": unscaled.get("error_pct"),
            "predicted_iteration_s": rec["predicted_iteration_time_s"], "measured_iteration_s": rec["iteration_time_s"],
            "host_probe": (rec.get("host_probe") or {}).get("ratio"),
            "host_probe_cpu_ratio": (rec.get("host_probe") or {}).get("cpu_ratio"),
            "diagnosis_at_measured_env_costs_pct": (rec.get("diagnosis_at_measured_env_costs") or {}).get("error_pct"),
            "loadavg_1min_before_run": (rec.get("host") or {}).get("loadavg_1min_before"),
            **probe_against_run(rec), **probe_after(plan, profile, rec)}


def steady(row: dict) -> bool:
    """The host kept its speed while the point ran (``STEADY_DRIFT``; a row without the drift
    measured counts as steady: nothing says otherwise)."""
    drift = row.get("host_drift_env_step")
    return drift is None or abs(drift - 1) <= STEADY_DRIFT


ATTEMPT_FIELDS = ("date", "predicted_env_steps_per_s", "measured_env_steps_per_s", "error_pct", "host_drift_env_step",
                  "loadavg_1min_before", "command")


def attempt_of(row: dict) -> list[dict]:
    """A row as the earlier attempts of the point's next one: its own and those it kept."""
    return [*row.get("earlier_attempts", []), {k: row.get(k) for k in ATTEMPT_FIELDS}]


def run_until_steady(p: Point, profile: str, runs: Path, iterations: int, warmup: int, extra: list[str],
                     attempts: int, wait_quiet_s: float, earlier: list[dict] | None = None) -> dict:
    """``run_point`` again, up to ``attempts`` times in all (``earlier`` ones included), while the
    host's speed moved more than ``STEADY_DRIFT`` during the point (the probe after the run against
    the one before it): a criterion on the host, never on the error. The row is the last attempt;
    every earlier one is kept in its ``earlier_attempts`` (prediction, measurement, error, drift, date)."""
    earlier = list(earlier or [])
    while True:
        row = run_point(p, profile, runs, iterations, warmup, extra)
        if row.get("status") != "ok" or steady(row) or len(earlier) + 1 >= attempts:
            break
        earlier = [*earlier, *attempt_of(row)]
        print(f"  host drift {row['host_drift_env_step']:.2f} (error {row['error_pct']:+.1f} %): measuring again",
              flush=True)
        wait_quiet(wait_quiet_s)
    return {**row, "earlier_attempts": earlier} if earlier else row


def probe_after(plan: dict, profile: str, rec: dict) -> dict:
    """The run's host probe once more, just after the run, with the run's options: how far this
    host's speed moved while the point ran (other tenants of the physical machine; one earlier grid
    was discarded for a 1.6x drift). A diagnosis beside the row, not used by its prediction:
    ``host_drift_env_step`` is the CPU seconds per env step after over before (1.0: no drift)."""
    from executor.runtime.modes import RunOptions
    from executor.runtime.probe import probe_host
    from perfmodel.schema.plan import Plan
    from perfmodel.schema.profile import load_profile

    before = (rec.get("host_probe") or {}).get("cpu_ratio")
    if not before:
        return {}
    fields = RunOptions.__dataclass_fields__
    opts = RunOptions(**{k: v for k, v in (rec.get("options") or {}).items() if k in fields})
    after = probe_host(Plan.from_dict(plan, "plan"), load_profile(profile), opts)
    return {"host_probe_after": after.cpu_ratio,
            "host_drift_env_step": after.cpu_ratio["env_step"] / before["env_step"]}


def probe_against_run(rec: dict) -> dict:
    """The env CPU seconds the run's env processes used per step and per reset over what the pre-run
    probe measured (1.0: the probe measured what the run paid): where a prediction misses with its
    composition right (the diagnosis at the run's env costs close), this says the probe's estimate did."""
    probe, env = rec.get("host_probe") or {}, rec.get("env_cpu") or {}
    out = {}
    for stage, key, unit in (("env_step", "step_cpu_s_mean", "cpu_s_per_env_step"),
                             ("env_reset", "reset_cpu_s_mean", "cpu_s_per_env")):
        run, pre = (env.get(stage) or {}).get(unit), probe.get(key)
        if run and pre:
            out[f"{stage}_cpu_run_over_probe"] = run / pre
    return out


def slope_interval(xs: list[float], ys: list[float], level: float = 0.90) -> dict | None:
    """Least-squares slope of ys on xs with its two-sided ``level`` interval (Student t)."""
    n = len(xs)
    if n < 3 or len(set(xs)) < 2:
        return None
    from scipy.special import stdtrit

    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    ssr = sum((y - my - b * (x - mx)) ** 2 for x, y in zip(xs, ys))
    half = float(stdtrit(n - 2, 0.5 + level / 2)) * math.sqrt(ssr / (n - 2) / sxx)
    return {"slope_pct_per_env_per_core": b, "low": b - half, "high": b + half, "level": level, "points": n}


def _median_abs(rows: list[dict], key: str) -> float | None:
    vals = [abs(r[key]) for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        return {"points": 0}
    errs = [r["error_pct"] for r in ok]
    return {"points": len(ok), "quiet_points": sum(r["quiet"] for r in ok),
            "modes": sorted({r["mode"] for r in ok}), "chunks": sorted({r["axes"]["chunk"] for r in ok}),
            "envs_per_core": [min(r["envs_per_core"] for r in ok), max(r["envs_per_core"] for r in ok)],
            "median_error_pct": statistics.median(errs), "median_abs_error_pct": statistics.median(abs(e) for e in errs),
            "max_abs_error_pct": max(abs(e) for e in errs),
            "within_10pct": sum(abs(e) <= 10 for e in errs),
            # the prediction from the profile as it is, without the host probe
            "median_abs_unscaled_error_pct": _median_abs(ok, "unscaled_error_pct"),
            # the prediction at the run's own env CPU share and env costs (docs/metrics.md): what
            # the model's composition of the stages leaves once the host's load is known
            "median_abs_error_at_run_env_costs_pct": _median_abs(ok, "diagnosis_at_measured_env_costs_pct"),
            "max_abs_error_at_run_env_costs_pct": max((abs(r["diagnosis_at_measured_env_costs_pct"]) for r in ok
                                                       if r.get("diagnosis_at_measured_env_costs_pct") is not None),
                                                      default=None),
            "slope": slope_interval([r["envs_per_core"] for r in ok], errs),
            **_steady_host(ok), **_remeasured(ok)}


def _remeasured(ok: list[dict]) -> dict:
    """The points measured again because the host drifted (run_until_steady), and the attempts
    that were set aside, where any was."""
    again = [r for r in ok if r.get("earlier_attempts")]
    if not again:
        return {}
    return {"remeasured": {"points": len(again), "earlier_attempts": sum(len(r["earlier_attempts"]) for r in again)}}


def _steady_host(ok: list[dict]) -> dict:
    """The points whose host kept its speed while they ran (``STEADY_DRIFT``), where the grid
    measured the drift at all."""
    if not any(r.get("host_drift_env_step") for r in ok):
        return {}
    kept = [r for r in ok if r.get("host_drift_env_step") and steady(r)]
    steady_errors = [r["error_pct"] for r in kept]
    return {"steady_host": {"drift_within": STEADY_DRIFT, "points": len(steady_errors),
                            "within_10pct": sum(abs(e) <= 10 for e in steady_errors),
                            "median_abs_error_pct": (statistics.median(abs(e) for e in steady_errors)
                                                     if steady_errors else None),
                            "max_abs_error_pct": max((abs(e) for e in steady_errors), default=None),
                            "slope": slope_interval([r["envs_per_core"] for r in kept], steady_errors)}}


def table(doc: dict) -> str:
    hdr = (f"{'point':<18} {'mode':<14} {'env/core':>8} {'chunk':>5} {'pred':>7} {'meas':>7} {'err %':>7} "
           f"{'unscaled %':>10} {'load before':>11}")
    lines = [hdr, "-" * len(hdr)]
    for r in doc["points"]:
        if r.get("status") != "ok":
            lines.append(f"{r['name']:<18} failed: {r.get('error')}")
            continue
        u = r.get("unscaled_error_pct")
        lines.append(f"{r['name']:<18} {r['mode']:<14} {r['envs_per_core']:>8.2f} {r['axes']['chunk']:>5} "
                     f"{r['predicted_env_steps_per_s']:>7.3f} {r['measured_env_steps_per_s']:>7.3f} "
                     f"{r['error_pct']:>+7.1f} {'-' if u is None else format(u, '+.1f'):>10} "
                     f"{r['loadavg_1min_before']:>11.2f}")
    s = doc["summary"]
    if s.get("points"):
        sl = s.get("slope")
        lines.append(f"\n{s['points']} point(s), {s['quiet_points']} on a quiet machine (load < {QUIET_LOAD}); "
                     f"median error {s['median_error_pct']:+.1f} %, max |error| {s['max_abs_error_pct']:.1f} %, "
                     f"{s['within_10pct']} within 10 %"
                     + (f"; slope against envs per core {sl['slope_pct_per_env_per_core']:+.2f} %/(env/core) "
                        f"(90 % interval {sl['low']:+.2f} .. {sl['high']:+.2f})" if sl else ""))
    return "\n".join(lines)


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def markdown_table(doc: dict) -> str:
    """The stored grid as docs/validation.md shows it (tests/test_workload_grid.py checks the doc)."""
    lines = ["| point | mode | envs per core | chunk | predicted | measured | error | without the probe | "
             "at the run's env costs | run / probe env step | host drift | load before |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["points"]:
        if r.get("status") != "ok":
            lines.append(f"| {r['name']} | failed: {r.get('error')} | | | | | | | | | | |")
            continue
        ratio, drift = r.get("env_step_cpu_run_over_probe"), r.get("host_drift_env_step")
        lines.append(f"| {r['name']} | {r['mode']} | {r['envs_per_core']:g} | {r['axes']['chunk']} | "
                     f"{r['predicted_env_steps_per_s']:.3f} | {r['measured_env_steps_per_s']:.3f} | "
                     f"{r['error_pct']:+.1f} % | {fmt_pct(r.get('unscaled_error_pct'))} | "
                     f"{fmt_pct(r.get('diagnosis_at_measured_env_costs_pct'))} | "
                     f"{'-' if ratio is None else format(ratio, '.2f')} | "
                     f"{'-' if drift is None else format(drift, '.2f')} | {r['loadavg_1min_before']:.2f} |")
    return "\n".join(lines)


def markdown_summary(doc: dict) -> str:
    """The summary sentence docs/validation.md shows under the table (checked like the table)."""
    s = doc["summary"]
    sl = s.get("slope")
    return (f"{s['points']} points, {s['quiet_points']} on a quiet machine (1-minute load below {QUIET_LOAD} before "
            f"the run); {s['within_10pct']} within 10 %, median |error| {s['median_abs_error_pct']:.1f} %, "
            f"max {s['max_abs_error_pct']:.1f} %. Without the probe: median |error| "
            f"{s['median_abs_unscaled_error_pct']:.1f} %. At the runs' own env costs: median |error| "
            f"{s['median_abs_error_at_run_env_costs_pct']:.1f} %, max {s['max_abs_error_at_run_env_costs_pct']:.1f} %."
            + (f" Slope of the error against envs per core: {sl['slope_pct_per_env_per_core']:+.1f} % per env per "
               f"core (90 % interval {sl['low']:+.1f} to {sl['high']:+.1f})." if sl else "")
            + (_steady_sentence(s["steady_host"]) if "steady_host" in s else "")
            + (f" {s['remeasured']['points']} point{'s were' if s['remeasured']['points'] != 1 else ' was'} measured "
               f"again after the host drifted more than {100 * STEADY_DRIFT:.0f} % while it ran "
               f"({s['remeasured']['earlier_attempts']} earlier attempt"
               f"{'s' if s['remeasured']['earlier_attempts'] != 1 else ''}, kept in the rows)." if "remeasured" in s else ""))


def _steady_sentence(st: dict) -> str:
    if not st["points"]:
        return f" No point kept the host's speed within {100 * st['drift_within']:.0f} % while it ran."
    return (f" Where the host kept its speed within {100 * st['drift_within']:.0f} % while the point ran (host "
            f"drift): {st['points']} point{'s' if st['points'] != 1 else ''}, {st['within_10pct']} within 10 %, median |error| "
            f"{st['median_abs_error_pct']:.1f} %, max {st['max_abs_error_pct']:.1f} %"
            + (f"; slope {st['slope']['slope_pct_per_env_per_core']:+.1f} % per env per core (90 % interval "
               f"{st['slope']['low']:+.1f} to {st['slope']['high']:+.1f})." if st.get("slope") else "."))


def figure(doc: dict, path: Path) -> None:
    """Error against envs per core, one series per mode (plotly; the script from its CDN)."""
    import plotly.graph_objects as go

    ok = [r for r in doc["points"] if r.get("status") == "ok"]
    fig = go.Figure()
    for mode in sorted({r["mode"] for r in ok}):
        rs = [r for r in ok if r["mode"] == mode]
        fig.add_trace(go.Scatter(
            x=[r["envs_per_core"] for r in rs], y=[r["error_pct"] for r in rs], mode="markers", name=mode,
            text=[f"{r['name']}: chunk {r['axes']['chunk']}, load {r['loadavg_1min_before']:.1f} before" for r in rs],
            marker={"size": 11, "symbol": ["circle" if r["quiet"] else "circle-open" for r in rs]}))
    for y in (-10, 10):
        fig.add_hline(y=y, line_dash="dot", line_color="grey")
    fig.update_layout(title="Workload grid: prediction / measurement - 1 (open markers: load >= 0.5 before the run)",
                      xaxis_title="envs per core of an env worker", yaxis_title="error, %", template="plotly_white")
    path.write_text(fig.to_html(include_plotlyjs="cdn", full_html=True))


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _executor_profile(*args: str) -> dict:
    """``executor profile ARGS`` on this host: the load before and after it, its wall seconds."""
    load = os.getloadavg()[0]
    t0 = time.time()
    subprocess.run([sys.executable, "-m", "executor.cli", "profile", *args, "--no-progress"], check=True, cwd=ROOT,
                   capture_output=True, text=True)
    return {"loadavg_1min_before": load, "loadavg_1min_after": os.getloadavg()[0], "wall_s": time.time() - t0}


def measure_profile(path: Path, env_counts: str, run_share: str) -> dict:
    """``executor profile`` of the stand-in pi0.5 on this host, before the grid (with the env CPU
    share of ``run_share``'s modes, ``none`` for none)."""
    ran = _executor_profile("--backbone", "pi05", "--scale", "tiny", "--env-counts", env_counts,
                            "--run-share", run_share, "--out", str(path))
    return {"path": _shown(path), "measured_here": True, "env_counts": env_counts, "run_share": run_share, **ran}


def add_run_share(entry: dict, run_share: str) -> dict:
    """The grid's profile entry once ``executor profile --run-share --base-profile`` has added the
    env CPU share of ``run_share``'s modes to its profile (a new file beside it; the points already
    run keep, in their command, the profile they were predicted from)."""
    base = Path(entry["path"]) if Path(entry["path"]).is_absolute() else ROOT / entry["path"]
    out = base.with_name(base.stem + "_run_share.json")
    ran = _executor_profile("--run-share", run_share, "--base-profile", str(base), "--out", str(out))
    return {**entry, "path": _shown(out), "base_path": _shown(base), "run_share": run_share, "run_share_added": ran}


def main(argv: list[str] | None = None) -> int:
    from perfmodel.schema.jsonio import write_json_atomic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="the 2-point smoke grid (quick envs, 1 measured iteration)")
    ap.add_argument("--profile", default=None, help="profile to predict with (default: measure one here first)")
    # up to 8 envs on the 2 cores: the grid's 4 envs per core measured, not the nearest density
    ap.add_argument("--env-counts", default="1,2,4,8", help="envs per worker the profile measures")
    # the asynchronous modes: their generator and trainer run on the env cores while the envs step
    # (colocated's take turns with them, lock-step)
    ap.add_argument("--run-share", default="none",
                    help="modes whose env CPU share the profile measures (executor profile --run-share); with a "
                         "profile already in --out (--resume), added to it")
    ap.add_argument("--points", default=None, help="comma list of point names (default: all)")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--runs", default=None,
                    help="where the points' runs go (default runs/workload_grid); with --summary, the run records "
                         "to read what older rows lack from (only when given: a folder may hold another grid's runs)")
    ap.add_argument("--resume", action="store_true", help="keep the points already in --out and run the others")
    ap.add_argument("--rerun", action="store_true",
                    help="with --resume: run --points again even where --out has them (their rows replaced)")
    ap.add_argument("--steady-attempts", type=int, default=1, metavar="N",
                    help=f"run a point up to N times while its host drifts more than {STEADY_DRIFT:.0%} during it "
                         "(host_drift_env_step); the row is the last attempt, the earlier ones kept in it")
    ap.add_argument("--remeasure-drifted", action="store_true",
                    help="with --resume: run again the points of --out whose host drifted (their rows kept as "
                         "earlier attempts), up to --steady-attempts in all")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help=f"before the profile and each point, wait up to S seconds for load < {QUIET_LOAD}")
    ap.add_argument("--summary", action="store_true",
                    help="print --out's table (its summary recomputed and written back) and run nothing")
    ap.add_argument("--figure", default=None, help="with --summary: also write the figure (HTML) here")
    a = ap.parse_args(argv)
    runs_dir = Path(a.runs) if a.runs else ROOT / "runs" / "workload_grid"
    if a.steady_attempts < 1:
        print(f"error: --steady-attempts: must be an integer >= 1, got {a.steady_attempts}", file=sys.stderr)
        return 2
    if a.remeasure_drifted and not a.resume:
        print("error: --remeasure-drifted: only with --resume (the grid whose drifted points to run again)",
              file=sys.stderr)
        return 2
    if a.rerun and not (a.resume and a.points):
        print("error: --rerun: only with --resume and --points (the points to run again)", file=sys.stderr)
        return 2
    out = Path(a.out)
    if a.summary:
        doc = json.loads(out.read_text())
        for r in doc["points"] if a.runs else []:  # what the kept run records add (rows older than the field)
            rec = Path(a.runs) / r["name"] / "record.json"
            if r.get("status") == "ok" and rec.is_file() and "env_step_cpu_run_over_probe" not in r:
                r.update(probe_against_run(json.loads(rec.read_text())))
        doc["summary"] = summary(doc["points"])  # as this code computes it
        write_json_atomic(out, doc)
        print(table(doc))
        print()
        print(markdown_table(doc))
        print()
        print(markdown_summary(doc))
        if a.figure:
            figure(doc, Path(a.figure))
        return 0
    points = SMOKE if a.smoke else GRID
    if a.points:
        names = a.points.split(",")
        unknown = [n for n in names if n not in {p.name for p in points}]
        if unknown:
            print(f"error: --points: unknown {', '.join(unknown)}; one of {', '.join(p.name for p in points)}",
                  file=sys.stderr)
            return 2
        by_name = {p.name: p for p in points}
        points = tuple(by_name[n] for n in names)  # in the order given
    doc = json.loads(out.read_text()) if a.resume and out.is_file() else {"points": []}
    if a.profile:
        doc["profile"] = {"path": a.profile, "measured_here": False}
    elif not doc.get("profile"):
        wait_quiet(a.wait_quiet)
        print(f"measuring the profile here first (load {os.getloadavg()[0]:.2f}) ...", flush=True)
        doc["profile"] = measure_profile(PROFILE, a.env_counts, a.run_share)
        write_json_atomic(out, doc)
    if a.run_share != "none" and doc["profile"].get("run_share", "none") != a.run_share:
        wait_quiet(a.wait_quiet)
        print(f"adding the run share of {a.run_share} to {doc['profile']['path']} (load {os.getloadavg()[0]:.2f}) ...",
              flush=True)
        doc["profile"] = add_run_share(doc["profile"], a.run_share)
        write_json_atomic(out, doc)
    profile = doc["profile"]["path"]
    doc.update(source="python benchmarks/workload_grid.py" + (" --smoke" if a.smoke else ""),
               cpu_count=os.cpu_count(), quiet_load_below=QUIET_LOAD)
    iterations = a.iterations or (2 if a.smoke else 3)
    extra = QUICK if a.smoke else []
    done = set() if a.rerun else {r["name"] for r in doc["points"] if r.get("status") == "ok"}
    prior: dict[str, list[dict]] = {}
    if a.remeasure_drifted:
        drifted = {r["name"]: attempt_of(r) for r in doc["points"] if r.get("status") == "ok" and not steady(r)}
        prior = {n: tried for n, tried in drifted.items() if len(tried) < a.steady_attempts}
        done -= set(prior)
        points = tuple(p for p in points if p.name in prior)
    for p in points:
        if p.name in done:
            continue
        wait_quiet(a.wait_quiet)
        print(f"{p.name}: load {os.getloadavg()[0]:.2f} before ...", flush=True)
        row = run_until_steady(p, profile, runs_dir, iterations, 1, extra, a.steady_attempts, a.wait_quiet,
                               prior.get(p.name))
        doc["points"] = [r for r in doc["points"] if r["name"] != p.name] + [row]
        doc["summary"] = summary(doc["points"])
        write_json_atomic(out, doc)  # after every point: an interrupted grid keeps what it measured
        print(f"  {row['status']}: " + (f"error {row['error_pct']:+.1f} %" if row["status"] == "ok" else row["error"]),
              flush=True)
    doc["summary"] = summary(doc["points"])
    write_json_atomic(out, doc)
    print(table(doc))
    return 0 if all(r.get("status") == "ok" for r in doc["points"]) else 1


if __name__ == "__main__":
    sys.exit(main())

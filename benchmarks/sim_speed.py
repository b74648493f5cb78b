"""How fast the planner answers (issue 14), in one run, as ratios against the targets.

- whole process: ``perfmodel --help`` vs ``perfmodel predict`` at 32 GPUs with its default
  prediction interval (and without it, and with 5 replications' confidence interval); target:
  predict <= 3x help (<= 0.3 s), with interval <= 1 s; and issue 27's ratio, ``perfmodel predict
  --mode rollout_async --gpus 32`` (interval included) over ``perfmodel --help``, target <= 3x,
  with bytecode cached and as this environment has it (``issue_27``), each with the load average
  at the moment (``--issue-27`` runs only this);
- in process: one simulation per mode at 8 .. 16384 GPUs, with SimPy events per prediction (a
  rollout recording's included: it fast-forwards through its periods, perfmodel/sim/period.py);
  target: 1024 and 16384 GPUs within 2x of 32 GPUs;
- the default sweep (``perfmodel sweep`` defaults, intervals included) as a whole process on
  ``--jobs`` processes; target <= 5 s on 2 idle cores;
- ``--search``: the 10,000-plan search (modes x 8..4096 GPUs x every ratio that splits
  (``--ratios all``) x pipeline stages x b_max x t_max, intervals included) as a whole process;
  target: minutes.

Timings are the best of ``--repeats``. On a shared machine wall time mostly measures the other
jobs, so the verdicts use CPU time (this process's, or the children's for whole processes and
the sweep's pool), with wall time beside it; they are ratios taken within this one run.
Nothing here is a test (tests never assert timings).
The load average is printed at the start and the end (the machine is shared).
Run: python benchmarks/sim_speed.py [--backbone pi05] [--repeats 3] [--max-gpus 16384] [--search] [--issue-27]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import simpy

from perfmodel.calibration.reference import published_plan
from perfmodel.schema.modes import MODES
from perfmodel.schema.profile import load_profile
from perfmodel.sim import workers
from perfmodel.sim.period import TieWatch
from perfmodel.simulate import simulate

ROOT = Path(__file__).resolve().parent.parent
GPUS = (8, 32, 256, 1024, 4096, 16384)
SKIP_AFTER_S = 20.0  # a mode whose last point took longer skips the larger ones (old code)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


SEARCH = ["--gpus", "8,16,32,64,128,256,512,1024,2048,4096", "--ratios", "all", "--pipeline-stages", "1,2,3,4",
          "--b-max", "null,64,256", "--t-max", "0.02,0.05,0.1"]


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def whole_process(args: list[str], repeats: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``perfmodel`` process (and its children), best of
    ``repeats``; ``env``: the environment variables to set (None: remove)."""
    env = {k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}.items() if v is not None}
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        c, t = _children_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "perfmodel.cli", *args], check=True, cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL)
        best_wall = min(best_wall, time.perf_counter() - t)
        best_cpu = min(best_cpu, _children_cpu() - c)
    return best_cpu, best_wall


ISSUE_27 = ["predict", "--mode", "rollout_async", "--gpus", "32"]


def issue_27(repeats: int) -> None:
    """Issue 27's ratio, ``perfmodel predict --mode rollout_async --gpus 32`` (its default
    prediction interval included) over ``perfmodel --help``, in two conditions, each pair
    measured alternately (help, predict, help, ...) so that both see the same load:
    - bytecode cached, as an installed package has it: a temporary PYTHONPYCACHEPREFIX that a
      first, unmeasured run of each fills (PYTHONDONTWRITEBYTECODE unset);
    - this environment as it is (this machine sets PYTHONDONTWRITEBYTECODE=1: then every process
      compiles the perfmodel modules it imports, which adds to both, to help proportionally more).
    Nothing of a prediction is cached between runs (only bytecode)."""
    import importlib.util
    import tempfile

    dont = os.environ.get("PYTHONDONTWRITEBYTECODE")
    ours = Path(importlib.util.cache_from_source(str(ROOT / "perfmodel" / "cli.py"))).exists()
    with tempfile.TemporaryDirectory(prefix="sim_speed_pyc_") as pyc:
        cached = {"PYTHONPYCACHEPREFIX": pyc, "PYTHONDONTWRITEBYTECODE": None}
        conditions = [("bytecode cached (temporary PYTHONPYCACHEPREFIX)", cached),
                      (f"this environment (PYTHONDONTWRITEBYTECODE={dont or 'unset'}, perfmodel bytecode "
                       f"{'cached' if ours else 'not cached'})", None)]
        whole_process(["--help"], 1, cached)
        whole_process(ISSUE_27, 1, cached)
        for name, env in conditions:
            help_s = pred_s = float("inf")
            for _ in range(repeats):  # alternately: both under the same load
                help_s = min(help_s, whole_process(["--help"], 1, env)[0])
                pred_s = min(pred_s, whole_process(ISSUE_27, 1, env)[0])
            print(f"issue 27, {name}: help {help_s:.3f} s, predict rollout_async 32 GPUs {pred_s:.3f} s, "
                  f"{pred_s / help_s:.2f}x help (target <= 3x): {verdict(pred_s <= 3 * help_s)}  [{load()}]")


class _Counting(simpy.Environment):
    """Counts processed events (a subclass used only for the event column)."""

    events = 0

    def step(self) -> None:
        _Counting.events += 1
        super().step()


class _CountingTies(TieWatch):
    """The same count for a rollout recording's environment (perfmodel/sim/period.py)."""

    def step(self) -> None:
        _Counting.events += 1
        super().step()


def cold_simulate(plan, prof) -> None:
    """One simulation without the memoised rollout recordings of earlier ones (a first prediction)."""
    workers._RECORDINGS.clear()
    simulate(plan, prof)


def count_events(plan, prof) -> int:
    """SimPy events processed by one cold simulation, its rollout recordings' included (they
    simulate the chunk steps their periods do not skip, perfmodel/sim/period.py)."""
    real, real_ties = simpy.Environment, workers.TieWatch
    _Counting.events = 0
    workers._RECORDINGS.clear()
    simpy.Environment = _Counting  # perfmodel.simulate reads simpy.Environment at call time
    workers.TieWatch = _CountingTies  # and record_rollout workers.TieWatch
    try:
        simulate(plan, prof)
    finally:
        simpy.Environment, workers.TieWatch = real, real_ties
    return _Counting.events


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backbone", default="pi05")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-gpus", type=int, default=16384)
    ap.add_argument("--jobs", type=int, default=2, help="processes for the default sweep")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--search", action="store_true", help="also run the 10,000-plan search (minutes)")
    ap.add_argument("--issue-27", action="store_true", help="only issue 27's whole-process ratio")
    args = ap.parse_args()
    gpus = [g for g in GPUS if g <= args.max_gpus]
    print(f"start: {load()}; {os.cpu_count()} cores")
    if args.issue_27:
        issue_27(args.repeats)
        print(f"end: {load()}")
        return

    print("\n== whole process (best of %d): CPU s (wall s) ==" % args.repeats)
    pred = ["predict", "--mode", "streamer", "--gpus", "32", "--ratio", "1:1"]
    help_s, help_w = whole_process(["--help"], args.repeats)
    pred_s, pred_w = whole_process(pred, args.repeats)
    bare_s, bare_w = whole_process([*pred, "--no-interval"], args.repeats)
    reps_s, reps_w = whole_process([*pred, "--replications", "5"], args.repeats)
    print(f"perfmodel --help                        {help_s:7.3f} s ({help_w:.3f} s)")
    print(f"perfmodel predict streamer 32 GPUs      {pred_s:7.3f} s ({pred_w:.3f} s)  {pred_s / help_s:5.2f}x help, "
          f"prediction interval included (target <= 1 s; the 3x-help target is the bare prediction's, below): "
          f"{verdict(pred_s <= 1.0)}")
    print(f"  ... --no-interval                     {bare_s:7.3f} s ({bare_w:.3f} s)  {bare_s / help_s:5.2f}x help "
          f"(target <= 3x, <= 0.3 s): {verdict(bare_s <= 3 * help_s and bare_s <= 0.3)}")
    print(f"  ... --replications 5                  {reps_s:7.3f} s ({reps_w:.3f} s)  (target <= 1 s): "
          f"{verdict(reps_s <= 1.0)}")
    issue_27(args.repeats)
    print(f"\n== in process: one simulation (best of {args.repeats}, each without earlier recordings), "
          "CPU seconds / SimPy events ==")
    prof = load_profile(args.backbone)
    print(f"{'mode':<14}" + "".join(f"{g:>17}" for g in gpus) + "   1024/32  16384/32 (target <= 2x)")
    worst = {1024: 0.0, 16384: 0.0}
    for mode in MODES:
        times: dict[int, float] = {}
        cells = []
        for g in gpus:
            if times and max(times.values()) > SKIP_AFTER_S:
                cells.append(f"{'skipped':>17}")
                continue
            plan = published_plan(prof, mode, g, None if mode == "colocated" else "1:1")
            best = float("inf")
            for _ in range(args.repeats if g <= 1024 else 1):
                t = time.process_time()
                cold_simulate(plan, prof)
                best = min(best, time.process_time() - t)
                if best > SKIP_AFTER_S:
                    break
            times[g] = best
            cells.append(f"{best:>8.3f}s/{count_events(plan, prof) if best < SKIP_AFTER_S else -1:>7d}")
        ratios = []
        for big in (1024, 16384):
            if big in times and 32 in times:
                r = times[big] / times[32]
                worst[big] = max(worst[big], r)
                ratios.append(f"{r:>8.1f}x")
            else:
                ratios.append(f"{'-':>9}")
        print(f"{mode:<14}" + "".join(cells) + "  " + " ".join(ratios))
    for big, r in worst.items():
        if r:
            print(f"worst growth 32 -> {big} GPUs: {r:.1f}x (target <= 2x): {verdict(r <= 2.0)}")

    if not args.no_sweep:
        # A whole process, as a user runs it (in this process the simulations above would have
        # warmed the memoised rollout recordings).
        cpu, wall = whole_process(["sweep", "--backbone", args.backbone, "--jobs", str(args.jobs), "--no-progress"], 1)
        print(f"\n== default sweep (147 combinations, intervals included, {args.jobs} processes, whole process) ==")
        quiet = cpu / args.jobs
        print(f"default sweep: {cpu:.2f} CPU s, {quiet:.2f} s on {args.jobs} idle cores ({wall:.2f} s wall here) "
              f"(target <= 5 s): {verdict(quiet <= 5.0)}")

    if args.search:
        from perfmodel.planning.sweep import SweepSpec, combinations

        spec = SweepSpec(profile_ref=args.backbone, gpus=tuple(int(g) for g in SEARCH[1].split(",")), ratios=("all",),
                         pipeline_stages=(1, 2, 3, 4), b_max=(None, 64, 256), t_max_s=(0.02, 0.05, 0.1))
        n = len(combinations(spec))
        cpu, wall = whole_process(["sweep", "--backbone", args.backbone, *SEARCH, "--jobs", str(args.jobs),
                                   "--no-progress"], 1)
        print(f"\n== search: {n} plans (perfmodel sweep {' '.join(SEARCH)}), intervals included ==")
        print(f"search: {cpu:.1f} CPU s, {cpu / args.jobs / 60:.1f} min on {args.jobs} idle cores "
              f"({wall / 60:.1f} min wall here), {1000 * cpu / n:.1f} CPU ms per plan (target: minutes): "
              f"{verdict(cpu / args.jobs <= 10 * 60)}")
    print(f"\nend: {load()}")


if __name__ == "__main__":
    main()

"""Per-iteration time an ``executor run`` spends outside every measured stage, from its trace.

The profile prices env resets and steps, inference, training, weight syncs; the simulator puts
them back to back. In a real run each chunk step of each env group also pays the driver's
orchestration (a Ray call to the inference actor and one to the env actor, pickling the
observations, threads waking up), which no stage span covers. For each env group this prints
the measured window's time on the group's critical path that no span covers: the union of its
env spans, its inference actor's spans and the trainer's spans (every mode but the asynchronous
ones waits for training), subtracted from the window; per iteration and per chunk step. A gap
that grows with the horizon is a per-chunk-step cost the profile does not measure.

The window's gap also holds the wait at the end of each iteration for the worker's other env
groups (and, in the synchronous modes, for training), which the simulator has as well; under
dynamic batching on a shared machine it dominates (groups pinned to a busier core finish later).
So the time inside episodes is printed too: from each env span to the group's next chunk step,
less its generator's spans. It still holds the batch's wait to fire (``t_max``, modelled); the
run record's ``driver_s_per_chunk_step`` is the orchestration alone, measured by the driver.

    python benchmarks/trace_gaps.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def union_length(spans: list[tuple[float, float]], t0: float, t1: float) -> float:
    total, end = 0.0, t0
    for a, b in sorted(spans):
        a, b = max(a, end), min(b, t1)
        if b > a:
            total += b - a
            end = b
    return total


def gaps(run_dir: Path) -> dict:
    record = json.loads((run_dir / "record.json").read_text())
    plan = json.loads((run_dir / "plan.json").read_text())
    trace = json.loads((run_dir / "trace.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    pname = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    t0, t1 = record["measured_window_s"]
    iters = record["measured_iterations"]
    w = plan["workload"]
    chunk_steps = w["max_episode_steps"] // w["num_action_chunks"] * w["rollout_epoch"]
    asynchronous = plan["mode"] in ("train_async", "rollout_async", "streamer")
    spans: dict[tuple[str, str], list[tuple[float, float]]] = {}
    named: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    for e in events:
        if e.get("ph") == "X":
            key = (pname[e["pid"]], tname[(e["pid"], e["tid"])])
            spans.setdefault(key, []).append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6))
            named.setdefault(key, []).append((e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, e["name"]))
    trainer = [s for (res, _), v in spans.items() if res in ("actor", "all_gpus") for s in v]
    out = {"mode": plan["mode"], "iteration_time_s": record["iteration_time_s"], "chunk_steps": chunk_steps,
           "groups": {}}
    for (res, lane), env_spans in sorted(spans.items()):
        if not res.startswith("env_worker_"):
            continue
        i = res.rsplit("_", 1)[1]
        gen = [s for (r, _), v in spans.items() if r == f"rollout_gpu_{i}" for s in v]
        covered = env_spans + gen + ([] if asynchronous else trainer)
        gap = (t1 - t0) - union_length(covered, t0, t1)
        # inside episodes only: from each env span to the group's next chunk step, less its
        # generator's spans; leaves out the wait at the end of an iteration for the worker's other
        # groups (and, synchronous, for training), which the simulator has too
        mine = sorted(named[(res, lane)])
        inside = 0.0
        for (a0, a1, _), (b0, b1, stage) in zip(mine, mine[1:]):
            if stage != "env_step" or b0 < t0 or a1 > t1:
                continue
            inside += (b0 - a1) - union_length(gen, a1, b0)
        out["groups"][f"{res}/{lane}"] = {"gap_s_per_iteration": gap / iters,
                                          "gap_s_per_chunk_step": gap / iters / chunk_steps,
                                          "in_episode_gap_s_per_chunk_step": inside / iters / chunk_steps}
    return out


def main() -> int:
    if len(sys.argv) < 2:
        print("error: run_dir: give one or more executor run directories", file=sys.stderr)
        return 2
    for d in sys.argv[1:]:
        g = gaps(Path(d))
        print(f"{Path(d).name}: {g['mode']}, iteration {g['iteration_time_s']:.2f} s, "
              f"{g['chunk_steps']} chunk steps per iteration")
        for name, v in g["groups"].items():
            print(f"  {name:<28} uncovered {v['gap_s_per_iteration']:.3f} s/iteration = "
                  f"{1e3 * v['gap_s_per_chunk_step']:.1f} ms per chunk step; inside episodes "
                  f"{1e3 * v['in_episode_gap_s_per_chunk_step']:.1f} ms per chunk step")
    return 0


if __name__ == "__main__":
    sys.exit(main())

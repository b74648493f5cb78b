"""What an env step costs under the actions it is stepped with: uniform in [-1, 1] (what
``executor profile`` steps with) against the stand-in policy's spread (``executor.envs.policy_like_actions``,
what the host probe steps with, as the run's policy does).

One LIBERO env on one core, episodes alternating between the two (interleaved, so that the host's
drift falls on both alike), CPU seconds per env step of every chunk kept; the result is written to
``benchmarks/results/probe_actions.json`` with the load average before and after.

    python benchmarks/probe_actions.py [--episodes 8] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from executor.envs import ACTION_DIM, EnvConfig, EnvProcessGroup, policy_like_actions
    from perfmodel.schema.jsonio import write_json_atomic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=8, help="episodes, alternating (even: uniform)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "probe_actions.json"))
    a = ap.parse_args(argv)
    chunk, horizon = 5, 30
    rng = np.random.default_rng(0)
    samples: dict[str, list[float]] = {"uniform": [], "policy_like": []}
    load = os.getloadavg()[0]
    core = sorted(os.sched_getaffinity(0))[-1]
    t0 = time.time()
    with EnvProcessGroup(EnvConfig(num_action_chunks=chunk, max_episode_steps=horizon), num_envs=1,
                         cores=(core,), render_threads=1) as g:
        g.reset()  # the first reset of a process is cold
        for ep in range(a.episodes):
            kind = "uniform" if ep % 2 == 0 else "policy_like"
            g.reset()
            for _ in range(horizon // chunk):
                acts = (rng.uniform(-1, 1, (1, chunk, ACTION_DIM)) if kind == "uniform"
                        else policy_like_actions(rng, (1, chunk, ACTION_DIM)))
                samples[kind].append(float(np.mean(g.chunk_step(acts)["step_cpu_s"])))
    means = {k: statistics.fmean(v) for k, v in samples.items()}
    doc = {"source": "python benchmarks/probe_actions.py", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "env": f"libero_spatial task 0, 128 px, rendered, chunk {chunk}, horizon {horizon}, core {core}",
           "unit": "CPU seconds per env step, mean of each chunk", "loadavg_1min_before": load,
           "loadavg_1min_after": os.getloadavg()[0], "wall_s": time.time() - t0, "samples": samples,
           "mean_s": means, "uniform_over_policy_like": means["uniform"] / means["policy_like"]}
    write_json_atomic(Path(a.out), doc)
    print(f"uniform {means['uniform']:.4f} s, policy-like {means['policy_like']:.4f} s per step: "
          f"uniform / policy-like {doc['uniform_over_policy_like']:.3f} (load {load:.2f} before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

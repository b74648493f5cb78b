"""What an env step costs under the actions it is stepped with: uniform in [-1, 1] (what
``executor profile`` steps with), the stand-in policy's spread (``executor.envs.policy_like_actions``,
what the host probe steps with), and the stand-in policy's own chunks (the tiny pi0.5, random
weights, sampling from the env's observations as a run's generator does: what the run steps with).

One LIBERO env on one core, episodes cycling through the three (interleaved, so that the host's
drift falls on all alike), CPU seconds per env step of every chunk kept; the result is written to
``benchmarks/results/probe_actions.json`` with the load average before and after.

    python benchmarks/probe_actions.py [--episodes 24] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cycle_ratios(doc: dict, kind: str, over: str = "policy_like") -> list[float]:
    """Per cycle of the interleaved episodes: ``kind``'s mean CPU seconds per step over ``over``'s
    in the same cycle (the host's drift between cycles cancels; within one, it does not)."""
    per = doc["chunks_per_episode"]
    a, b = doc["samples"][kind], doc["samples"][over]
    return [statistics.fmean(a[i:i + per]) / statistics.fmean(b[i:i + per]) for i in range(0, min(len(a), len(b)), per)]


def sentence(doc: dict) -> str:
    """What docs/validation.md says of it, from the stored result."""
    u, s = doc["uniform_over_policy_like"], doc["stand_in_over_policy_like"]
    spread = cycle_ratios(doc, "uniform") + cycle_ratios(doc, "stand_in")
    n = len(doc["samples"]["policy_like"]) // doc["chunks_per_episode"]
    return (f"Against them, uniform actions in [-1, 1] (what `executor profile` steps with) cost "
            f"{100 * abs(u - 1):.0f} % {'more' if u >= 1 else 'less'} CPU per step here, and the stand-in's own "
            f"sampled chunks {100 * abs(s - 1):.0f} % {'more' if s >= 1 else 'less'} ({n} episodes of each, "
            f"interleaved; from one cycle of the three to the next these ratios ranged from "
            f"{min(spread):.2f} to {max(spread):.2f}).")


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    import torch

    from executor.envs import ACTION_DIM, EnvConfig, EnvProcessGroup, policy_like_actions
    from executor.policies import make_policy
    from perfmodel.schema.jsonio import write_json_atomic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=24, help="episodes, cycling through the three kinds")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "probe_actions.json"))
    a = ap.parse_args(argv)
    chunk, horizon = 5, 30
    rng = np.random.default_rng(0)
    kinds = ("uniform", "policy_like", "stand_in")
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    torch.set_num_threads(1)
    policy = make_policy("pi05", "tiny", device="cpu")  # the run's generator: its chunk, cut to the env's
    gen = torch.Generator().manual_seed(0)
    load = os.getloadavg()[0]
    core = sorted(os.sched_getaffinity(0))[-1]
    t0 = time.time()
    with EnvProcessGroup(EnvConfig(num_action_chunks=chunk, max_episode_steps=horizon), num_envs=1,
                         cores=(core,), render_threads=1) as g:
        g.reset()  # the first reset of a process is cold
        for ep in range(a.episodes):
            kind = kinds[ep % len(kinds)]
            obs = g.reset()["obs"]
            for _ in range(horizon // chunk):
                if kind == "uniform":
                    acts = rng.uniform(-1, 1, (1, chunk, ACTION_DIM))
                elif kind == "policy_like":
                    acts = policy_like_actions(rng, (1, chunk, ACTION_DIM))
                else:
                    acts = policy.generate({**obs, "language": g.languages}, generator=gen).actions.numpy()[:, :chunk]
                res = g.chunk_step(acts)
                obs = res["obs"]
                samples[kind].append(float(np.mean(res["step_cpu_s"])))
    means = {k: statistics.fmean(v) for k, v in samples.items()}
    doc = {"source": " ".join(["python benchmarks/probe_actions.py", *(sys.argv[1:] if argv is None else argv)]),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "env": f"libero_spatial task 0, 128 px, rendered, chunk {chunk}, horizon {horizon}, core {core}",
           "unit": "CPU seconds per env step, mean of each chunk", "loadavg_1min_before": load,
           "loadavg_1min_after": os.getloadavg()[0], "wall_s": time.time() - t0, "samples": samples,
           "chunks_per_episode": horizon // chunk,
           "mean_s": means, "uniform_over_policy_like": means["uniform"] / means["policy_like"],
           "stand_in_over_policy_like": means["stand_in"] / means["policy_like"]}
    write_json_atomic(Path(a.out), doc)
    print(f"uniform {means['uniform']:.4f} s, policy-like {means['policy_like']:.4f} s, stand-in "
          f"{means['stand_in']:.4f} s per step: uniform / policy-like {doc['uniform_over_policy_like']:.3f}, "
          f"stand-in / policy-like {doc['stand_in_over_policy_like']:.3f} (load {load:.2f} before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

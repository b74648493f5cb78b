"""The Python API (perfmodel.api): predict one plan with its interval, then let the planner
choose among the modes on the same 32 GPUs and print its table. The same functions run behind
`perfmodel predict --json` and `perfmodel plan --json`, and return what those print.

Run: python examples/api_example.py
"""

from __future__ import annotations

from perfmodel import api


def main() -> None:
    p = api.predict(mode="rollout_async", gpus=32, gpu_hour_price=2.5, say=lambda line: None)
    iv = p["throughput_interval"]
    print(f"rollout_async on 32 GPUs: {p['throughput_env_steps_per_s']:.1f} env steps/s "
          f"(90% interval {iv['low']:.1f}..{iv['high']:.1f}), bottleneck {p['bottleneck']}, "
          f"${p['dollars_per_million_env_steps']:.2f} per million env steps")

    choice = api.plan(gpus=32, modes=["colocated", "train_async", "rollout_async"], ratios=["1:1", "3:1"],
                      say=lambda line: None)
    best = choice["best"]
    print(f"best: {best['mode']} at {best['allocation_ratio']}, {best['throughput_env_steps_per_s']:.1f} env steps/s")
    print(api.format_plan(choice))


if __name__ == "__main__":
    main()

"""Count RLinf's LIBERO configs (../shared/reference/rlinf-configs/) and the RL-VLA3 fork's
(../shared/reference/rl-vla3-fork/config/libero/, composed with EMBODIED_PATH set to the fork's
folder) that import and predict, and why each of the others is refused (the key the one-line
error names).

    python benchmarks/rlinf_reference_configs.py [CONFIG_DIR] [--no-predict] [--json OUT]

Each imported config is predicted as it is (no interval: the count is about import and
simulation), with its share of the analytic bound and the mechanism taking the most of the rest
(perfmodel.bound_gap); a refusal is a ConfigError, printed with its key. ``--json OUT`` writes
each predicted config's throughput, bound and ``bound_gap`` (benchmarks/results/rlinf_bound_gap.json
is this, checked by tests/test_bound_gap.py). Exit 1 if anything else is raised.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from perfmodel.prediction import predict
from perfmodel.rlinf.catalogue import embodied_path_set
from perfmodel.schema.jsonio import write_json_atomic
from perfmodel.rlinf.importer import load_rlinf
from perfmodel.schema.errors import ConfigError
from perfmodel.schema.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = next((p / "shared" / "reference" / "rlinf-configs" for p in (ROOT.parent, ROOT.parent.parent)
                if (p / "shared" / "reference" / "rlinf-configs").is_dir()), ROOT.parent / "shared/reference/rlinf-configs")


def main(argv: list[str]) -> int:
    out_json = argv[argv.index("--json") + 1] if "--json" in argv else None
    args = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--json")]
    stored: dict[str, dict] = {}
    ref = Path(args[0]) if args else DEFAULT
    fork = ref.parent / "rl-vla3-fork"
    configs = [(p, None) for p in sorted(ref.glob("*.yaml"))] + \
        [(p, fork) for p in sorted((fork / "config" / "libero").glob("*.yaml"))]
    ok, refused, crashed = 0, Counter(), 0
    for cfg, embodied in configs:
        try:
            with embodied_path_set(embodied):
                im = load_rlinf(cfg)
            line = f"{im.backbone:12s} {im.plan.mode:14s} {im.plan.cluster.gpus:3d} GPUs"
            if "--no-predict" not in argv:
                d = predict(im.plan, load_profile(im.plan.profile), interval=False)
                g = d["bound_gap"]
                top = g["rest"][0]["mechanism"] if g["rest"] else "-"
                line += (f"  {d['throughput_env_steps_per_s']:8.1f} env steps/s ({d['bottleneck']}), "
                         f"{100 * g['share_of_bound']:3.0f}% of bound; rest: {top}")
                if embodied is None:  # RLinf's own configs (the fork's run pipelined stages)
                    stored[cfg.name] = {"mode": im.plan.mode, "backbone": im.backbone,
                                        "throughput_env_steps_per_s": d["throughput_env_steps_per_s"],
                                        "bound_env_steps_per_s": d["bound_env_steps_per_s"], "bound_gap": g}
            print(f"ok       {cfg.name:46s} {line}")
            ok += 1
        except ConfigError as e:
            refused[e.field] += 1
            print(f"refused  {cfg.name:46s} {e.field}: {e.message[:110]}")
        except Exception as e:  # noqa: BLE001 - a crash is what this script exists to find
            crashed += 1
            print(f"CRASH    {cfg.name:46s} {e!r}")
    print(f"\n{ok} of {len(configs)} import and predict; refused by key: "
          + ", ".join(f"{k} {n}" for k, n in refused.most_common()) + (f"; {crashed} crashed" if crashed else ""))
    if out_json:
        write_json_atomic(out_json, {"source": "python benchmarks/rlinf_reference_configs.py --json",
                                     "configs": stored})
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

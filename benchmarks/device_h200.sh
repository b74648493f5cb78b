#!/usr/bin/env bash
# RLinf's own per-GPU LIBERO workload, run end to end on one lent H200 (issue 39, item 5): the full
# pi0.5 stand-in (random weights, architecture-faithful cost) colocated on the GPU with 8 and 16
# real LIBERO envs on the machine's 16 cores (RLinf's per-GPU share of a 128-core 8-GPU node),
# RLinf's chunk 5 and denoising steps 3 (libero_*_ppo_openpi_pi05.yaml), with a horizon and epochs
# cut to fit a lease. Each is `executor run --compare`: the prediction from the H200 profile
# (profiles/pi05_full_gpu.json), scaled to the host by the pre-run probe, is made before the run.
# Writes each run's directory under RUN_DIR and, where the device tool's $OUT is set, each record
# as $OUT/colocated_<n>envs.json (the files that come back), plus $OUT/device_h200.log.
#
#   bash benchmarks/device_h200.sh                  # on the device, from the repo root
#   DRY_RUN=1 bash benchmarks/device_h200.sh        # write the plans, print the commands (tests)
#   DEVICE=cpu SCALE=tiny ENVS=2 HORIZON=10 CORES=2 PROFILE=profiles/pi05_tiny_cpu.json QUICK=1 \
#     bash benchmarks/device_h200.sh                # the same path in tiny form on a CPU box
#
# The device image has PyTorch but not Ray, MuJoCo, robosuite or LIBERO: they come from a
# wheelhouse in WHEELS (default .wheels, git-ignored, named in the run's carry). Their cp312 wheels
# measured 2026-12-06: ray 2.60.0 79 MB, mujoco 3.17.0 27 MB, robosuite 1.4.0 193 MB, LIBERO's
# assets 71 MB each of 5 parts: over the 64 MiB one call carries, so a lease must stage them in
# parts first (docs/validation.md, "On a lent H200").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
SCALE=${SCALE:-full}
ENVS=${ENVS:-"8 16"}
HORIZON=${HORIZON:-40}
CHUNK=${CHUNK:-5}
DENOISING=${DENOISING:-3}
CORES=${CORES:-16}
PROFILE=${PROFILE:-profiles/pi05_full_gpu.json}
ITERATIONS=${ITERATIONS:-3}
RUN_DIR=${RUN_DIR:-runs/device_h200}
WHEELS=${WHEELS:-.wheels}
QUICK_FLAGS=$([ "${QUICK:-0}" = 1 ] && echo "--soft-reset --settle-steps 0 --no-render" || true)
mkdir -p "$RUN_DIR"
LOG=${OUT:+$OUT/device_h200.log}
LOG=${LOG:-$RUN_DIR/device_h200.log}
if [ "${DRY_RUN:-0}" != 1 ] && ! "$PY" -c "import ray, mujoco, robosuite, libero, simpy" 2>/dev/null; then
  if [ ! -d "$WHEELS" ]; then
    echo "error: WHEELS: the executor's components (ray, mujoco, robosuite, libero) are not installed and $WHEELS holds no wheelhouse" >&2
    exit 2
  fi
  "$PY" -m pip install -q --no-index --find-links "$WHEELS" -e ".[executor]"
fi
export MUJOCO_GL=${MUJOCO_GL:-egl} PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for n in $ENVS; do
  plan="$RUN_DIR/colocated_${n}envs_plan.json"
  # one GPU and its 16 cores, colocated; every sample of an iteration is one global batch
  "$PY" - "$plan" "$n" "$HORIZON" "$CHUNK" "$DENOISING" "$CORES" "$PROFILE" <<'EOF'
import json, os, sys
path, n, horizon, chunk, denoising, cores, profile = sys.argv[1:]
gpu = "h200" if profile.endswith("_gpu.json") else "h100"
profile = os.path.abspath(profile)  # a plan's relative profile path is read from the plan's directory
n, horizon, chunk, cores = int(n), int(horizon), int(chunk), int(cores)
samples = n * (horizon // chunk)
plan = {"mode": "colocated", "allocation_ratio": None, "pipeline_stage_num": 1, "profile": profile,
        "denoising_steps": int(denoising),
        "workload": {"total_num_envs": n, "max_episode_steps": horizon, "num_action_chunks": chunk,
                     "rollout_epoch": 1, "update_epoch": 1, "micro_batch_size": min(samples, 32),
                     "global_batch_size": samples, "group_size": 1, "algorithm": "ppo"},
        "cluster": {"gpus": 1, "gpus_per_node": 1, "cpu_cores_per_node": cores, "actor_cpu_cores_per_gpu": 0.0,
                    "gpu": gpu}}
with open(path, "w") as fh:
    json.dump(plan, fh, indent=2)
EOF
  cmd=("$PY" -m executor.cli run "$plan" --compare --json --profile "$PROFILE" --scale "$SCALE" --device "$DEVICE"
       --out "$RUN_DIR/colocated_${n}envs" --overwrite --iterations "$ITERATIONS" --warmup-iterations 1 --no-progress)
  # shellcheck disable=SC2206
  cmd+=($QUICK_FLAGS)
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "${cmd[*]}"
    continue
  fi
  echo "$(date -u +%FT%TZ) colocated ${n} envs: load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$LOG"
  "${cmd[@]}" > "$RUN_DIR/colocated_${n}envs.out" 2>> "$LOG" || echo "run failed: colocated ${n} envs" | tee -a "$LOG"
  grep '^{' "$RUN_DIR/colocated_${n}envs.out" | tail -1 > "$RUN_DIR/colocated_${n}envs.json" || true
  [ -n "${OUT:-}" ] && cp "$RUN_DIR/colocated_${n}envs.json" "$OUT/" || true
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"  predicted {r['predicted_throughput_env_steps_per_s']:.2f} measured {r['throughput_env_steps_per_s']:.2f} env steps/s, error {r['error_pct']:+.1f} %\")" \
    "$RUN_DIR/colocated_${n}envs.json" 2>/dev/null | tee -a "$LOG" || true
done

#!/usr/bin/env bash
# The capacity-planning walkthrough of docs/guide.md, end to end:
#   perfmodel sweep -> perfmodel plan -> (executor run) -> analysis report
# Usage: [BACKBONE=pi05|gr00t_n15] [PROFILE=file.json] [GPUS=32] [PRICE=2.50] [OUT=dir]
#        [RUN_DIR=runs/X (an executor run's folder: record.json, trace.json)]
#        [CV=cv.json (perfmodel validate --cross-validate --json)] examples/capacity_planning.sh
set -euo pipefail
GPUS=${GPUS:-32}
PRICE=${PRICE:-2.50}
OUT=${OUT:-/tmp/vlaperf_capacity_planning}
if [ -n "${PROFILE:-}" ]; then SRC=(--profile "$PROFILE"); else SRC=(--backbone "${BACKBONE:-pi05}"); fi
mkdir -p "$OUT"

perfmodel sweep "${SRC[@]}" --gpu-hour-price "$PRICE" -o "$OUT/sweep.json" --csv "$OUT/sweep.csv"
perfmodel plan --gpus "$GPUS" --sweep "$OUT/sweep.json" -o "$OUT/plan.json" --details "$OUT/choice.json"
perfmodel predict --plan "$OUT/plan.json" --json --trace "$OUT/sim_trace.json" > "$OUT/prediction.json"

RUN=()
if [ -n "${RUN_DIR:-}" ]; then
  RUN=(--run "$RUN_DIR/record.json")
  if [ -f "$RUN_DIR/trace.json" ]; then RUN+=(--trace-run "$RUN_DIR/trace.json"); fi
else
  echo "no RUN_DIR: run the plan with 'executor run --plan $OUT/plan.json' and pass its folder as RUN_DIR"
fi
if [ -n "${CV:-}" ]; then RUN+=(--cross-validation "$CV"); fi
analysis report --sweep "$OUT/sweep.json" --choice "$OUT/choice.json" --prediction "$OUT/prediction.json" \
  --trace-sim "$OUT/sim_trace.json" "${RUN[@]}" \
  --reference "$(dirname "$0")/../profiles/reference/rl_vla3_libero.csv" -o "$OUT/report.html"

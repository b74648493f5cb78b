#!/usr/bin/env bash
# Profile the FULL-scale pi05 and gr00t_n15 stand-ins on one GPU: inference vs batch size (12: an
# async rollout batch, 48: one GPU's envs in lock-step), training micro-batch vs size (128: the
# published micro_batch_size), optimizer step, offload/reload, host link (pinned and pageable),
# peak GPU memory per size, weight-sync bandwidth. Envs stay on CPU
# workers: their costs are copied from the committed CPU profiles (profiles/*_tiny_cpu.json).
# About 5 minutes on one H200. Writes profiles/<backbone>_full_gpu.json (or $OUT_DIR/...).
#
#   bash benchmarks/profile_gpu.sh                       # on the GPU machine
#   DEVICE=cpu SCALE=tiny bash benchmarks/profile_gpu.sh  # dry run of the same path on a CPU box
#   BACKBONES=pi05 bash benchmarks/profile_gpu.sh         # one backbone (default: pi05 gr00t_n15)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
SCALE=${SCALE:-full}
OUT_DIR=${OUT_DIR:-profiles}
BATCH_SIZES=${BATCH_SIZES:-1,12,48,96}
TRAIN_SIZES=${TRAIN_SIZES:-1,16,64,128}
SYNC_MB=${SYNC_MB:-16,64,256}
REPEATS=${REPEATS:-5}
TRAINED_PART=${TRAINED_PART:-action_expert}  # full: every weight (files *_trained_full.json, not read by calibration)
# the 2026-12-04 H200 profiles ran with it (less fragmentation at the large training sizes)
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
if [ "$DEVICE" != cpu ]; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true; fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
for bb in ${BACKBONES:-pi05 gr00t_n15}; do
  suffix=$([ "$DEVICE" = cpu ] && echo cpu_dryrun || echo gpu)  # never overwrites *_tiny_cpu.json
  [ "$TRAINED_PART" = action_expert ] || suffix="${suffix}_trained_${TRAINED_PART}"
  "$PY" -m executor.cli profile --backbone "$bb" --scale "$SCALE" --device "$DEVICE" \
    --env-profile "profiles/${bb}_tiny_cpu.json" --gpus-per-node 8 \
    --batch-sizes "$BATCH_SIZES" --train-sizes "$TRAIN_SIZES" --repeats "$REPEATS" --sync-mb "$SYNC_MB" \
    --trained-part "$TRAINED_PART" --out "$OUT_DIR/${bb}_${SCALE}_${suffix}.json" --no-progress ${PROFILE_ARGS:-}
done

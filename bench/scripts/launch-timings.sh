#!/usr/bin/env bash
# Programmatic dependent launch against launches one after another, in one
# run on the GPU host (after ci/pack-device.sh; source .device/setup.sh first):
# GPT-2 124M's decode steps and forwards at T=16 and 1024, each measured
# alternately with and without (MLPIPE_PROGRAMMATIC_LAUNCH=0), then the unit
# kernels and a per-kernel profile of the decode step. Output in $OUT (or
# /tmp/mlpipe-launch-timings).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host launch-timings
gpt2=(bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --repeat 10 --warmup 2)
# timed LAUNCH LENGTH: one bench of GPT-2 at T=LENGTH, kernels launched
# programmatically or serially; its forward table (and decode table at 16).
timed() {
  local value=1
  [[ $1 == serial ]] && value=0
  echo "== T=$2, $1 launches"
  MLPIPE_PROGRAMMATIC_LAUNCH=$value "${gpt2[@]}" --seq "$2" | sed -n '/^KV-cache/,/^$/p;/T  median/,/^$/p'
}
for round in 1 2; do
  echo "== round $round"
  timed programmatic 16
  timed serial 16
done
timed programmatic 1024
timed serial 1024
echo "== unit kernels"
bench kernels
echo "== decode step, per kernel"
bench --config 124M --weights synthetic --target gpu --modes fused --seq 16 --repeat 5 --warmup 1 --profile \
  --csv "$out/decode-profile.csv" >/dev/null
grep '^fused-step' "$out/decode-profile.csv" | sort -t, -k5 -rn | sed -n 1,12p

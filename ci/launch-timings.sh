#!/usr/bin/env bash
# Programmatic dependent launch against launches one after another, in one
# run on the GPU host (after ci/pack-device.sh; source .device/setup.sh first):
# GPT-2 124M's decode steps and forwards at T=16 and 1024, each measured
# alternately with and without (MLPIPE_PROGRAMMATIC_LAUNCH=0), then the unit
# kernels and a per-kernel profile of the decode step. Output in $OUT (or
# /tmp/mlpipe-launch-timings).
set -eu
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/mlpipe-launch-timings}
mkdir -p "$out"
export MLPIPE_TOKENIZER_DIR=$root/.device/tokenizer
export MLPIPE_CACHE_DIR=$(mktemp -d)
gpt2=(bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --repeat 10 --warmup 2)
for round in 1 2; do
  for launch in programmatic serial; do
    value=1
    [[ $launch == serial ]] && value=0
    echo "== round $round, $launch launches"
    MLPIPE_PROGRAMMATIC_LAUNCH=$value "${gpt2[@]}" --seq 16 | sed -n '/^KV-cache/,/^$/p;/T  median/,/^$/p'
  done
done
for launch in programmatic serial; do
  value=1
  [[ $launch == serial ]] && value=0
  echo "== T=1024, $launch launches"
  MLPIPE_PROGRAMMATIC_LAUNCH=$value "${gpt2[@]}" --seq 1024 | sed -n '/T  median/,/^$/p'
done
echo "== unit kernels"
bench kernels
echo "== decode step, per kernel"
bench --config 124M --weights synthetic --target gpu --modes fused --seq 16 --repeat 5 --warmup 1 --profile \
  --csv "$out/decode-profile.csv" >/dev/null
grep '^fused-step' "$out/decode-profile.csv" | sort -t, -k5 -rn | head -12

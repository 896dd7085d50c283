#!/usr/bin/env bash
# The paths a round has not yet checked on the GPU host, in one short call:
# batched decoding (each sequence token for token as alone, then the
# batch table) and the bf16 unit kernels. Prints as it goes; the bulky files stay
# in a scratch folder, the summary goes to $OUT/check-new-paths.txt.
#   source .device/setup.sh && bench/scripts/check-new-paths.sh
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host check-new-paths
report=$out/check-new-paths.txt
scratch=$(mktemp -d)
section() { echo "== $* ($SECONDS s)" | tee -a "$report"; }
section batched decoding
for mode in "fused --batch 4" "fused --dtype bf16 --batch 3"; do
  timeout 60 python3 test/Inputs/batched_generate.py --scratch "$scratch/b.${mode// /_}" --prompts 5 \
    --batch "${mode##*--batch }" --tokens 8 -- --mode ${mode%% --batch*} --config tiny --target gpu 2>&1 |
    grep -E "PASS|FAIL|error" | sed "s/^/$mode: /" | tee -a "$report"
done
timeout 90 python3 test/Inputs/batched_generate.py --scratch "$scratch/b124" --prompts 6 --batch 4 --tokens 10 \
  -- --mode fused --config 124M --target gpu 2>&1 | grep -E "PASS|FAIL|error" | sed 's/^/124M fused: /' | tee -a "$report"
section bf16 unit kernels
timeout 90 bench kernels --dtype bf16 2>&1 | tee -a "$report"
section batched decoding table
timeout 200 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16 --batches 1,8,32,64 \
  --repeat 5 --warmup 1 2>&1 | sed -n '/^Batched/,$p' | tee -a "$report"
section done
rm -rf "$scratch"

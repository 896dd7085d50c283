#!/usr/bin/env bash
# Products of few rows (decode batches, short prompts) on the GPU host:
# mlpipe's paths against cuBLAS called directly on the same shapes, in f32
# and bf16, then GPT-2 124M where those products run (batched decode steps
# at batch 1, 8 and 32, the T=16 forward, a decode step), with this build
# and, alternated with it, every build packed beside it
# (compare-builds.sh --pack NAME DIR). Pack here first:
#   ci/pack-device.sh build [&& bench/scripts/compare-builds.sh --pack before OTHER_BUILD]
# then, on the GPU host:
#   source .device/setup.sh && bench/scripts/few-row-products.sh [PART...]
# PART is any of matmul gpt2 (default: both). Output in $OUT (or
# /tmp/mlpipe-few-row-products), one log per step.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host few-row-products
parts=" ${*:-matmul gpt2} "
want() { [[ $parts == *" $1 "* ]]; }

# The products of GPT-2 124M at 8, 16, 32 and 64 rows: c_attn, attention's
# c_proj, the MLP's c_fc and c_proj.
shapes=()
for rows in 8 16 32 64; do
  shapes+=("${rows}x768x2304" "${rows}x768x768" "${rows}x768x3072" "${rows}x3072x768")
done
shapeList=$(
  IFS=,
  echo "${shapes[*]}"
)

if want matmul; then
  for dtype in f32 bf16; do
    echo "== bench matmul --dtype $dtype"
    bench matmul --dtype "$dtype" --shapes "$shapeList" --matmul cublas,generated --repeat 15 --launches 20 \
      --warmup 3 2>&1 | tee "$out/matmul-$dtype.txt"
  done
fi

if want gpt2; then
  names=(this)
  for dir in .device/builds/*/; do
    [[ -d $dir ]] && names+=("$(basename "$dir")")
  done
  declare -A caches
  for name in "${names[@]}"; do
    caches[$name]=$(mktemp -d)
  done
  # timed NAME ARGS...: one bench with build NAME ("this": this tree's).
  timed() {
    local name=$1 path=$LD_LIBRARY_PATH bench=bench
    shift
    [[ $name != this ]] && path=$root/.device/builds/$name/lib:$path bench=$root/.device/builds/$name/bin/bench
    echo "== $name: bench $*"
    LD_LIBRARY_PATH=$path MLPIPE_CACHE_DIR=${caches[$name]} "$bench" --config 124M --weights synthetic \
      --target gpu "$@"
  }
  # Each bench times the T=16 forward, decode steps after a prompt of 10
  # tokens and the batched steps.
  for dtype in f32 bf16; do
    for name in "${names[@]}"; do
      timed "$name" --modes fused --seq 16 --batches 1,8,32 --repeat 10 --warmup 2 --dtype "$dtype"
    done
  done 2>&1 | tee "$out/gpt2.txt"
fi

#!/usr/bin/env bash
# The generated tensor-core matmul under several option sets, each timed
# beside cuBLASLt on the same product in the same run: which tile, K-slice
# and stage count a product wants. On the GPU host:
#   source .device/setup.sh && bench/scripts/sweep-matmul.sh DTYPE MxKxN[t] [OPTIONS...]   (t: B stored [N, K])
# Each OPTIONS is one set of mlpipe-generated-matmuls options (e.g.
# 'block-tile=128,128,64 stages=3'); '' is the default choice; a word
# chip=CHIP compiles that set for CHIP (sm_90a: the warpgroup form, e.g.
# 'chip=sm_90a block-tile=128,128,64'). Prints one
# line per set: median µs over 200 graph replays, TFLOP/s, and the ratio
# of cuBLASLt's time to it (1.0: as fast as cuBLASLt).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host sweep-matmul
dtype=${1:-bf16} shape=${2:-1024x768x3072}
shift $(($# < 2 ? $# : 2))
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=("")
IFS=x read -r m k n <<<"$shape"
# N ending in t: B stored transposed ([N, K], as the logits read wte).
shapeB=(--shape "${k}x$n")
if [[ $n == *t ]]; then
  n=${n%t}
  shapeB=(--shape "${n}x$k" --transpose-b)
fi
work=$(mktemp -d)
# Random inputs (f32 .npy, rounded to bf16 by run; f16 as f16), made by NumPy: the
# CPU's float64 reference of the logits' product would take minutes.
rowsB=$k colsB=$n
[[ ${shapeB[*]} == *--transpose-b* ]] && rowsB=$n colsB=$k
python3 -c 'import sys, numpy as np
g = np.random.default_rng(1)
for name, r, c in (("a", int(sys.argv[2]), int(sys.argv[3])), ("b", int(sys.argv[4]), int(sys.argv[5]))):
    x = g.standard_normal((r, c), dtype=np.float32)
    np.save(f"{sys.argv[1]}/{name}.npy", x.astype(np.float16) if sys.argv[6] == "f16" else x)' \
  "$work" "$m" "$k" "$rowsB" "$colsB" "$dtype"
inputs=(--input a=@"$work/a.npy" --input b=@"$work/b.npy")
trace matmul --shape "${m}x$k" "${shapeB[@]}" --dtype "$dtype" | fuse | bufferize >"$work/buffers.mlir"
# Median µs of a lowered module's run (run prints "median ... ms").
time_of() { run "$1" "${inputs[@]}" --repeat 200 | sed -n 's/.*median[^0-9]*\([0-9.]*\) *ms.*/\1/p' | head -1; }
outline --matmul cublas <"$work/buffers.mlir" | lower-nvvm -o "$work/cublas.mlir"
cublas=$(time_of "$work/cublas.mlir")
flops=$((2 * m * k * n))
awk -v d="$dtype" -v s="$shape" -v t="$cublas" -v f=$flops \
  'BEGIN { printf "%s %s: cuBLASLt %.1f us (%.0f TFLOP/s)\n", d, s, t * 1000, f / (t * 1e-3) / 1e12 }'
for set in "${sets[@]}"; do
  # A matmul with an epilogue (a 16-bit C: f32 rounded) is a matmul fusion,
  # emitted by mlpipe-emit-fusions: its block-tile, warp-tile and stages go there too.
  fused="" options="" chip=sm_90
  for word in $set; do
    if [[ $word == chip=* ]]; then
      chip=${word#chip=}
      continue
    fi
    options+=" $word"
    if [[ $word == block-tile=* || $word == warp-tile=* || $word == stages=* || $word == form=* || $word == split-k=* || $word == staged-epilogue=* ]]; then fused+=" matmul-$word"; fi
  done
  sed -e "s/mlpipe-generated-matmuls{chip={chip} precision={precision}}/mlpipe-generated-matmuls{chip={chip} precision={precision}$options}/" \
    -e "s/mlpipe-emit-fusions{chip={chip} precision={precision}}/mlpipe-emit-fusions{chip={chip} precision={precision}$fused}/" \
    pipelines/outline.pipeline >"$work/outline.pipeline"
  if ! outline --chip "$chip" --matmul generated --pipeline "$work/outline.pipeline" <"$work/buffers.mlir" |
    lower-nvvm --chip "$chip" -o "$work/generated.mlir" 2>"$work/error"; then
    printf '  %-40s failed: %s\n' "${set:-default}" "$(head -1 "$work/error")"
    continue
  fi
  t=$(time_of "$work/generated.mlir")
  awk -v o="${set:-default}" -v t="$t" -v c="$cublas" -v f=$flops \
    'BEGIN { printf "  %-40s %7.1f us %5.0f TFLOP/s %5.2fx cuBLASLt\n", o, t * 1000, f / (t * 1e-3) / 1e12, c / t }'
done

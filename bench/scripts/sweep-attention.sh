#!/usr/bin/env bash
# The fused tensor-core attention kernel under several option sets of the
# fused attention pass, each timed in the same run on the attention unit
# kernel (12 heads of 64, causal, heads merged after): which rows per
# block, key groups, keys per tile and stages a length wants. On the GPU
# host:
#   source .device/setup.sh && bench/scripts/sweep-attention.sh DTYPE T [OPTIONS...]
# Each OPTIONS is one set of mlpipe-fused-attention options (e.g.
# 'tc-rows-per-block=64 tc-key-groups=1'); '' is the default choice; a word
# chip=CHIP compiles that set for CHIP. Prints one line per set: median µs
# of the program (attention and the heads' merge) over 200 graph replays,
# TFLOP/s on the causal FLOPs (4 T (T+1) / 2 D per head) over that time,
# and its largest error against the float64 reference.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host sweep-attention
dtype=${1:-bf16} T=${2:-1024}
shift $(($# < 2 ? $# : 2))
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=("")
heads=12 width=768
work=$(mktemp -d)
verify attention --shape "${T}x$width" --heads $heads --dtype "$dtype" --target cpu --save "$work/data" >/dev/null
inputs=(--input q=@"$work/data/attention/q.npy" --input k=@"$work/data/attention/k.npy"
  --input v=@"$work/data/attention/v.npy")
trace attention --shape "${T}x$width" --heads $heads --dtype "$dtype" | fuse | bufferize >"$work/buffers.mlir"
flops=$((4 * T * (T + 1) / 2 * (width / heads) * heads))
echo "$dtype T=$T, $heads heads of $((width / heads)), causal:"
for set in "${sets[@]}"; do
  options="" chip=sm_90
  for word in $set; do
    if [[ $word == chip=* ]]; then
      chip=${word#chip=}
      continue
    fi
    options+=" $word"
  done
  sed "s/mlpipe-fused-attention{chip={chip}}/mlpipe-fused-attention{chip={chip}$options}/" \
    pipelines/outline.pipeline >"$work/outline.pipeline"
  if ! outline --chip "$chip" --pipeline "$work/outline.pipeline" <"$work/buffers.mlir" |
    lower-nvvm --chip "$chip" -o "$work/attention.mlir" 2>"$work/error"; then
    printf '  %-70s failed: %s\n' "${set:-default}" "$(head -1 "$work/error")"
    continue
  fi
  t=$(run "$work/attention.mlir" "${inputs[@]}" --repeat 200 | sed -n 's/.*median[^0-9]*\([0-9.]*\) *ms.*/\1/p' | head -1)
  run "$work/attention.mlir" "${inputs[@]}" --output y=@"$work/y.npy" >/dev/null 2>>"$work/notes.log"
  error=$(python3 -c 'import sys, numpy as n
print("%.2e" % abs(n.load(sys.argv[1]).astype(n.float64) - n.load(sys.argv[2])).max())' \
    "$work/y.npy" "$work/data/attention/y.reference.npy")
  awk -v o="${set:-default}" -v t="$t" -v f=$flops -v e="$error" \
    'BEGIN { printf "  %-70s %7.1f us %5.0f TFLOP/s  err %s\n", o, t * 1000, f / (t * 1e-3) / 1e12, e }'
done

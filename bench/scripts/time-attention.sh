#!/usr/bin/env bash
# The attention unit kernel (heads split, attention, heads merged) in bf16
# and f16 on its two paths, timed in one run on the GPU host: the fused
# kernel on tensor cores (the default where it fits) against the three
# kernels (scores GEMM on cuBLASLt, softmax row reduction, values GEMM)
# that the pass leaves with tensor-cores=false max-keys=1; then the
# tensor-core kernel's own time under ncu at GPT-2's shapes, as TFLOP/s on
# the causal FLOPs (4 T (T+1) / 2 D per head). Builds packed with
# bench/scripts/compare-builds.sh --pack NAME BUILD_DIR LIBRARY... each add a
# column: the tensor-core kernel as that build compiles it, timed in the
# same run (and under ncu beside this build's); so does each
# --variant NAME='OPTIONS': the tensor-core kernel with those options of
# the fused attention pass (e.g. --variant staged='tc-stages=2').
#   source .device/setup.sh && bench/scripts/time-attention.sh [--variant NAME=OPTIONS]... [T...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host time-attention
declare -A variant_options=()
variants=()
while [[ ${1:-} == --variant ]]; do
  [[ ${2:-} =~ ^([A-Za-z0-9_.-]+)=(.*)$ ]] || { echo "time-attention: --variant NAME=OPTIONS, not '${2:-}'" >&2; exit 2; }
  variants+=("${BASH_REMATCH[1]}")
  variant_options[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  shift 2
done
lengths=("${@:-64 128 256 512 1024}")
read -r -a lengths <<<"${lengths[*]}"
heads=12 width=768 repeat=200
sed 's/mlpipe-fused-attention{chip={chip}}/mlpipe-fused-attention{chip={chip} tensor-cores=false max-keys=1}/' \
  pipelines/outline.pipeline >"$out/three-kernels.pipeline"
for name in "${variants[@]}"; do
  sed "s/mlpipe-fused-attention{chip={chip}}/mlpipe-fused-attention{chip={chip} ${variant_options[$name]}}/" \
    pipelines/outline.pipeline >"$out/$name.pipeline"
done
builds=()
for dir in .device/builds/*/; do
  [[ -d $dir ]] && builds+=("$(basename "$dir")")
done
# in_build NAME COMMAND...: COMMAND with that packed build's libraries first.
in_build() {
  local name=$1
  shift
  LD_LIBRARY_PATH=$root/.device/builds/$name/lib:$LD_LIBRARY_PATH MLPIPE_CACHE_DIR=$out/cache.$name "$@"
}
# same_as_default NAME DATA: whether NAME's output has this build's bits,
# else both outputs' largest error against the float64 reference (a
# variant that orders the sums otherwise rounds otherwise).
same_as_default() {
  if cmp -s "$out/y.tensor.npy" "$out/y.$1.npy"; then
    printf ' (same y)'
  else
    python3 -c 'import sys, numpy as n
r = n.load(sys.argv[3]); e = [abs(n.load(f).astype(n.float64) - r).max() for f in sys.argv[1:3]]
print(" (err %.2e, this build %.2e)" % (e[1], e[0]), end="")' "$out/y.tensor.npy" "$out/y.$1.npy" "$2/attention/y.reference.npy"
  fi
}
printf '%-6s %-5s %14s %16s %9s %22s' dtype T "tensor ms" "three-kernel ms" ratio "program TFLOP/s causal"
for name in "${builds[@]}" "${variants[@]}"; do printf ' %16s' "$name ms"; done
printf '\n'
for dtype in bf16 f16; do
  for T in "${lengths[@]}"; do
    data=$out/data.$dtype.$T
    verify attention --shape "${T}x$width" --heads $heads --dtype $dtype --target cpu --save "$data" >/dev/null
    qkv="--input q=@$data/attention/q.npy --input k=@$data/attention/k.npy --input v=@$data/attention/v.npy"
    trace attention --shape "${T}x$width" --heads $heads --dtype $dtype | fuse | bufferize >"$out/a.$dtype.$T.mlir"
    outline "$out/a.$dtype.$T.mlir" | lower-nvvm -o "$out/tensor.$dtype.$T.mlir"
    outline "$out/a.$dtype.$T.mlir" --pipeline "$out/three-kernels.pipeline" | lower-nvvm -o "$out/three.$dtype.$T.mlir"
    # shellcheck disable=SC2086
    tensor=$(run "$out/tensor.$dtype.$T.mlir" $qkv --repeat $repeat | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    # shellcheck disable=SC2086
    three=$(run "$out/three.$dtype.$T.mlir" $qkv --repeat $repeat | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
    awk -v d=$dtype -v T="$T" -v a="$tensor" -v b="$three" -v h=$heads -v D=$((width / heads)) 'BEGIN {
      printf "%-6s %-5s %14s %16s %8.2fx %22.1f", d, T, a, b, a / b, 4 * T * (T + 1) / 2 * D * h / (a / 1000) / 1e12 }'
    # shellcheck disable=SC2086
    run "$out/tensor.$dtype.$T.mlir" $qkv --output y=@"$out/y.tensor.npy" >/dev/null 2>>"$out/notes.log"
    for name in "${builds[@]}"; do
      in_build "$name" outline "$out/a.$dtype.$T.mlir" | in_build "$name" lower-nvvm -o "$out/$name.$dtype.$T.mlir"
      # shellcheck disable=SC2086
      printf ' %16s' "$(run "$out/$name.$dtype.$T.mlir" $qkv --repeat $repeat | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')"
      # The same fragments however they are loaded: the same bits out.
      # shellcheck disable=SC2086
      run "$out/$name.$dtype.$T.mlir" $qkv --output y=@"$out/y.$name.npy" >/dev/null 2>>"$out/notes.log"
      same_as_default "$name" "$data"
    done
    for name in "${variants[@]}"; do
      outline "$out/a.$dtype.$T.mlir" --pipeline "$out/$name.pipeline" | lower-nvvm -o "$out/$name.$dtype.$T.mlir"
      # shellcheck disable=SC2086
      printf ' %16s' "$(run "$out/$name.$dtype.$T.mlir" $qkv --repeat $repeat | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')"
      # shellcheck disable=SC2086
      run "$out/$name.$dtype.$T.mlir" $qkv --output y=@"$out/y.$name.npy" >/dev/null 2>>"$out/notes.log"
      same_as_default "$name" "$data"
    done
    echo
  done
done
# The kernel alone, from the profiler (GPU time of each launch).
if command -v ncu >/dev/null; then
  for dtype in bf16 f16; do
    T=${lengths[-1]}
    data=$out/data.$dtype.$T
    qkv="--input q=@$data/attention/q.npy --input k=@$data/attention/k.npy --input v=@$data/attention/v.npy"
    # shellcheck disable=SC2086
    for module in tensor "${builds[@]}" "${variants[@]}"; do
      echo "$module, $dtype, T=$T:"
      ncu --clock-control none --metrics gpu__time_duration.sum -k regex:attention \
        run "$out/$module.$dtype.$T.mlir" $qkv --repeat 5 2>&1 | grep -E "attention|gpu__time_duration" | tail -4
    done
  done
fi

#!/usr/bin/env bash
# One round on the GPU host: correctness first, then timings, a short table
# last. Run it there after packing here (ci/pack-device.sh):
#   source .device/setup.sh && ci/gpu-round.sh [PART...]
# PART is any of units lit verify sanitize gpt2 sixteen attention rows decode timings
# tensorcore loops (default: all but decode, tensorcore and loops, whose tests
# lit runs too), so a round can be split over calls. Full logs
# are written as each step ends to logs/ (and the profile CSV beside it)
# in $OUT (the device tool's output folder) or /tmp/mlpipe-round, so a
# round stopped early keeps the steps it finished. Each step is stopped
# after MLPIPE_STEP_SECONDS (600).
set -u
for part in "$@"; do
  case $part in
    units | lit | verify | sanitize | gpt2 | sixteen | attention | rows | decode | timings | tensorcore | loops) ;;
    *)
      echo "gpu-round: no part '$part' (units lit verify sanitize gpt2 sixteen attention rows decode timings" \
        "tensorcore loops)" >&2
      exit 2
      ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
final=${OUT:-/tmp/mlpipe-round}
work=$(mktemp -d)
logs=$final/logs
mkdir -p "$logs" "$final"
parts=" ${*:-units lit verify sanitize gpt2 sixteen attention rows timings} "
want() { [[ $parts == *" $1 "* ]]; }
stepSeconds=${MLPIPE_STEP_SECONDS:-600}
export PATH=$root/.device/llvm-tools:$PATH
export MLPIPE_TOKENIZER_DIR=$root/.device/tokenizer
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
summary=()

# step NAME COMMAND...: runs it with output in $logs/NAME.log, records PASS/FAIL.
step() {
  local name=$1
  shift
  local start=$SECONDS
  local runner=(timeout "$stepSeconds")
  declare -F "$1" >/dev/null && runner=() # a shell function of this script
  if "${runner[@]}" "$@" >"$logs/$name.log" 2>&1; then
    summary+=("$(printf '%-28s PASS  %4ds' "$name" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-28s FAIL  %4ds  (see %s.log)' "$name" $((SECONDS - start)) "$name")")
    tail -5 "$logs/$name.log"
  fi
}

# lit on the host needs a site config pointing at the packed tools.
mkdir -p "$work/test"
cat >"$work/test/lit.site.cfg.py" <<SITE
import os
config.mlpipe_source_dir = "$root"
config.mlpipe_binary_dir = "$work"
config.mlpipe_tools_dir = "$root/.device/bin"
config.llvm_tools_dir = "$root/.device/llvm-tools"
config.cuda_toolkit = "$CUDA_HOME"
lit_config.load_config(config, os.path.join(config.mlpipe_source_dir, "test", "lit.cfg.py"))
SITE

echo "== GPU: $(run --gpu-info)"
# 1. Correctness.
if want units; then
  step unit.mgpu_gpu_test mgpu_gpu_test --log_level=message
  step unit.gpt2_runner_gpu_test gpt2_runner_gpu_test --log_level=message
  step unit.gemm_gpu_test gemm_gpu_test --log_level=message
fi
want lit && step lit.all lit -sv -j 8 "$work/test"
if want verify; then
  step verify.kernels.sm_90 verify all --target gpu --chip sm_90
  step verify.kernels.sm_75 verify all --target gpu --chip sm_75 --format isa
  step verify.kernels.f64 verify all --target gpu --dtype f64
  step verify.kernels.bf16 verify all --target gpu --dtype bf16
  step verify.kernels.f16 verify all --target gpu --dtype f16
  step verify.kernels.bf16.generated verify all --target gpu --dtype bf16 --matmul generated
  step verify.kernels.bf16.sm_75 verify all --target gpu --dtype bf16 --chip sm_75 --format isa
  step verify.hlo.sm_90 verify testdata/hlo/*.hlo --target gpu --chip sm_90
  step verify.hlo.sm_75 verify testdata/hlo/*.hlo --target gpu --chip sm_75 --format isa
  step verify.hlo.jax.sm_90 verify testdata/hlo/jax/*.hlo --target gpu --chip sm_90
  # The programs with pred masks (once wrong on the GPU: pred moved as i1
  # vectors), on more seeds.
  for seed in 1 2 3 4 5; do
    step verify.hlo.pred.$seed verify testdata/hlo/sort_edges.hlo testdata/hlo/scatter_types.hlo \
      testdata/hlo/scatter_variadic.hlo --target gpu --seed $seed
  done
  # The fused attention kernel at GPT-2's shape and at a cut-short last tile.
  step verify.attention.1024 verify attention --shape 1024x768 --heads 12 --target gpu
  step verify.attention.1000 verify attention --shape 1000x384 --heads 6 --target gpu
fi

# 2. Memory: every GPU allocation freed, no bad access, no shared-memory race
#    (compute-sanitizer memcheck and racecheck), on unit kernels and on whole
#    GPT-2 forwards replayed as CUDA graphs.
sanitize() {
  verify gelu softmax matmul transpose layernorm --target cpu --save "$work/data" >/dev/null || return 1
  for kernel in gelu softmax matmul transpose layernorm; do
    trace $kernel | fuse | bufferize | outline | lower-nvvm -o "$work/$kernel.gpu.mlir" || return 1
  done
  memcheck="compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3"
  racecheck="compute-sanitizer --tool racecheck --error-exitcode 3"
  $memcheck run "$work/gelu.gpu.mlir" --input x=@"$work/data/gelu/x.npy" --output y=@"$work/gelu.y.npy" || return 1
  $memcheck run "$work/matmul.gpu.mlir" --input a=@"$work/data/matmul/a.npy" --input b=@"$work/data/matmul/b.npy" \
    --output y=@"$work/matmul.y.npy" || return 1
  $memcheck run "$work/softmax.gpu.mlir" --input x=@"$work/data/softmax/x.npy" --repeat 3 || return 1
  $racecheck run "$work/softmax.gpu.mlir" --input x=@"$work/data/softmax/x.npy" || return 1
  $racecheck run "$work/matmul.gpu.mlir" --input a=@"$work/data/matmul/a.npy" --input b=@"$work/data/matmul/b.npy" || return 1
  $racecheck run "$work/transpose.gpu.mlir" --input x=@"$work/data/transpose/x.npy" || return 1
  $racecheck run "$work/layernorm.gpu.mlir" --input x=@"$work/data/layernorm/x.npy" \
    --input weight=@"$work/data/layernorm/weight.npy" --input bias=@"$work/data/layernorm/bias.npy" || return 1
  # Four tokens: a prefill, then decode steps run directly, captured and replayed
  # (each decode step's attention split over the cache's keys, then combined).
  for mode in sublayer fused; do
    MLPIPE_CACHE_DIR=$work/sanitizer-cache $memcheck generate "Hello" --tokens 4 --config tiny --mode $mode --target gpu ||
      return 1
    MLPIPE_CACHE_DIR=$work/sanitizer-cache $racecheck generate "Hello" --tokens 3 --config tiny --mode $mode \
      --target gpu --no-graphs || return 1
  done
  # The fused attention kernel: odd length (a cut-short key tile), head size 64.
  verify attention --shape 100x384 --heads 6 --target cpu --save "$work/data" >/dev/null || return 1
  trace attention --shape 100x384 --heads 6 | fuse | bufferize | outline | lower-nvvm -o "$work/attention.gpu.mlir" ||
    return 1
  local qkv="--input q=@$work/data/attention/q.npy --input k=@$work/data/attention/k.npy --input v=@$work/data/attention/v.npy"
  $memcheck run "$work/attention.gpu.mlir" $qkv --output y=@"$work/attention.y.npy" || return 1
  $racecheck run "$work/attention.gpu.mlir" $qkv || return 1
  verify "$work/attention.y.npy" "$work/data/attention/y.reference.npy" --rtol 1e-4 --atol 1e-5 || return 1
  trace matmul | fuse | bufferize | outline --matmul generated | lower-nvvm -o "$work/matmul.generated.mlir" || return 1
  $memcheck run "$work/matmul.generated.mlir" --input a=@"$work/data/matmul/a.npy" --input b=@"$work/data/matmul/b.npy" \
    --output y=@"$work/matmul.generated.y.npy" || return 1
  verify "$work/gelu.y.npy" "$work/data/gelu/y.reference.npy" --rtol 1e-5 --atol 1e-6 &&
    verify "$work/matmul.y.npy" "$work/data/matmul/y.reference.npy" --rtol 1e-4 --atol 1e-5 &&
    verify "$work/matmul.generated.y.npy" "$work/data/matmul/y.reference.npy" --rtol 1e-4 --atol 1e-5
}
want sanitize && step compute-sanitizer sanitize

# 3. GPT-2 124M (synthetic weights): verify both modes, generate, with a
#    fresh compile cache so compile times are real.
export MLPIPE_CACHE_DIR=$work/cache
if want gpt2; then
  step gpt2.verify.sublayer verify gpt2 --steps 10 --mode sublayer --target gpu --weights synthetic --config 124M
  step gpt2.verify.fused verify gpt2 --steps 10 --mode fused --target gpu --weights synthetic --config 124M
  step gpt2.verify.sublayer.cache-compare verify gpt2 --steps 10 --mode sublayer --cache compare --target gpu \
    --weights synthetic --config 124M
  step gpt2.verify.fused.cache-compare verify gpt2 --steps 10 --mode fused --cache compare --target gpu \
    --weights synthetic --config 124M
  # The generated matmul kernels (the matmul emitter with epilogues) in place of cuBLAS.
  step gpt2.verify.fused.generated verify gpt2 --steps 3 --mode fused --target gpu --weights synthetic --config 124M \
    --matmul generated
  rm -rf "$MLPIPE_CACHE_DIR"
  step gpt2.generate.sublayer generate "The quick brown fox jumps over the lazy dog and" --tokens 10 --mode sublayer --target gpu
  step gpt2.generate.fused generate "The quick brown fox jumps over the lazy dog and" --tokens 10 --mode fused --target gpu
  step gpt2.generate.fused.no-cache generate "The quick brown fox jumps over the lazy dog and" --tokens 10 --mode fused \
    --target gpu --no-cache
fi

# GPT-2 124M in bf16 and f16: both modes against the float64 reference and
# with the cache against without; then the forwards and decode steps timed
# in bf16 and f32 in one run.
if want sixteen; then
  # One-row products (a decode step's GEMVs) on the generated skinny kernel,
  # which reads 16-bit operands as stored: aligned and odd N, each epilogue.
  for dtype in bf16 f16; do
    step verify.gemv.$dtype.aligned verify matmul --shape 1x768 --shape 768x2304 --dtype $dtype --epilogue bias-gelu \
      --target gpu
    step verify.gemv.$dtype.odd verify matmul --shape 1x77 --shape 77x45 --dtype $dtype --epilogue bias-residual \
      --target gpu
    step verify.gemv.$dtype.deep verify matmul --shape 1x3072 --shape 3072x768 --dtype $dtype --epilogue bias \
      --target gpu
  done
  # The fused attention kernel on 16-bit Q, K and V (f32 scores): GPT-2's
  # shape and a cut-short last tile.
  for dtype in bf16 f16; do
    step verify.attention.$dtype.1024 verify attention --shape 1024x768 --heads 12 --dtype $dtype --target gpu
    step verify.attention.$dtype.100 verify attention --shape 100x384 --heads 6 --dtype $dtype --target gpu
  done
  for dtype in bf16 f16; do
    for mode in sublayer fused; do
      step gpt2.verify.$dtype.$mode verify gpt2 --steps 10 --mode $mode --dtype $dtype --cache compare --target gpu \
        --weights synthetic --config 124M
    done
  done
  step bench.gpt2.bf16 bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 16,1024 \
    --dtype bf16 --repeat 20 --warmup 3
  step bench.gpt2.f32 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 --repeat 20 \
    --warmup 3
fi

# The fused attention kernel on tensor cores (16-bit Q, K, V from 16
# query rows on): lengths 1 (a decode step's kernel) to 1024 and head sizes
# 32 to 128 against the float64 reference in bf16 and f16, a racecheck and
# a memcheck of one cut-short shape; then its time against the three-kernel
# path at T = 64 .. 1024 (bench/scripts/time-attention.sh).
attention_sanitized() {
  verify attention --shape 100x384 --heads 3 --dtype bf16 --target cpu --save "$work/tc" >/dev/null || return 1
  trace attention --shape 100x384 --heads 3 --dtype bf16 | fuse | bufferize | outline | lower-nvvm -o "$work/tc.mlir" ||
    return 1
  local qkv="--input q=@$work/tc/attention/q.npy --input k=@$work/tc/attention/k.npy --input v=@$work/tc/attention/v.npy"
  # shellcheck disable=SC2086
  compute-sanitizer --tool memcheck --error-exitcode 1 run "$work/tc.mlir" $qkv || return 1
  # shellcheck disable=SC2086
  compute-sanitizer --tool racecheck --error-exitcode 1 run "$work/tc.mlir" $qkv
}
if want attention; then
  for dtype in bf16 f16; do
    for shape in 1x768:12 16x768:12 17x384:6 64x512:16 100x384:3 333x1024:8 1000x768:6 1024x768:12; do
      step "verify.tc.$dtype.${shape%%:*}.${shape##*:}" verify attention --shape "${shape%%:*}" --heads "${shape##*:}" \
        --dtype $dtype --target gpu
    done
  done
  step attention.sanitized attention_sanitized
  step timings.attention bench/scripts/time-attention.sh
fi

# The tensor-core kernels: the generated matmul's (mma.sync, and wgmma on
# sm_90a) and the fused attention's GPU tests, then the matmul's time
# against cuBLASLt on GPT-2's products in bf16 (T=1024, 16 rows, one row,
# attention's batched products), and GPT-2 124M in bf16 with every matmul
# generated against the default (cuBLASLt) in one run.
gpt2_products=1024x768x2304,1024x768x3072,1024x3072x768,1024x768x768,1024x768x50257
gpt2_products+=,16x768x2304,16x768x3072,16x3072x768,1x768x2304,1x3072x768,12x1024x64x1024,12x1024x1024x64
if want tensorcore; then
  step lit.tensorcore lit -sv -j 8 --filter 'gpu/(matmul_tensor_core|matmul_warpgroup|sixteen_bit|matmul_generated|attention_fused)' "$work/test"
  step bench.matmul.bf16 bench matmul --dtype bf16 --shapes "$gpt2_products"
  step bench.matmul.bf16.sm_90a bench matmul --dtype bf16 --chip sm_90a --matmul generated --shapes "$gpt2_products"
  step bench.gpt2.bf16.cublas bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 \
    --dtype bf16 --repeat 20 --warmup 3
  step bench.gpt2.bf16.generated bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 \
    --dtype bf16 --matmul generated --repeat 20 --warmup 3 --profile --csv "$logs/bf16-generated-profile.csv"
  step bench.gpt2.bf16.generated.sm_90a bench --config 124M --weights synthetic --target gpu --modes fused \
    --seq 16,1024 --dtype bf16 --matmul generated --chip sm_90a --repeat 20 --warmup 3
fi

# HLO while loops with run-time trip counts: their GPU tests.
want loops && step lit.loops lit -sv -j 8 --filter 'gpu/(hlo_while|hlo_verify)' "$work/test"

# A prompt longer than the fused attention's 128 keys: attention's softmax
# is then a row reduction with the causal mask (reading only the keys up
# to each query), verified in both modes; then GPT-2 124M's row reductions
# at T=1024 timed one by one against a copy of their bytes.
if want rows; then
  long_prompt=$(printf 'The quick brown fox jumps over the lazy dog and %.0s' {1..20})
  step gpt2.verify.long-prompt.sublayer verify gpt2 --steps 3 --mode sublayer --prompt "$long_prompt" --target gpu \
    --weights synthetic --config 124M
  step gpt2.verify.long-prompt.fused verify gpt2 --steps 3 --mode fused --prompt "$long_prompt" --target gpu \
    --weights synthetic --config 124M
  step bench.rows bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 1024 --repeat 5 \
    --warmup 1 --profile --csv "$logs/rows-profile.csv"
fi

# Graph replay against direct launches: the same text, token for token (the
# bit-for-bit check is unit.gpt2_runner_gpu_test).
graphs_vs_direct() {
  for mode in sublayer fused; do
    generate "The quick brown fox jumps over the lazy dog and" --tokens 10 --mode $mode --target gpu |
      head -1 >"$work/graphs.$mode.txt" || return 1
    generate "The quick brown fox jumps over the lazy dog and" --tokens 10 --mode $mode --target gpu --no-graphs |
      head -1 >"$work/direct.$mode.txt" || return 1
    cmp "$work/graphs.$mode.txt" "$work/direct.$mode.txt" || return 1
    echo "$mode: $(cat "$work/graphs.$mode.txt")"
  done
}
want gpt2 && step gpt2.graphs-vs-direct graphs_vs_direct

# 4. Timings (GPU time from CUDA events, median).
timings() {
  for kernel in gelu softmax layernorm matmul attention; do
    trace "$kernel" | fuse | bufferize | outline | lower-nvvm -o "$work/$kernel.t.mlir" || return 1
  done
  verify all --target cpu --save "$work/t" >/dev/null || return 1
  run "$work/gelu.t.mlir" --input x=@"$work/t/gelu/x.npy" --repeat 200
  run "$work/softmax.t.mlir" --input x=@"$work/t/softmax/x.npy" --repeat 200
  run "$work/layernorm.t.mlir" --input x=@"$work/t/layernorm/x.npy" --input weight=@"$work/t/layernorm/weight.npy" \
    --input bias=@"$work/t/layernorm/bias.npy" --repeat 200
  run "$work/matmul.t.mlir" --input a=@"$work/t/matmul/a.npy" --input b=@"$work/t/matmul/b.npy" --repeat 200
  run "$work/attention.t.mlir" --input q=@"$work/t/attention/q.npy" --input k=@"$work/t/attention/k.npy" \
    --input v=@"$work/t/attention/v.npy" --repeat 200
}
# GPT-2 124M's decode steps and its T=16 forward, with kernels launched
# programmatically (each overlapping the end of the one before, sm_90) and
# one after another (MLPIPE_PROGRAMMATIC_LAUNCH=0), in one run.
if want decode; then
  step bench.decode bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 16 --repeat 10 --warmup 2
  step bench.decode.serial env MLPIPE_PROGRAMMATIC_LAUNCH=0 bench --config 124M --weights synthetic --target gpu \
    --modes sublayer,fused --seq 16 --repeat 10 --warmup 2
  step bench.decode.profile bench --config 124M --weights synthetic --target gpu --modes fused --seq 16 --repeat 5 \
    --warmup 1 --profile --csv "$logs/decode-profile.csv"
fi
if want timings; then
  step bench.kernels bench kernels
  step bench.kernels.bf16 bench kernels --dtype bf16
  step bench.gpt2 bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 16,64,256,1024 --repeat 10 --warmup 2
  step bench.gpt2.no-graphs bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 16,1024 --repeat 10 --warmup 2 --no-graphs
  # One row per kernel against the copy floor; the CSV comes back in $logs for
  # `make roofline CSV=.../profile.csv` on the build machine (no gnuplot here).
  step bench.profile bench --config 124M --weights synthetic --target gpu --modes sublayer,fused --seq 16,1024 --repeat 5 --warmup 1 --profile --csv "$logs/profile.csv"
  step bench.matmul bench matmul
  # The generated matmul kernels against cuBLAS (PyTorch, TF32 off) on the
  # issue's target products, defaults and a sweep of forced configurations.
  step timings.matmuls python3 bench/scripts/time-matmuls.py
  step bench.gpt2.generated bench --config 124M --weights synthetic --target gpu --matmul generated --modes sublayer,fused --seq 16,1024 --repeat 10 --warmup 2

fi

echo
cat "$logs/verify.kernels.sm_90.log" 2>/dev/null
echo
cat "$logs/verify.hlo.sm_90.log" 2>/dev/null
echo
tail -4 "$logs/gpt2.verify.sublayer.log" "$logs/gpt2.verify.fused.log" 2>/dev/null
echo
tail -6 "$logs/gpt2.generate.sublayer.log" "$logs/gpt2.generate.fused.log" 2>/dev/null
echo
cat "$logs/bench.kernels.log" "$logs/bench.kernels.bf16.log" 2>/dev/null
echo
tail -12 "$logs/verify.kernels.bf16.log" 2>/dev/null
echo
cat "$logs/bench.rows.log" 2>/dev/null
echo
cat "$logs/bench.gpt2.log" 2>/dev/null
echo
sed -n '/^forward against/,$p' "$logs/bench.gpt2.no-graphs.log" 2>/dev/null
echo
cat "$logs/bench.matmul.log" 2>/dev/null
echo
cat "$logs/bench.gpt2.generated.log" 2>/dev/null
echo
tail -3 "$logs"/gpt2.verify.{bf16,f16}.*.log 2>/dev/null
echo
cat "$logs/bench.gpt2.bf16.log" "$logs/bench.gpt2.f32.log" 2>/dev/null
echo
cat "$logs/bench.decode.log" "$logs/bench.decode.serial.log" 2>/dev/null
echo
grep -h "median" "$logs/timings.kernels.log" 2>/dev/null
echo
cat "$logs/timings.attention.log" 2>/dev/null
echo
cat "$logs/bench.matmul.bf16.log" "$logs/bench.gpt2.bf16.cublas.log" "$logs/bench.gpt2.bf16.generated.log" 2>/dev/null
echo
sed -n '/^product /,$p' "$logs/timings.matmuls.log" 2>/dev/null
echo
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
[[ -f $logs/profile.csv ]] && cp "$logs/profile.csv" "$final/"
rm -rf "$work"

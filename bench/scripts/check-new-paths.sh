#!/usr/bin/env bash
# The choices built but not yet timed on the GPU host, each against the
# default in the same run, in one call (one build: the choices are options):
#   1. bf16 products of 17 to 32 rows on the generated few-row tensor-core
#      tiles (--pass-option mlpipe-cublas-matmuls:skinny-rows=32) against
#      cuBLASLt: the products alone, then the batched steps of 32;
#   2. the tensor-core attention with the next tile's scores ahead of the
#      softmax (tc-scores-ahead=1), and the heads' merge written by the
#      attention kernel (on by default) against its own kernel
#      (fold-heads-merge=false);
#   3. cuBLASLt's candidates timed per problem (MLPIPE_GEMM_TUNING=1);
#   4. f32 products on the generated kernel's TF32 tensor-core form
#      (--precision tf32) against cuBLAS's TF32 and the exact f32 kernels;
#   5. layer norms computed in the few-row products after them
#      (mlpipe-emit-fusions:row-prologue-rows=32) and the last split of a
#      few-row tile adding the splits (matmul-last-split-completes=1): the
#      T=16 forward, the prefill of 10 tokens and the batched steps (with 1);
#   6. the decode step without its mask kernel (the attention computes the
#      mask from the position) and without ln_f's (the row-dot logits
#      compute it, wte's first round loaded before their wait), this build
#      against the build before it (packed as .device/builds/before by
#      compare-builds.sh --pack), with the GPU checks of that step;
#   7. the column sum's combining kernel loading a thread's partials at
#      once (kCombineLoadsAtOnce) against its loop (column-combine-at-once
#      =0, the build before), with 16 or 32 threads a column
#      (column-combine-rows) and 12 or 24 blocks an SM (column-blocks-per-sm);
#   8. batched decode steps of 48 and 64 sequences keeping two key splits
#      a row (the default since kBatchedStepMinSplits) against one
#      (batched-min-splits=1: the generic attention there), alternated;
#   9. the logits' product on three warpgroups (192-row tiles, fewer bytes
#      of A and B read per product) and c_proj's warpgroup tiles, against
#      cuBLASLt (matmuls);
#  10. the warpgroup form's C through shared memory (kWarpgroupStagedEpilogue,
#      the default) against each thread storing its accumulators where
#      they lie (staged-epilogue=0): GPU verifies, GPT-2's products beside
#      cuBLASLt and the generated bf16 forward, alternated (staged);
#  11. the logits on that form by the path rule on sm_90a
#      (kGeneratedWarpgroupMinColumns): the form against cuBLASLt by rows,
#      GPU verifies through the rule, the cuBLASLt forward with and without
#      it and on sm_90, alternated (logits);
# then the GPU tests of those paths (the snake order's error against
# float64 is in its sweep's lines). Prints as it goes, each part's start
# time in seconds; the summary goes to $OUT/check-new-paths.txt. PARTs
# (default: products attention tuning tf32 fewrows tests wide) keep a call
# within the host's limit:
#   source .device/setup.sh && bench/scripts/check-new-paths.sh [PART...]
#   PART: products attention tuning tf32 fewrows tests step colsum timeline defaults wide matmuls staged logits
# (STEP_ROUNDS and COLSUM_ROUNDS: rounds of those parts' alternations, 2)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host check-new-paths
report=$out/check-new-paths.txt
section() { echo "== $* ($SECONDS s)" | tee -a "$report"; }
step=(--config 124M --weights synthetic --target gpu --modes fused --seq 16 --repeat 10 --warmup 2 --dtype bf16)
generated=(--pass-option mlpipe-cublas-matmuls:skinny-rows=32)

rows=(--pass-option mlpipe-emit-fusions:row-prologue-rows=32)
splits=(--pass-option mlpipe-emit-fusions:matmul-last-split-completes=1)

products() {
  section "32-row bf16 products: cuBLASLt and generated (few-row tiles)"
  timeout 90 bench matmul --dtype bf16 --repeat 9 \
    --shapes 32x768x2304,32x768x768,32x768x3072,32x3072x768,24x768x3072 2>&1 | tail -16 | tee -a "$report"
  section "batched steps, products of 32 rows on cuBLASLt (default) and generated, alternated"
  for round in 1 2; do
    for choice in default generated; do
      flags=()
      [[ $choice == generated ]] && flags=("${generated[@]}")
      echo "-- $choice, round $round" | tee -a "$report"
      timeout 150 bench "${step[@]}" --decode-prompt 10 --batches 1,8,32,64 "${flags[@]}" 2>&1 |
        sed -n '/^Batched/,$p' | tee -a "$report"
    done
  done
}

wide() {
  section "batched steps of 48 and 64: two key splits a row (default) against one (generic attention), alternated"
  for round in 1 2; do
    for splits in 0 1; do
      echo "-- batched-min-splits=$splits, round $round" | tee -a "$report"
      timeout 150 bench "${step[@]}" --decode-prompt 10 --batches 1,48,64 \
        --pass-option "mlpipe-fused-attention:batched-min-splits=$splits" 2>&1 | sed -n '/^Batched/,$p' | tee -a "$report"
    done
  done
}

attention() {
  section "the next tile's scores ahead of the softmax (tc-scores-ahead=1), four and three stages, against the default"
  timeout 150 bench/scripts/sweep-attention.sh bf16 1024 '' 'tc-scores-ahead=1' 'tc-scores-ahead=1 tc-stages=3' \
    '' 'tc-scores-ahead=1' 2>&1 | tail -6 | tee -a "$report"
  timeout 90 bench/scripts/sweep-attention.sh bf16 512 '' 'tc-scores-ahead=1' 2>&1 | tail -3 | tee -a "$report"
  timeout 90 bench/scripts/sweep-attention.sh f16 333 '' 'tc-scores-ahead=1' 2>&1 | tail -3 | tee -a "$report"
  section "the heads' merge written by the attention kernel (default) against its own kernel, alternated"
  for round in 1 2; do
    for fold in true false; do
      echo "-- fold-heads-merge=$fold, round $round" | tee -a "$report"
      timeout 150 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 --repeat 10 \
        --warmup 2 --dtype bf16 --pass-option "mlpipe-fused-attention:fold-heads-merge=$fold" 2>&1 |
        grep -E '^fused' | tee -a "$report"
    done
  done
}

tuning() {
  section "cuBLASLt candidates timed (MLPIPE_GEMM_TUNING=1) against the heuristic's first, alternated"
  MLPIPE_GEMM_TUNING=1 MLPIPE_GEMM_TUNING_DEBUG=1 timeout 90 bench matmul --dtype bf16 --matmul cublas --repeat 5 \
    --shapes 1024x768x2304,1024x3072x768,1024x768x50257t 2>&1 | tail -12 | tee -a "$report"
  for round in 1 2; do
    for tuning in 0 1; do
      echo "-- MLPIPE_GEMM_TUNING=$tuning, round $round" | tee -a "$report"
      MLPIPE_GEMM_TUNING=$tuning timeout 120 bench --config 124M --weights synthetic --target gpu --modes fused \
        --seq 1024 --repeat 10 --warmup 2 --dtype bf16 2>&1 | grep -E '^fused' | tee -a "$report"
    done
  done
}

tf32() {
  section "f32 products under --precision tf32: cuBLAS TF32 and the generated TF32 form; then exact f32"
  timeout 120 bench matmul --precision tf32 --repeat 9 \
    --shapes 1024x768x2304,1024x768x3072,1024x3072x768,1024x768x768,4096x4096x4096 2>&1 | tail -16 | tee -a "$report"
  timeout 120 bench matmul --repeat 9 --shapes 1024x768x3072,4096x4096x4096 2>&1 | tail -7 | tee -a "$report"
  for precision in f32 tf32; do
    echo "-- f32 forward, T=1024, generated matmuls, --precision $precision" | tee -a "$report"
    timeout 150 bench --config 124M --weights synthetic --target gpu --modes fused --seq 1024 --repeat 5 --warmup 1 \
      --matmul generated --precision "$precision" 2>&1 | grep -E '^fused' | tee -a "$report"
  done
}

fewrows() {
  section "few-row products: layer norms in them (rows), splits completed in them (splits), alternated"
  for round in 1 2; do
    for choice in default rows splits rows+splits rows+splits+generated; do
      flags=()
      [[ $choice == *rows* ]] && flags+=("${rows[@]}")
      [[ $choice == *splits* ]] && flags+=("${splits[@]}")
      [[ $choice == *generated ]] && flags+=("${generated[@]}")
      echo "-- $choice, round $round" | tee -a "$report"
      timeout 150 bench "${step[@]}" --decode-prompt 10 --batches 1,8,32 "${flags[@]}" 2>&1 |
        grep -E '^(fused|KV-cache|Batched)' | tee -a "$report"
    done
  done
}

tests() {
  section "GPU tests of these paths"
  timeout 120 gemm_gpu_test 2>&1 | tail -1 | sed 's/^/gemm_gpu_test: /' | tee -a "$report"
  for shape in 32x768:768x3072:bias-gelu 25x3072:3072x768:bias-residual 31x768:768x2305:none; do
    IFS=: read -r a b epilogue <<<"$shape"
    timeout 60 verify matmul --dtype bf16 --target gpu --matmul generated --shape "$a" --shape "$b" \
      --epilogue "$epilogue" 2>&1 | tail -1 | sed "s/^/generated $a by $b $epilogue: /" | tee -a "$report"
  done
  timeout 300 verify gpt2 --steps 4 --dtype bf16 --mode fused --cache compare --target gpu --config 124M \
    "${rows[@]}" "${splits[@]}" 2>&1 | tail -1 | sed 's/^/verify gpt2, rows and splits in the products: /' |
    tee -a "$report"
  for shape in 129x65:65x257:bias-residual 1024x768:768x3072:bias-gelu; do
    IFS=: read -r a b epilogue <<<"$shape"
    timeout 60 verify matmul --target gpu --matmul generated --precision tf32 --shape "$a" --shape "$b" \
      --epilogue "$epilogue" 2>&1 | tail -1 | sed "s/^/generated tf32 $a by $b $epilogue: /" | tee -a "$report"
  done
}

step() {
  section "decode steps: this build (no mask kernel, ln_f in the logits) against the build before, alternated"
  timeout 300 bench/scripts/compare-builds.sh "${STEP_ROUNDS:-2}" --prompts 10,1000 -- --modes fused --batches 1 \
    --dtype bf16 2>&1 |
    grep -E '^(== |fused|KV-cache|Batched|  *[0-9])' | tee -a "$report"
  section "GPU checks of the step"
  for dtype in bf16 f32; do
    timeout 240 verify gpt2 --steps 4 --dtype "$dtype" --mode fused --cache compare --target gpu --config 124M 2>&1 |
      tail -1 | sed "s/^/verify gpt2 124M $dtype fused, cache compare: /" | tee -a "$report"
  done
  timeout 120 gpt2_runner_gpu_test 2>&1 | tail -1 | sed 's/^/gpt2_runner_gpu_test: /' | tee -a "$report"
}

timeline() {
  section "the chained bf16 step's kernels as it runs (step-timeline.sh fused 49 --dtype bf16)"
  timeout 150 bench/scripts/step-timeline.sh fused 49 --dtype bf16 2>&1 | tail -30 | tee -a "$report"
}

matmuls() {
  section "warpgroup products: the logits in three warpgroups (192-row tiles) and c_proj's tiles, against cuBLASLt"
  timeout 240 bench/scripts/sweep-matmul.sh bf16 1024x768x50257t 'chip=sm_90a' \
    'chip=sm_90a form=warpgroup block-tile=192,240,64' 'chip=sm_90a form=warpgroup block-tile=192,192,64' \
    'chip=sm_90a' 'chip=sm_90a form=warpgroup block-tile=192,240,64' 2>&1 | tail -6 | tee -a "$report"
  timeout 150 bench/scripts/sweep-matmul.sh bf16 1024x3072x768 'chip=sm_90a' \
    'chip=sm_90a form=warpgroup block-tile=64,48,64' 'chip=sm_90a form=warpgroup block-tile=64,64,64' \
    'chip=sm_90a form=warpgroup block-tile=64,80,64' 'chip=sm_90a form=warpgroup block-tile=128,64,64' \
    'chip=sm_90a form=warpgroup block-tile=64,96,64 stages=4' 'chip=sm_90a' 2>&1 | tail -8 | tee -a "$report"
  section "c_proj with K split across the grid (warpgroup split-k), against cuBLASLt"
  timeout 200 bench/scripts/sweep-matmul.sh bf16 1024x3072x768 'chip=sm_90a' \
    'chip=sm_90a form=warpgroup block-tile=128,96,64 split-k=2' 'chip=sm_90a form=warpgroup block-tile=128,192,64 split-k=4' \
    'chip=sm_90a form=warpgroup block-tile=128,128,64 split-k=3' 'chip=sm_90a form=warpgroup block-tile=64,96,64 split-k=2' \
    'chip=sm_90a form=warpgroup block-tile=128,256,64 split-k=4' 'chip=sm_90a form=warpgroup block-tile=128,192,64 split-k=2' \
    'chip=sm_90a' 2>&1 | tail -9 | tee -a "$report"
}

# The bf16 forward at T=16 and T=1024 with FLAGS, under a line naming it.
bf16_forward() {
  echo "-- $1" | tee -a "$report"
  timeout 150 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 --repeat 10 \
    --warmup 2 --dtype bf16 "${@:2}" 2>&1 | grep -E '^fused' | head -2 | tee -a "$report"
}

staged() {
  section "GPU verifies of the warpgroup form, C through shared memory (sm_90a, generated)"
  for shape in 333x200:200x517:bias-gelu:bf16 300x300:300x512:bias-residual:bf16 1024x768:768x3072:bias-gelu:bf16 \
    65x768:2001x768t:none:bf16 70x136:136x45:none:f16 129x64:64x1000:bias:f16; do
    IFS=: read -r a b epilogue dtype <<<"$shape"
    transpose=()
    [[ $b == *t ]] && b=${b%t} && transpose=(--transpose-b)
    timeout 90 verify matmul --dtype "$dtype" --target gpu --matmul generated --chip sm_90a --shape "$a" \
      --shape "$b" "${transpose[@]}" --epilogue "$epilogue" 2>&1 | tail -1 |
      sed "s/^/$dtype $a by $b${transpose[*]:+ (B transposed)} $epilogue: /" | tee -a "$report"
  done
  section "GPT-2's products at T=1024: C through shared memory (default) against stores from the accumulators, with cuBLASLt"
  for shape in 1024x768x50257t 1024x768x3072 1024x3072x768 1024x768x768; do
    timeout 200 bench/scripts/sweep-matmul.sh bf16 "$shape" 'chip=sm_90a' 'chip=sm_90a staged-epilogue=0' \
      'chip=sm_90a' 'chip=sm_90a staged-epilogue=0' 2>&1 | tail -5 | tee -a "$report"
  done
  section "c_attn's tiles, C through shared memory"
  timeout 240 bench/scripts/sweep-matmul.sh bf16 1024x768x2304 'chip=sm_90a' 'chip=sm_90a staged-epilogue=0' \
    'chip=sm_90a form=warpgroup block-tile=128,192,64' 'chip=sm_90a form=warpgroup block-tile=128,128,64' \
    'chip=sm_90a form=warpgroup block-tile=64,144,64' 'chip=sm_90a form=warpgroup block-tile=64,192,64' \
    'chip=sm_90a form=warpgroup block-tile=128,96,64' 'chip=sm_90a form=warpgroup block-tile=64,96,64' \
    'chip=sm_90a' 2>&1 | tail -10 | tee -a "$report"
  section "the bf16 forward: generated on sm_90a (C through shared memory, or not), cuBLASLt on sm_90a and sm_90, alternated"
  for round in 1 2; do
    for choice in generated-staged generated-direct cublas-sm_90a cublas-sm_90 ${STAGED_EXTRA:-}; do
      flags=(--chip sm_90a)
      case $choice in
      generated-staged) flags+=(--matmul generated) ;;
      generated-direct) flags+=(--matmul generated --pass-option mlpipe-emit-fusions:matmul-staged-epilogue=0) ;;
      cublas-sm_90) flags=(--chip sm_90) ;;
      cublas-sm_90a-no-rule) flags+=(--pass-option mlpipe-cublas-matmuls:warpgroup-min-columns=0) ;;
      esac
      bf16_forward "$choice, round $round" "${flags[@]}"
    done
  done
}

logits() {
  section "the logits' product on the warpgroup form (sm_90a) against cuBLASLt, by rows"
  for m in 64 128 256 512; do
    timeout 100 bench/scripts/sweep-matmul.sh bf16 "${m}x768x50257t" 'chip=sm_90a' 2>&1 | tail -2 | tee -a "$report"
  done
  section "GPU verifies through the rule (sm_90a, --matmul cublas)"
  timeout 150 verify matmul --dtype bf16 --target gpu --chip sm_90a --shape 300x768 --shape 50257x768 --transpose-b \
    2>&1 | tail -1 | sed 's/^/bf16 300x768 by 50257x768 (B transposed): /' | tee -a "$report"
  local prompt
  prompt=$(python3 -c "print(' '.join(['the quick brown fox jumps over the lazy dog'] * 34))")
  timeout 240 verify gpt2 --config tiny --dtype bf16 --chip sm_90a --target gpu --mode fused --cache compare \
    --steps 3 --prompt "$prompt" 2>&1 | tail -1 | sed 's/^/verify gpt2 tiny bf16, a 300-token prompt: /' |
    tee -a "$report"
  section "the bf16 forward on cuBLASLt: sm_90a (the logits generated by the rule), sm_90a without it, sm_90, alternated"
  for round in 1 2; do
    for choice in rule no-rule sm_90; do
      flags=(--chip sm_90a)
      [[ $choice == no-rule ]] && flags+=(--pass-option mlpipe-cublas-matmuls:warpgroup-min-columns=0)
      [[ $choice == sm_90 ]] && flags=(--chip sm_90)
      bf16_forward "$choice, round $round" "${flags[@]}"
    done
  done
}

colsum() {
  section "bf16 column sum: the combining kernel's loads at once (default) against its loop (the build before), threads a column, blocks an SM, alternated"
  for round in $(seq "${COLSUM_ROUNDS:-2}"); do
    for choice in "column-combine-at-once=-1" "column-combine-at-once=0" "column-combine-rows=16" \
      "column-combine-rows=32" "column-blocks-per-sm=12" "column-blocks-per-sm=24" \
      "column-combine-rows=32 column-blocks-per-sm=24"; do
      echo "-- $choice, round $round" | tee -a "$report"
      timeout 90 bench --pass-option "mlpipe-emit-fusions:$choice" kernels colsum --dtype bf16 2>&1 |
        grep -E '^(colsum|pass option)' | tee -a "$report"
    done
    for choice in "column-combine-at-once=-1" "column-combine-at-once=0"; do
      echo "-- f32, $choice, round $round" | tee -a "$report"
      timeout 90 bench --pass-option "mlpipe-emit-fusions:$choice" kernels colsum 2>&1 |
        grep -E '^(colsum|pass option)' | tee -a "$report"
    done
  done
}

# The defaults as they now are: the GPU tests of decoding, verify gpt2 on
# the GPU, the figures BENCHMARKS.md reports, the bf16 column sum, and the
# chained step's kernels as it runs.
defaults() {
  section "GPU tests of decoding (gpt2_runner_gpu_test)"
  timeout 120 gpt2_runner_gpu_test 2>&1 | grep -v '^$' | tail -4 | tee -a "$report"
  section "verify gpt2 124M bf16, fused, the cache compared"
  timeout 150 verify gpt2 --steps 3 --dtype bf16 --mode fused --cache compare --target gpu --config 124M 2>&1 |
    tail -4 | tee -a "$report"
  section "GPT-2 124M bf16: forward at T=16 and 1024, decode steps, batches"
  timeout 150 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 --repeat 10 --warmup 2 \
    --dtype bf16 --decode-prompt 10 --batches 1,32 2>&1 | grep -E '^(fused|KV-cache|Batched|mode)' |
    tee -a "$report"
  section "bf16 column sum (bench kernels colsum)"
  timeout 40 bench kernels colsum --dtype bf16 2>&1 | grep -E '^colsum' | tee -a "$report"
  section "verify gpt2 124M f32, fused, the cache compared"
  timeout 150 verify gpt2 --steps 4 --mode fused --cache compare --target gpu --config 124M 2>&1 | tail -4 |
    tee -a "$report"
}

parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(products attention tuning tf32 fewrows tests wide)
for part in "${parts[@]}"; do
  case $part in
  products | attention | tuning | tf32 | fewrows | tests | step | colsum | timeline | defaults | wide | matmuls | staged | logits) "$part" ;;
  *)
    echo "check-new-paths: no part '$part' (products attention tuning tf32 fewrows tests step colsum timeline defaults wide matmuls staged logits)" >&2
    exit 2
    ;;
  esac
done
section finished

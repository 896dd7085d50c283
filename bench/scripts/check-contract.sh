#!/usr/bin/env bash
# f32 multiplies and adds contracted into fused multiply-adds in kernels
# that store only 16-bit floats (mlpipe-sixteen-bit-fast-math's
# contract=true, off by default) against the same kernels without,
# alternated in one run: the bf16 unit kernels, the tensor-core attention
# at T=1024, and GPT-2 124M's bf16 forward and decode step; then the GPU
# checks of those kernels. On the GPU host:
#   source .device/setup.sh && bench/scripts/check-contract.sh [ROUNDS]   (default 2)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host check-contract
rounds=${1:-2}
work=$(mktemp -d)
verify attention --shape 1024x768 --heads 12 --dtype bf16 --target cpu --save "$work/data" >/dev/null
inputs=(--input q=@"$work/data/attention/q.npy" --input k=@"$work/data/attention/k.npy"
  --input v=@"$work/data/attention/v.npy")
trace attention --shape 1024x768 --heads 12 --dtype bf16 | fuse | bufferize | outline >"$work/attention.mlir"
for contract in true false; do
  lower-nvvm --pass-option "mlpipe-sixteen-bit-fast-math:contract=$contract" "$work/attention.mlir" \
    -o "$work/attention-$contract.mlir"
done
for round in $(seq "$rounds"); do
  for contract in true false; do
    option=(--pass-option "mlpipe-sixteen-bit-fast-math:contract=$contract")
    echo "-- contract=$contract, round $round"
    timeout 120 bench "${option[@]}" kernels gelu softmax layernorm colsum --dtype bf16 2>&1 | grep -E '^(gelu|softmax|layernorm|colsum)'
    printf 'attention bf16 T=1024: '
    run "$work/attention-$contract.mlir" "${inputs[@]}" --repeat 200 | grep -i median
    timeout 150 bench --config 124M --weights synthetic --target gpu --modes fused --seq 16,1024 --repeat 10 \
      --warmup 2 --dtype bf16 --decode-prompt 10 --batches 1 "${option[@]}" 2>&1 | grep -E '^fused' | head -4
  done
done
echo "-- GPU checks, contract on"
on=(--pass-option mlpipe-sixteen-bit-fast-math:contract=true)
for kernel in gelu softmax layernorm; do
  timeout 60 verify "$kernel" --dtype bf16 --target gpu "${on[@]}" 2>&1 | tail -1 | sed "s/^/verify $kernel bf16: /"
done
timeout 60 verify attention --shape 1024x768 --heads 12 --dtype bf16 --target gpu "${on[@]}" 2>&1 | tail -1 | sed 's/^/verify attention bf16: /'
timeout 60 verify attention --shape 77x192 --heads 3 --dtype f16 --target gpu "${on[@]}" 2>&1 | tail -1 | sed 's/^/verify attention f16 77: /'
timeout 200 verify gpt2 --steps 3 --dtype bf16 --mode fused --cache compare --target gpu --config 124M "${on[@]}" 2>&1 | tail -1 |
  sed 's/^/verify gpt2 124M bf16: /'

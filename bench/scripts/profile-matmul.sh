#!/usr/bin/env bash
# Why the generated matmul takes what it takes, from the profiler: one
# launch of the generated kernel for A (M×K) times B (K×N) under Nsight
# Compute with the sections that say where its warps wait, and its SASS.
# On the GPU host:
#   source .device/setup.sh && bench/scripts/profile-matmul.sh [DTYPE [MxKxN [OPTIONS]]]
# (default: bf16 1024x768x3072, GPT-2's c_fc at T=1024). OPTIONS: options of
# mlpipe-generated-matmuls for the kernel profiled (e.g. 'async-copy=false'
# or 'block-tile=64,128,32'); a word chip=CHIP compiles for CHIP (sm_90a:
# the warpgroup form).
# Output: the report on stdout; the SASS in $OUT/matmul.sass (or
# /tmp/mlpipe-profile-matmul).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host profile-matmul
dtype=${1:-bf16} shape=${2:-1024x768x3072} options=${3:-}
IFS=x read -r m k n <<<"$shape"
work=$(mktemp -d)
# A matmul with an epilogue (a 16-bit C: f32 rounded) is a matmul fusion,
# emitted by mlpipe-emit-fusions: its block-tile, warp-tile and stages go there too.
fused="" passOptions="" chip=sm_90
for word in $options; do
  if [[ $word == chip=* ]]; then
    chip=${word#chip=}
    continue
  fi
  passOptions+=" $word"
  if [[ $word == block-tile=* || $word == warp-tile=* || $word == stages=* || $word == form=* || $word == split-k=* ||
    $word == staged-epilogue=* ]]; then
    fused+=" matmul-$word"
  fi
done
sed -e "s/mlpipe-generated-matmuls{chip={chip} precision={precision}}/mlpipe-generated-matmuls{chip={chip} precision={precision}$passOptions}/" \
  -e "s/mlpipe-emit-fusions{chip={chip} precision={precision}}/mlpipe-emit-fusions{chip={chip} precision={precision}$fused}/" \
  pipelines/outline.pipeline >"$work/outline.pipeline"
verify matmul --shape "${m}x$k" --shape "${k}x$n" --dtype "$dtype" --target cpu --save "$work/data" >/dev/null
trace matmul --shape "${m}x$k" --shape "${k}x$n" --dtype "$dtype" | fuse | bufferize |
  outline --chip "$chip" --matmul generated --pipeline "$work/outline.pipeline" >"$work/outlined.mlir"
lower-nvvm --chip "$chip" "$work/outlined.mlir" -o "$work/matmul.mlir"
lower-nvvm --chip "$chip" --format isa "$work/outlined.mlir" -o "$work/matmul.ptx.mlir"
ncu --clock-control none -k regex:matmul -c 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
  --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
  run "$work/matmul.mlir" --input a=@"$work/data/matmul/a.npy" --input b=@"$work/data/matmul/b.npy" --no-graphs 2>&1 |
  grep -v '^==PROF==' || true
# ptxas for this GPU (an architecture-specific chip such as sm_90a as given).
[[ $chip == *a ]] || chip=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
python3 - "$work/matmul.ptx.mlir" "$work/matmul.ptx" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
found = re.search(r'gpu\.binary @\w*matmul\w*.*?assembly = "((?:[^"\\]|\\.)*)"', text)
if not found:
    sys.exit("no matmul kernel's PTX in the module")
ptx = re.sub(r'\\([0-9A-Fa-f]{2})', lambda m: chr(int(m.group(1), 16)), found.group(1)).replace('\\\\', '\\')
open(sys.argv[2], "w").write(ptx)
PY
ptxas -arch="$chip" -v "$work/matmul.ptx" -o "$work/matmul.cubin"
cuobjdump -sass "$work/matmul.cubin" >"$out/matmul.sass"
cp "$work/matmul.ptx" "$out/matmul.ptx"
echo "SASS: $(grep -c '^        /\*[0-9a-f]*\*/' "$out/matmul.sass") instructions in $out/matmul.sass"

#!/usr/bin/env bash
# Why the tensor-core attention kernel takes what it takes, from the
# profiler: one launch of the attention unit kernel at T (default 1024; 12
# heads of 64, causal) under Nsight Compute with the sections that say
# where its warps wait (speed of light, occupancy, scheduler, warp states,
# instruction mix, source counters), and its SASS. On the GPU host:
#   source .device/setup.sh && bench/scripts/profile-attention.sh [DTYPE [T [OPTIONS]]]   (default: bf16 1024)
# OPTIONS: options of the fused attention pass for the kernel profiled
# (e.g. 'tc-stages=2').
# Output: the report on stdout and in $OUT/attention-profile.txt, the SASS
# in $OUT/attention.sass, the source counters per SASS instruction in
# $OUT/attention-source.csv (or /tmp/mlpipe-profile-attention).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host profile-attention
dtype=${1:-bf16} T=${2:-1024} options=${3:-} heads=12 width=768
work=$(mktemp -d)
sed "s/mlpipe-fused-attention{chip={chip}}/mlpipe-fused-attention{chip={chip} $options}/" pipelines/outline.pipeline \
  >"$work/outline.pipeline"
verify attention --shape "${T}x$width" --heads $heads --dtype "$dtype" --target cpu --save "$work/data" >/dev/null
qkv=(--input q=@"$work/data/attention/q.npy" --input k=@"$work/data/attention/k.npy"
  --input v=@"$work/data/attention/v.npy")
trace attention --shape "${T}x$width" --heads $heads --dtype "$dtype" | fuse | bufferize |
  outline --pipeline "$work/outline.pipeline" >"$work/outlined.mlir"
lower-nvvm "$work/outlined.mlir" -o "$work/attention.mlir"
lower-nvvm --format isa "$work/outlined.mlir" -o "$work/attention.ptx.mlir"
ncu --clock-control none -k regex:attention -c 1 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
  --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section SourceCounters \
  run "$work/attention.mlir" "${qkv[@]}" --no-graphs 2>&1 | grep -v '^==PROF==' | tee "$out/attention-profile.txt" || true
# Per SASS instruction: where the excessive sectors and shared wavefronts,
# and the stalls, are (the source counters' table).
ncu --clock-control none -k regex:attention -c 1 --section SourceCounters --page source --print-source sass --csv \
  run "$work/attention.mlir" "${qkv[@]}" --no-graphs 2>/dev/null | grep -v '^==PROF==' >"$out/attention-source.csv" || true
# The SASS of the kernel: its PTX (the isa module's assembly string)
# assembled by ptxas for this chip, disassembled.
chip=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
python3 - "$work/attention.ptx.mlir" "$work/attention.ptx" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
found = re.search(r'gpu\.binary @\w*attention_attention\w*.*?assembly = "((?:[^"\\]|\\.)*)"', text)
if not found:
    sys.exit("no attention kernel's PTX in the module")
ptx = re.sub(r'\\([0-9A-Fa-f]{2})', lambda m: chr(int(m.group(1), 16)), found.group(1)).replace('\\\\', '\\')
open(sys.argv[2], "w").write(ptx)
PY
ptxas -arch="$chip" -v "$work/attention.ptx" -o "$work/attention.cubin"
cuobjdump -sass "$work/attention.cubin" >"$out/attention.sass"
echo "SASS: $(grep -c '^        /\*[0-9a-f]*\*/' "$out/attention.sass") instructions in $out/attention.sass"

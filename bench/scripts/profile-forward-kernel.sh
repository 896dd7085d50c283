#!/usr/bin/env bash
# One kernel of a GPT-2 124M forward under Nsight Compute, as the forward
# runs it (its operands where the forward leaves them; ncu runs it alone,
# so programmatic launch does not overlap it with its neighbours): where
# its warps wait, its memory traffic and its occupancy, for this build and
# for every build packed by compare-builds.sh, one after the other.
# On the GPU host (after ci/pack-device.sh; source .device/setup.sh first):
#   bench/scripts/profile-forward-kernel.sh KERNEL [SEQ] [DTYPE] [SKIP]
# KERNEL is the kernel's name as forward-timeline.sh lists it (e.g.
# mlp_c_proj_matmul); SKIP launches of it are skipped first (default 20:
# past the compile and warm-up). Output: the reports on stdout, in
# $OUT (or /tmp/mlpipe-profile-forward-kernel).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host profile-forward-kernel
kernel=${1:?which kernel (its name in forward-timeline.sh)}
seq=${2:-16}
dtype=${3:-bf16}
skip=${4:-20}
profile() { # NAME BENCH [LIBRARY DIR]
  local name=$1 bench=$2 libraries=${3:-}
  echo "== $name: $kernel, T=$seq, $dtype"
  MLPIPE_CACHE_DIR=$(mktemp -d) LD_LIBRARY_PATH=${libraries:+$libraries:}${LD_LIBRARY_PATH:-} \
    ncu --clock-control none -k "regex:^${kernel}\$" --launch-skip "$skip" -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    "$bench" --config 124M --weights synthetic --target gpu --modes fused --seq "$seq" --dtype "$dtype" \
    --repeat 3 --warmup 1 --batches 1 2>&1 | grep -v '^==PROF==' | tee "$out/$name-$kernel.txt" |
    grep -E 'Duration|Throughput|Registers|Shared Memory|Achieved Occupancy|Theoretical Occupancy|Issued Ipc|No Eligible|Warp Cycles Per Issued|Block Limit|L2 Hit|Mem Busy|Max Bandwidth|Stall|OPT|est' || true
}
profile this "$(command -v bench)"
for dir in .device/builds/*/; do
  [[ -d $dir ]] && profile "$(basename "$dir")" "$dir/bin/bench" "$root/$dir/lib"
done

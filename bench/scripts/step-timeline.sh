#!/usr/bin/env bash
# When each kernel of a GPT-2 124M decode step starts and ends on the GPU,
# replayed as a CUDA graph with programmatic launch, as the step runs in
# `generate` (not each kernel alone): per kernel, how long after the one
# before it ended it started (negative: it was resident early) and ended.
# The second is what the kernel adds to the step. On the GPU host (after
# ci/pack-device.sh; source .device/setup.sh first):
#   bench/scripts/step-timeline.sh [MODE] [TOKENS] [FLAG...]
#     (fused or sublayer; 49 tokens; flags for generate, e.g. --no-graphs, or
#      --prompts FILE for a batched step)
# generate chains its greedy steps in graphs of 16 on the GPU, each graph
# run directly on its first use and captured on its second: the default
# 49 tokens (a prefill, then three graphs of 16 steps) ends on a replayed
# graph's step; a first graph, or a last one shorter than 16 steps, runs
# its steps as direct launches.
# Builds bench/scripts/kernel-timeline.cpp against the toolkit's CUPTI.
# Output in $OUT (or /tmp/mlpipe-step-timeline): the CSV of every kernel and
# the table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host step-timeline
mode=${1:-fused}
tokens=${2:-49}
shift $(($# < 2 ? $# : 2))
flags=("$@")
cuda=${CUDA_HOME:-/usr/local/cuda}
# CUPTI sits beside the runtime (CUDA 13) or under extras/CUPTI (older).
cupti=(-I"$cuda/include" -I"$cuda/extras/CUPTI/include" -L"$cuda/lib64" -L"$cuda/extras/CUPTI/lib64"
  -Wl,-rpath,"$cuda/lib64" -Wl,-rpath,"$cuda/extras/CUPTI/lib64")
library=$out/libkernel-timeline.so
rm -f "$library"
for record in "CUpti_ActivityKernel10 CUpti_ActivityMemcpy6" "CUpti_ActivityKernel9 CUpti_ActivityMemcpy5" \
  "CUpti_ActivityKernel8 CUpti_ActivityMemcpy5"; do
  set -- $record
  if g++ -shared -fPIC -O2 -DKERNEL_RECORD=$1 -DMEMCPY_RECORD=$2 bench/scripts/kernel-timeline.cpp "${cupti[@]}" \
    -lcupti -o "$library" 2>>"$out/build.log"; then
    break
  fi
done
[[ -f $library ]] || { cat "$out/build.log" >&2; exit 1; }
# A batched step (flags with --prompts FILE) takes its prompts from the file.
prompt=("Hello there")
[[ " ${flags[*]-} " == *" --prompts "* ]] && prompt=()
generate=(generate ${prompt[@]+"${prompt[@]}"} --tokens "$tokens" --mode "$mode" --target gpu --config 124M --weights synthetic ${flags[@]+"${flags[@]}"})
"${generate[@]}" >/dev/null # compiles outside the trace
MLPIPE_TIMELINE_CSV=$out/kernels-$mode.csv CUDA_INJECTION64_PATH=$library "${generate[@]}" >/dev/null
python3 - "$out/kernels-$mode.csv" <<'PY' | tee "$out/step-timeline-$mode.txt"
import collections, csv, re, sys

rows = list(csv.DictReader(open(sys.argv[1])))
kernels = sorted(((int(r["start_ns"]), int(r["end_ns"]), r["grid"], r["block"], r["name"]) for r in rows))
# A decode step's kernels start with the embedding; the last one is the
# last step. Its copies: those up to the embedding since the kernel before
# it, and those after its last kernel.
start = max(i for i, k in enumerate(kernels) if k[4].startswith("embed"))
while start > 0 and kernels[start - 1][4].startswith("copy"):
    start -= 1
step = kernels[start:]
launched = [k for k in step if not k[4].startswith("copy")]
print("the last decode step: %d kernels, %.1f us from the first kernel's start to the last one's end; "
      "%.1f us from its first copy's start to its last copy's end"
      % (len(launched), (max(k[1] for k in launched) - launched[0][0]) / 1000, (step[-1][1] - step[0][0]) / 1000))
print("%-40s %6s %5s %9s %9s %9s" % ("kernel", "grid", "block", "start us", "busy us", "adds us"))
per = collections.OrderedDict()
previous_end = step[0][0]
for begin, end, grid, block, name in step:
    key = re.sub(r"_\d+$", "", name.split("(")[0])[:40]
    adds = (end - previous_end) / 1000
    print("%-40s %6s %5s %9.2f %9.2f %9.2f" % (key, grid, block, (begin - previous_end) / 1000,
                                            (end - begin) / 1000, adds))
    calls, total_adds, total_busy = per.get(key, (0, 0.0, 0.0))
    per[key] = (calls + 1, total_adds + adds, total_busy + (end - begin) / 1000)
    previous_end = max(previous_end, end)
print()
print("%-40s %5s %12s %12s" % ("kernel", "calls", "adds us each", "busy us each"))
for key, (calls, adds, busy) in per.items():
    print("%-40s %5d %12.2f %12.2f" % (key, calls, adds / calls, busy / calls))
PY

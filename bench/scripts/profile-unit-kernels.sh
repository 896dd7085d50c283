#!/usr/bin/env bash
# Why a unit kernel misses its copy floor, from the profiler rather than a
# guess: each of bench kernels' launches (and its copy floors) under Nsight
# Compute, with the DRAM throughput, achieved occupancy, registers and the
# bytes each kernel moves. On the GPU host:
#   source .device/setup.sh && bench/scripts/profile-unit-kernels.sh [DTYPE...]   (default: f32 bf16)
# Output: $OUT/profile-DTYPE.csv (or /tmp/mlpipe-profile-unit-kernels) and a
# table per dtype on stdout.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host profile-unit-kernels
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size
metrics+=,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed_op_global_st.sum
for dtype in "${@:-f32 bf16}"; do
  for d in $dtype; do
    csv=$out/profile-$d.csv
    # One launch of each kernel after one warm-up, launched directly (no
    # graph), so each launch is profiled on its own.
    ncu --clock-control none --csv --metrics "$metrics" \
      bench kernels gelu softmax layernorm transpose colsum --dtype "$d" --repeat 1 --warmup 1 --no-graphs >"$csv" 2>/dev/null || true
    echo "== $d: kernel, metric, value (the last launch of each kernel)"
    python3 - "$csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no profile rows")
head = rows[0]
name, metric, value = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
last = {}
for r in rows[1:]:
    last.setdefault(r[name], {})[r[metric]] = r[value]
for kernel, values in last.items():
    print(kernel[:40].ljust(40), " ".join(f"{k.split('__')[1][:28]}={v}" for k, v in sorted(values.items())))
PY
  done
done

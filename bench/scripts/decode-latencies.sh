#!/usr/bin/env bash
# Each kernel of a GPT-2 124M decode step alone, on the GPU host (after
# ci/pack-device.sh; source .device/setup.sh first): `generate` runs a
# prefill and two decode steps with kernels launched one by one, under ncu,
# once with L2 flushed before every kernel and once not. The last step's
# kernels are summed per kernel: the latency each adds to a chain of
# dependent kernels, and how much of it is reading from DRAM rather than L2.
#   bench/scripts/decode-latencies.sh [MODE]      (MODE: fused, the default, or sublayer)
# Output in $OUT (or /tmp/mlpipe-decode-latencies): the ncu CSVs and the table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host decode-latencies
mode=${1:-fused}
generate=(generate "Hello there" --tokens 3 --mode "$mode" --target gpu --config 124M --weights synthetic --no-graphs)
"${generate[@]}" >/dev/null # compiles outside the profile
for flush in all none; do
  ncu --clock-control none --cache-control $flush --metrics gpu__time_duration.sum --csv "${generate[@]}" \
    >"$out/decode-$mode-l2-$flush.csv"
done
python3 - "$out/decode-$mode-l2-all.csv" "$out/decode-$mode-l2-none.csv" <<'PY' | tee "$out/decode-$mode-latencies.txt"
import collections, csv, re, sys

def last_step(path):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    header, rows = rows[0], rows[1:]
    name, value = header.index("Kernel Name"), header.index("Metric Value")
    kernels = [(r[name], float(r[value].replace(",", ""))) for r in rows]
    # Every step starts with the embedding; the last one is the last step.
    start = max(i for i, (k, _) in enumerate(kernels) if k.startswith("embed"))
    per = collections.OrderedDict()
    for kernel, ns in kernels[start:]:
        key = re.sub(r"_\d+$", "", kernel.split("(")[0])[:36]
        calls, total = per.get(key, (0, 0.0))
        per[key] = (calls + 1, total + ns / 1000)
    return per

cold, warm = last_step(sys.argv[1]), last_step(sys.argv[2])
print(f"{'kernel':36s} {'calls':>5s} {'us each, L2 flushed':>20s} {'us each, L2 as left':>20s}")
for key, (calls, total) in cold.items():
    print(f"{key:36s} {calls:5d} {total / calls:20.2f} {warm[key][1] / warm[key][0]:20.2f}")
print(f"{'one step, the kernels summed':36s} {sum(c for c, _ in cold.values()):5d} "
      f"{sum(t for _, t in cold.values()):20.1f} {sum(t for _, t in warm.values()):20.1f}")
PY

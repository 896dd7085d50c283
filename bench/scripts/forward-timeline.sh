#!/usr/bin/env bash
# When each kernel of a GPT-2 124M forward starts and ends on the GPU, the
# forward replayed as a CUDA graph as `bench` times it: the forward's span
# on the GPU (its first kernel's start to its last one's end), what each
# kernel adds to it (from the end of the one before), and the gap the GPU
# waits between forwards (bench's forward time also holds the token upload,
# the graph launch and the logits' copy back). On the GPU host (after
# ci/pack-device.sh; source .device/setup.sh first):
#   bench/scripts/forward-timeline.sh [SEQ] [DTYPE] [MODE] [-- BENCH ARGS]    (16 f32 fused)
# (BENCH ARGS go to bench as well, e.g. -- --matmul generated --chip sm_90a.)
# Builds bench/scripts/kernel-timeline.cpp against the toolkit's CUPTI.
# Output in $OUT (or /tmp/mlpipe-forward-timeline): the CSV of every kernel
# and copy, and the table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
on_the_gpu_host forward-timeline
seq=16 dtype=f32 mode=fused
for name in seq dtype mode; do
  [[ $# -gt 0 && $1 != -- ]] || break
  printf -v "$name" %s "$1"
  shift
done
[[ ${1:-} == -- ]] && shift
extra=("$@")
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
bench=(bench --config 124M --weights synthetic --target gpu --modes "$mode" --seq "$seq" --dtype "$dtype"
  --repeat 5 --warmup 1 "${extra[@]}")
# Compiles outside the trace; its report says how many kernels a forward is.
"${bench[@]}" | tee "$out/bench-$mode-$seq-$dtype.txt"
launches=$(awk -v mode="$mode" '$1 == mode && $2 + 0 > 0 && NF >= 6 { print $6; exit }' "$out/bench-$mode-$seq-$dtype.txt")
csv=$out/kernels-$mode-$seq-$dtype.csv
MLPIPE_TIMELINE_CSV=$csv CUDA_INJECTION64_PATH=$library "${bench[@]}" >/dev/null
python3 - "$csv" "$launches" <<'PY' | tee "$out/forward-timeline-$mode-$seq-$dtype.txt"
import collections, csv, re, sys

rows = list(csv.DictReader(open(sys.argv[1])))
launches = int(sys.argv[2])
events = sorted((int(r["start_ns"]), int(r["end_ns"]), r["grid"], r["block"], r["name"]) for r in rows)
kernels = [e for e in events if not e[4].startswith("copy")]
# A forward starts with the embedding; the timed ones are the runs of
# exactly the forward's kernels between two embeddings.
starts = [i for i, k in enumerate(kernels) if k[4].startswith("embed")] + [len(kernels)]
forwards = [kernels[a:b] for a, b in zip(starts, starts[1:]) if b - a == launches]
if not forwards:
    sys.exit("forward-timeline: no run of %d kernels between two embeddings" % launches)
span = lambda f: (f[-1][1] - f[0][0]) / 1000
forwards.sort(key=span)
spans = [span(f) for f in forwards]
forward = forwards[len(forwards) // 2]
# Between this forward's last kernel and the next kernel: the copies.
after = [e for e in events if forward[-1][1] <= e[0] and e[4].startswith("copy")][:2]
nextKernel = min((k[0] for k in kernels if k[0] > forward[-1][1]), default=None)
print("%d forwards of %d kernels; GPU span median %.1f us (min %.1f, max %.1f)"
      % (len(forwards), launches, spans[len(spans) // 2], spans[0], spans[-1]))
for e in after:
    print("after it: %s, %.1f us, starting %.1f us after its last kernel"
          % (e[4], (e[1] - e[0]) / 1000, (e[0] - forward[-1][1]) / 1000))
if nextKernel is not None:
    print("the GPU's next kernel starts %.1f us after this forward's last one ends" % ((nextKernel - forward[-1][1]) / 1000))
per = collections.OrderedDict()
previous_end = forward[0][0]
for begin, end, grid, block, name in forward:
    key = re.sub(r"_\d+$", "", name.split("(")[0])[:48]
    calls, adds, busy, shapes = per.get(key, (0, 0.0, 0.0, set()))
    shapes.add("%sx%s" % (grid, block))
    per[key] = (calls + 1, adds + (end - previous_end) / 1000, busy + (end - begin) / 1000, shapes)
    previous_end = max(previous_end, end)
print("%-48s %5s %9s %9s  %s" % ("kernel", "calls", "adds us", "busy us", "grid x block"))
for key, (calls, adds, busy, shapes) in sorted(per.items(), key=lambda kv: -kv[1][1]):
    print("%-48s %5d %9.1f %9.1f  %s" % (key, calls, adds, busy, " ".join(sorted(shapes))))
PY

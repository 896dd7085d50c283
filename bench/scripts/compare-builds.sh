#!/usr/bin/env bash
# This tree's build against other builds of mlpipe, alternated in one run
# on the GPU host: GPT-2 124M's decode steps after a prompt of 10 tokens
# and of 1000 (early and late in the KV cache), and the T=16 forward, with
# each build, each with a compile cache of its own. Pack the others here
# first, each under a name, with its core library and its bench (the tools
# are thin mains over the libraries; a build of another library layout
# brings the libraries its bench links, e.g. every libmlpipe_*.so; the work
# tree and .device must stay under 64 MiB):
#   ci/pack-device.sh build
#   bench/scripts/compare-builds.sh --pack NAME BUILD_DIR [LIBRARY...]   (default libmlpipe.so)
# then, on the GPU host:
#   source .device/setup.sh && bench/scripts/compare-builds.sh [ROUNDS] [--prompts 10,1000] [-- BENCH ARGS]
# (default 2 rounds; BENCH ARGS replace the default --modes sublayer,fused,
# e.g. -- --modes fused --dtype bf16 --batches 1,32).
# A packed build runs its own bench with its libraries ahead of this
# build's on the library path. Output in $OUT (or /tmp/mlpipe-compare-builds).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
if [[ ${1:-} == --pack ]]; then
  name=${2:?--pack needs a name}
  build=$(realpath "${3:?--pack needs the build directory}")
  shift 3
  (($# > 0)) || set -- libmlpipe.so
  [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "compare-builds: a name of letters, digits, . _ -, not '$name'" >&2; exit 2; }
  rm -rf ".device/builds/$name" && mkdir -p ".device/builds/$name/lib"
  # A build that holds MLIR statically ships its core library linked against
  # the host's MLIR instead, as ci/pack-device.sh does.
  libdir=$build/lib
  if grep -q '^MLPIPE_STATIC_MLIR:BOOL=ON' "$build/CMakeCache.txt"; then
    cmake --build "$build" --target mlpipe_dynamic >/dev/null
    libdir=$build/lib-dynamic
  fi
  for library in "$@"; do
    [[ -f $libdir/$library ]] || { echo "compare-builds: no $library in $libdir" >&2; exit 2; }
    cp "$libdir/$library" ".device/builds/$name/lib/" && strip --strip-unneeded ".device/builds/$name/lib/$library"
  done
  mkdir -p ".device/builds/$name/bin"
  cp "$build/bin/bench" ".device/builds/$name/bin/" && strip --strip-unneeded ".device/builds/$name/bin/bench"
  echo "packed build '$name': $*"
  exit 0
fi
on_the_gpu_host compare-builds
names=()
for dir in .device/builds/*/; do
  [[ -d $dir ]] && names+=("$(basename "$dir")")
done
((${#names[@]} > 0)) || { echo "compare-builds: pack another build first (--pack NAME DIR LIBRARY...)" >&2; exit 2; }
rounds=${1:-2}
(($# > 0)) && shift
prompts=(10 1000)
benchArgs=(--modes sublayer,fused)
while (($# > 0)); do
  case $1 in
    --prompts) IFS=, read -r -a prompts <<<"${2:?--prompts needs a list}"; shift 2 ;;
    --) shift; benchArgs=("$@"); break ;;
    *) echo "compare-builds: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
declare -A caches
for name in this "${names[@]}"; do
  caches[$name]=$(mktemp -d)
done
# timed NAME PROMPT: one bench with build NAME ("this": this tree's).
timed() {
  local path=$LD_LIBRARY_PATH bench=bench
  [[ $1 != this ]] && path=$root/.device/builds/$1/lib:$path bench=$root/.device/builds/$1/bin/bench
  echo "== $1, decode steps after a prompt of $2 tokens (${benchArgs[*]})"
  LD_LIBRARY_PATH=$path MLPIPE_CACHE_DIR=${caches[$1]} "$bench" --config 124M --weights synthetic --target gpu \
    --seq 16 --repeat 10 --warmup 2 --decode-prompt "$2" "${benchArgs[@]}" |
    sed -n '/T  median/,/^$/p;/^KV-cache/,/^$/p;/^Batched decoding/,/^$/p'
}
for round in $(seq "$rounds"); do
  for prompt in "${prompts[@]}"; do
    for name in this "${names[@]}"; do
      echo "== round $round"
      timed "$name" "$prompt"
    done
  done
done 2>&1 | tee "$out/compare-builds.txt"

# The start every script in bench/scripts/ shares. Each sources it after its
# own `set -euo pipefail`, then says it runs on the GPU host:
#   source "$(dirname "${BASH_SOURCE[0]}")/preamble.sh"
#   on_the_gpu_host NAME
# Sourcing it sets root to the repository root and moves there.
# on_the_gpu_host NAME stops, saying why, unless the tools on PATH are the
# ones ci/pack-device.sh packed into .device/ (run `source .device/setup.sh`
# first); then it sets out to $OUT (the device tool's output folder) or
# /tmp/mlpipe-NAME and makes it, and exports the packed tokenizer's folder
# and an empty compile cache, so that every kernel timed is compiled by
# this build.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

on_the_gpu_host() {
  local name=$1
  if ! [[ $(command -v bench) -ef .device/bin/bench ]]; then
    echo "$name: the packed tools are not on PATH: pack them here (ci/pack-device.sh build), then" \
      "run 'source .device/setup.sh' on the GPU host first" >&2
    exit 2
  fi
  out=${OUT:-/tmp/mlpipe-$name}
  mkdir -p "$out"
  export MLPIPE_TOKENIZER_DIR=$root/.device/tokenizer
  MLPIPE_CACHE_DIR=$(mktemp -d)
  export MLPIPE_CACHE_DIR
}

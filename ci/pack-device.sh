#!/usr/bin/env bash
# Packs what a round on the GPU host needs into .device/ (git-ignored):
# the LLVM/MLIR runtime and the built binaries (../shared/device/pack.sh),
# plus what mlpipe's binaries use that the host lacks: Debian's fmt and
# Boost.Test libraries, lit and FileCheck for the GPU lit tests, and the
# GPT-2 tokenizer files. (No BLAS: the host has none and OpenBLAS is 36 MB;
# there mlpipe's own threaded loops do the CPU-side gemms.)
#   cmake --build build && ci/pack-device.sh build
set -euo pipefail
root=$(git rev-parse --show-toplevel)
build=$(realpath "${1:-build}")
cd "$root"
rm -rf "$build/lib-dynamic" # built below: two libmlpipe.so would collide
"$(realpath "$root/../shared/device/pack.sh")" "$build"
# The host has LLVM and MLIR from the packed runtime packages: a core library
# that holds them (MLPIPE_STATIC_MLIR, the default) is replaced by the same
# objects linked against them, a few MB instead of a hundred.
if grep -q '^MLPIPE_STATIC_MLIR:BOOL=ON' "$build/CMakeCache.txt"; then
  cmake --build "$build" --target mlpipe_dynamic >/dev/null
  cp "$build/lib-dynamic/libmlpipe.so" "$root/.device/lib/libmlpipe.so"
  strip --strip-unneeded "$root/.device/lib/libmlpipe.so"
fi
# Test scratch files whose names happen to contain ".so".
find "$root/.device/lib" -name '*.test.tmp*' -delete
# The GPU host runs the tools and the GPU unit tests only: the CPU-only test
# binaries stay here (the work tree plus .device must stay under 64 MiB).
find "$root/.device/bin" \( -name 'fuzz-replay-*' -o \( -name '*_test' ! -name '*_gpu_test' \) \) -delete

device=$root/.device
libdir=/usr/lib/x86_64-linux-gnu
cp -L "$libdir/libfmt.so.9" "$libdir/libboost_unit_test_framework.so.1.74.0" "$device/lib/"

tools=$device/llvm-tools
rm -rf "$tools" && mkdir -p "$tools"
cp /usr/lib/llvm-22/bin/FileCheck /usr/lib/llvm-22/bin/not "$tools/"
strip --strip-unneeded "$tools/FileCheck" "$tools/not"
mkdir -p "$tools/litpkg"
cp -r /usr/lib/llvm-22/utils/lit/lit "$tools/litpkg/lit"
find "$tools/litpkg" -name __pycache__ -prune -exec rm -rf {} +
cat > "$tools/lit" <<'LIT'
#!/usr/bin/env python3
import os, sys
sys.path.insert(1, os.path.join(os.path.dirname(os.path.realpath(__file__)), "litpkg"))
from lit.main import main
main()
LIT
chmod +x "$tools/lit"

if [[ -d .cache/gpt2-tokenizer ]]; then
  rm -rf "$device/tokenizer" && cp -r .cache/gpt2-tokenizer "$device/tokenizer"
fi
# The work tree and .device travel together, at most 64 MiB: the libraries
# and binaries go xz-compressed (a third of their size), and setup.sh
# unpacks them where it is first sourced.
for f in "$device"/lib/*.so* "$device"/bin/*; do
  [[ -L $f || $f == *.xz ]] || xz -T0 -6 -f "$f"
done
{
  head -n 2 "$device/setup.sh"
  cat <<'UNPACK'
for _f in "$(dirname "${BASH_SOURCE[0]}")"/lib/*.xz "$(dirname "${BASH_SOURCE[0]}")"/bin/*.xz; do
  [ -e "$_f" ] && xz -d -f "$_f" && case $_f in */bin/*) chmod +x "${_f%.xz}" ;; esac
done
UNPACK
  tail -n +3 "$device/setup.sh"
} > "$device/setup.sh.new" && mv "$device/setup.sh.new" "$device/setup.sh"
du -sh "$device" | awk '{print "packed .device with extras: " $1}'
tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
packed=$(du -sb "$device" | cut -f1)
if (( tree + packed > 64 * 1024 * 1024 )); then
  echo "pack-device: the work tree ($tree bytes) and .device ($packed) exceed 64 MiB" >&2
  exit 1
fi

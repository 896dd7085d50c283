#!/bin/sh
# Runs its arguments when `run --gpu-info` finds a GPU; otherwise says why
# not and exits 77, which ctest reports as Skipped.
if ! reason=$(run --gpu-info 2>&1); then
  echo "SKIPPED: no GPU ($reason)"
  exit 77
fi
exec "$@"

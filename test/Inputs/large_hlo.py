#!/usr/bin/env python3
"""Writes large HLO modules to stdout, for tests of size limits.

  large_hlo.py chain N      a chain of N negates
  large_hlo.py doubling L   L levels of computations, each calling the one below twice (2^(L+1) - 1 ops inlined)
"""
import sys


def chain(n):
    print("HloModule chain\n\nENTRY main {\n  x0 = f32[8] parameter(0)")
    for i in range(1, n):
        print(f"  x{i} = f32[8] negate(x{i - 1})")
    print(f"  ROOT y = f32[8] negate(x{n - 1})\n}}")


def doubling(levels):
    print("HloModule doubling\n\nc0 {\n  p = f32[8] parameter(0)\n  ROOT n = f32[8] negate(p)\n}")
    for k in range(1, levels + 1):
        print(f"c{k} {{\n  p = f32[8] parameter(0)\n  a = f32[8] call(p), to_apply=c{k - 1}")
        print(f"  b = f32[8] call(a), to_apply=c{k - 1}\n  ROOT s = f32[8] add(a, b)\n}}")
    print(f"ENTRY main {{\n  x = f32[8] parameter(0)\n  ROOT y = f32[8] call(x), to_apply=c{levels}\n}}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("chain", "doubling"):
        sys.exit(__doc__)
    {"chain": chain, "doubling": doubling}[sys.argv[1]](int(sys.argv[2]))

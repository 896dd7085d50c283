#!/usr/bin/env python3
"""Breaks an outlined module with host loops (generic form) in one way, to
show that kernel_sim catches it.

  mutate_host_loop.py device-load FILE   the first condition read from the device's flag, not its host copy
  mutate_host_loop.py leak FILE          the first gpu.dealloc becomes a wait (the buffer is never freed)
"""
import re
import sys


def main():
    kind, path = sys.argv[1], sys.argv[2]
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        if kind == "device-load" and '"gpu.memcpy"' in line:
            host, device = re.search(r'"gpu.memcpy"\(%[\w#]+, (%[\w#]+), (%[\w#]+)\)', line).groups()
            for j in range(i + 1, len(lines)):
                if '"memref.load"(%s)' % host in lines[j]:
                    lines[j] = lines[j].replace('"memref.load"(%s)' % host, '"memref.load"(%s)' % device)
                    break
            break
        if kind == "leak" and '"gpu.dealloc"' in line:
            result, token = re.search(r'(%[\w#]+) = "gpu.dealloc"\((%[\w#]+),', line).groups()
            lines[i] = '%s%s = "gpu.wait"(%s) : (!gpu.async.token) -> !gpu.async.token' % (
                re.match(r"\s*", line).group(0), result, token)
            break
    else:
        sys.exit("mutate_host_loop.py: nothing to change for %s in %s" % (kind, path))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs COMMAND with its stdout on a pipe and says whether a line matching
FIRST arrived before a line matching LAST was written: a program that
buffers its output until it exits writes both at once, at the end.

  shows_before_exit.py FIRST LAST COMMAND...
"""
import os
import re
import subprocess
import sys

first, last = re.compile(sys.argv[1], re.M), re.compile(sys.argv[2], re.M)
process = subprocess.Popen(sys.argv[3:], stdout=subprocess.PIPE)
received = ""
verdict = "never shown"
while True:
    chunk = os.read(process.stdout.fileno(), 65536)
    if not chunk:
        break
    received += chunk.decode(errors="replace")
    if first.search(received):
        verdict = "shown before the end" if not last.search(received) else "shown only with the end"
        break
while os.read(process.stdout.fileno(), 65536):
    pass
print(verdict)
sys.exit(process.wait())

#!/usr/bin/env python3
"""Listens on a Unix socket PATH, accepts one connection, and writes what it
receives to OUT. Prints 'ready' once listening.

  socket_reader.py PATH OUT
"""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(1)
server.settimeout(60)
print("ready", flush=True)
connection, _ = server.accept()
with open(out, "wb") as sink:
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            break
        sink.write(chunk)

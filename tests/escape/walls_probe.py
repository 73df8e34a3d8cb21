#!/usr/bin/env python3
# Probes of the walls suites (tests/escape/*_walls_test.cc, daemon_reach_test.cc), typed into a
# real session. Each prints one line, "<probe>: ok <what happened>" (exit 0) or
# "<probe>: <ERRNO|refused> <why>" (exit 1).
import errno
import json
import os
import socket
import sys


def fail(name, err, text=None):
    if isinstance(err, int):
        print(f"{name}: {errno.errorcode.get(err, str(err))} {text or os.strerror(err)}")
    else:
        print(f"{name}: {err} {text}")
    sys.exit(1)


def rpc(path, method, params):
    """Connects to the daemon socket at `path` and calls `method` (docs/security.md, "Wall 2")."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(path)
    except OSError as e:
        fail("rpc", e.errno)
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": json.loads(params)}
    try:
        s.sendall((json.dumps(request) + "\n").encode())
    except OSError:
        pass  # a refusing daemon may have closed already: its answer is still to be read
    try:
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        fail("rpc", e.errno)
    if not data:
        fail("rpc", "closed", "the daemon closed the connection without an answer")
    answer = json.loads(data.split(b"\n")[0])
    if "error" in answer:
        fail("rpc", "refused", answer["error"].get("message", ""))
    print(f"rpc: ok {json.dumps(answer['result'])}")


def write(path, text):
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        fail("write", e.errno)
    print(f"write: ok wrote {path}")


def read(path):
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        fail("read", e.errno)
    print(f"read: ok {data[:64]!r}")


def main(argv):
    probes = {
        "rpc": lambda: rpc(argv[2], argv[3], argv[4] if len(argv) > 4 else "{}"),
        "write": lambda: write(argv[2], argv[3]),
        "read": lambda: read(argv[2]),
    }
    if len(argv) < 3 or argv[1] not in probes:
        print("usage: walls_probe.py rpc SOCKET METHOD [PARAMS] | write PATH TEXT | read PATH")
        sys.exit(2)
    probes[argv[1]]()


if __name__ == "__main__":
    main(sys.argv)

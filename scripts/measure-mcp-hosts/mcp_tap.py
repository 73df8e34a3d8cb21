#!/usr/bin/env python3
"""Runs an MCP stdio server and copies every line each side sends to a log.

    mcp_tap.py LOG -- COMMAND [ARG...]

The host talks to this process as if it were the server; each line is passed on unchanged and
appended to LOG as {"dir": "host->server" | "server->host", "bytes": N, "line": ...}, so what
ptybox answered can be set beside what the host handed its model. Standard error is the server's.
"""

import json
import os
import subprocess
import sys
import threading


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: mcp_tap.py LOG -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    log_path, command = sys.argv[1], sys.argv[3:]
    log = open(log_path, "a", encoding="utf-8")
    lock = threading.Lock()

    def record(direction: str, raw: bytes) -> None:
        with lock:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            log.write(json.dumps({"dir": direction, "bytes": len(raw.rstrip(b"\n")), "line": text}) + "\n")
            log.flush()

    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def host_to_server() -> None:
        for raw in sys.stdin.buffer:
            record("host->server", raw)
            try:
                server.stdin.write(raw)
                server.stdin.flush()
            except BrokenPipeError:
                break
        try:
            server.stdin.close()
        except BrokenPipeError:
            pass

    threading.Thread(target=host_to_server, daemon=True).start()
    out = sys.stdout.buffer
    for raw in server.stdout:
        record("server->host", raw)
        try:
            out.write(raw)
            out.flush()
        except BrokenPipeError:
            break
    return server.wait()


if __name__ == "__main__":
    sys.exit(main())

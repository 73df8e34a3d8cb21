#!/usr/bin/env python3
"""Daemon memory under an endless flood: `yes` in a session for N seconds (default 60), driven
through `ptybox serve --stdio`, sampling the daemon's RSS. Prints the peak (VmHWM) and how much
output went through. Not a test: run by hand (bench/README in docs/readiness.md)."""
import json, os, subprocess, sys, tempfile, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = os.environ.get("PTYBOX", os.path.join(root, "build", "bin", "ptybox"))
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
mode = sys.argv[2] if len(sys.argv) > 2 else "workspace-write"

workspace = tempfile.mkdtemp(prefix="ptybox-flood-")
daemon = subprocess.Popen([binary, "serve", "--stdio", "--workspace", workspace],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
ids = iter(range(1, 1 << 30))

def call(method, **params):
    request_id = next(ids)
    daemon.stdin.write((json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                    "params": params}) + "\n").encode())
    daemon.stdin.flush()
    while True:
        reply = json.loads(daemon.stdout.readline())
        if reply.get("id") == request_id:
            return reply

def status(field):
    with open(f"/proc/{daemon.pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB
    return 0

call("policy_set_mode", mode=mode)
session = call("terminal_open")["result"]["sessionId"]
rss_idle = status("VmRSS")
call("terminal_send", sessionId=session, input="yes\n", background=True)
start = time.time()
samples = []
consumed = 0
while time.time() - start < seconds:
    time.sleep(1)
    samples.append(status("VmRSS"))
    # A background send's unconsumed output is bounded too; drain some of it like a client.
    out = call("terminal_output", sessionId=session)["result"]
    consumed += len(out["output"])
call("terminal_signal", sessionId=session, signal="SIGINT")
final = call("terminal_output", sessionId=session)["result"]
read = call("terminal_read", sessionId=session)["result"]
peak = status("VmHWM")
call("terminal_close", sessionId=session)
daemon.stdin.close()
daemon.wait()
print(f"flood: `yes` for {seconds:.0f} s in {mode}")
print(f"  daemon RSS idle with one session: {rss_idle / 1024:.1f} MiB")
print(f"  daemon RSS during the flood: min {min(samples) / 1024:.1f} MiB, "
      f"max {max(samples) / 1024:.1f} MiB")
print(f"  daemon peak RSS (VmHWM): {peak / 1024:.1f} MiB")
print(f"  background output consumed by the client: {consumed / 1e6:.1f} MB")
print(f"  scrollback page after the flood: cursor {read['cursor']}, "
      f"truncated {read['truncated']} (offset = bytes the session printed)")

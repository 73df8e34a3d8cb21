#!/usr/bin/python3
"""How long one owner's sends stall while another owner launches a large workspace: a daemon on a
socket, owner A with one read-only session sending `echo hi` in a loop, owner B opening (and
closing) workspace-write sessions of a workspace holding many nested repositories. Prints each
open's time and the worst (and p99) send latency of A during B's opens, and A's alone.

    bench/launch_stall.py --ptybox build/bin/ptybox [--repositories 5000] [--opens 5]

The figure a change moves is the worst send latency during the opens: every millisecond of a
launch that runs on the daemon's reactor shows there (docs/benchmarks.md).
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


class Client:
    """One connection (one owner) of a `serve --socket` daemon, one request at a time."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buffer = b""
        self.ids = 0

    def call(self, method, **params):
        self.ids += 1
        self.sock.sendall(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method,
                                      "params": params}).encode() + b"\n")
        while True:
            while b"\n" not in self.buffer:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise EOFError("the daemon closed the connection")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            reply = json.loads(line)
            if reply.get("id") == self.ids:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]


def make_repositories(root, count):
    """`count` repositories, each nested in the one before (a/.git, a/a/.git, ...) in chains of
    50, so that no path gets near PATH_MAX."""
    made = 0
    chain = 0
    while made < count:
        path = os.path.join(root, f"chain{chain}")
        for _ in range(min(50, count - made)):
            os.makedirs(os.path.join(path, ".git"))
            path = os.path.join(path, "d")
            made += 1
        chain += 1


def sender(client, session, stop, samples):
    while not stop.is_set():
        start = time.perf_counter()
        client.call("terminal_send", sessionId=session, input="echo hi\n")
        samples.append(time.perf_counter() - start)


def measure(a, session, seconds=None, during=None):
    stop = threading.Event()
    samples = []
    thread = threading.Thread(target=sender, args=(a, session, stop, samples))
    thread.start()
    result = None
    if during:
        result = during()
    else:
        time.sleep(seconds)
    stop.set()
    thread.join()
    return samples, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptybox", required=True)
    parser.add_argument("--repositories", type=int, default=5000)
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="ptybox-stall-")
    os.chmod(scratch, 0o755)
    workspace = os.path.join(scratch, "ws")
    os.makedirs(workspace)
    make_repositories(workspace, args.repositories)
    policy = os.path.join(scratch, "operator.yaml")
    with open(policy, "w") as f:
        f.write("version: 1\nlimits:\n  startupTimeoutMs: 120000\n  warmShells: 0\n")
    path = os.path.join(scratch, "ptybox.sock")
    daemon = subprocess.Popen([os.path.abspath(args.ptybox), "serve", "--socket", path,
                               "--workspace", workspace, "--policy", policy],
                              stderr=subprocess.DEVNULL)
    try:
        while not os.path.exists(path):
            time.sleep(0.05)
        a = Client(path)
        a.call("policy_set_mode", mode="read-only")
        session = a.call("terminal_open")["sessionId"]
        b = Client(path)
        b.call("policy_set_mode", mode="workspace-write")
        alone, _ = measure(a, session, seconds=3)

        def opens():
            times = []
            for _ in range(args.opens):
                start = time.perf_counter()
                opened = b.call("terminal_open", timeoutMs=120000)
                times.append(time.perf_counter() - start)
                b.call("terminal_close", sessionId=opened["sessionId"])
            return times

        during, open_times = measure(a, session, during=opens)
        print(f"repositories: {args.repositories}; opens: "
              + ", ".join(f"{t * 1000:.0f}" for t in open_times) + " ms")
        for name, samples in (("alone", alone), ("during the opens", during)):
            print(f"A's sends {name}: {len(samples)}, p50 "
                  f"{compare.fmt_us(compare.percentile(samples, 50))}, p99 "
                  f"{compare.fmt_us(compare.percentile(samples, 99))}, worst "
                  f"{compare.fmt_us(max(samples))}")
    finally:
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Drives one ptybox container over stdio for images/test-image.sh (stdlib only).

    smoke_client.py rpc  -- podman run -i ... IMAGE serve --stdio
    smoke_client.py mcp  -- podman run -i ... IMAGE mcp
    smoke_client.py stop -- podman run -i --name N ... IMAGE serve --stdio   (then stops N)
    (or docker instead of podman: the engine is the command's first word)

rpc: terminal_open, terminal_send `echo $((6*7))` (expects 42 and exit code 0), terminal_close.
mcp: initialize, notifications/initialized, tools/list (expects terminal_open), tools/call
     terminal_open and terminal_send, then EOF.
stop: opens a session, then `ENGINE stop -t GRACE NAME` while it is open; expects the container
     to exit 0 within the grace (ptybox as PID 1 closes the session on SIGTERM).
Prints one line of figures (start to first prompt: the time from the engine's start to the
answer of terminal_open, whose shell has shown its prompt). Exits non-zero on any failure.
"""
import json
import subprocess
import sys
import threading
import time

DEADLINE_S = 60


def fail(message):
    print("smoke_client: FAIL: " + message, file=sys.stderr)
    sys.exit(1)


class Peer:
    def __init__(self, argv):
        self.start = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.timer = threading.Timer(DEADLINE_S, self.proc.kill)
        self.timer.start()
        self.next_id = 1

    def call(self, method, params=None, notify=False):
        message = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            message["id"] = self.next_id
            self.next_id += 1
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        if notify:
            return None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail(f"{method}: the server closed its output; stderr: {self.stderr()}")
            answer = json.loads(line)
            if answer.get("id") == message["id"]:
                if "error" in answer:
                    fail(f"{method}: {answer['error']}")
                return answer["result"]

    def stderr(self):
        try:
            self.proc.kill()
            return self.proc.stderr.read().decode(errors="replace")[-2000:]
        except Exception:  # noqa: BLE001 - diagnostics only
            return "?"

    def finish(self):
        self.proc.stdin.close()
        code = self.proc.wait()
        self.timer.cancel()
        return code


def rpc(argv):
    peer = Peer(argv)
    opened = peer.call("terminal_open", {"name": "smoke"})
    first_prompt = time.monotonic() - peer.start
    sid = opened["sessionId"]
    if opened["mode"] != "workspace-write":
        fail(f"terminal_open: mode {opened['mode']}")
    sent = peer.call("terminal_send", {"sessionId": sid, "input": "echo $((6*7))\n"})
    if sent.get("exitCode") != 0 or "42" not in sent.get("viewport", ""):
        fail(f"terminal_send: {sent}")
    closed = peer.call("terminal_close", {"sessionId": sid})
    code = peer.finish()
    if code != 0:
        fail(f"serve --stdio exited {code} at EOF")
    print(f"rpc: open/send/close ok; start to first prompt {first_prompt * 1000:.0f} ms; "
          f"closed: {closed['sessionStatus']}")


def mcp(argv):
    peer = Peer(argv)
    init = peer.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test-image", "version": "1"}})
    if init.get("serverInfo", {}).get("name") != "ptybox":
        fail(f"initialize: {init}")
    peer.call("notifications/initialized", notify=True)
    tools = [t["name"] for t in peer.call("tools/list")["tools"]]
    if "terminal_open" not in tools or "terminal_send" not in tools:
        fail(f"tools/list: {tools}")
    opened = peer.call("tools/call", {"name": "terminal_open", "arguments": {}})
    if opened.get("isError"):
        fail(f"tools/call terminal_open: {opened}")
    sid = opened["structuredContent"]["sessionId"]
    sent = peer.call("tools/call", {"name": "terminal_send",
                                    "arguments": {"sessionId": sid, "input": "id -u; echo done\n"}})
    text = json.dumps(sent)
    if sent.get("isError") or "done" not in text:
        fail(f"tools/call terminal_send: {sent}")
    code = peer.finish()
    if code != 0:
        fail(f"mcp exited {code} at EOF")
    print(f"mcp: initialize, tools/list ({len(tools)} tools), terminal_open, terminal_send ok")


def stop(argv, name, grace):
    peer = Peer(argv)
    opened = peer.call("terminal_open", {"name": "held"})
    peer.call("terminal_send", {"sessionId": opened["sessionId"],
                                "input": "sleep 1000 &\n"})
    begin = time.monotonic()
    subprocess.run([argv[0], "stop", "-t", str(grace), name], check=True,
                   stdout=subprocess.DEVNULL, timeout=grace + 30)
    code = peer.proc.wait(timeout=30)
    peer.timer.cancel()
    took = time.monotonic() - begin
    if code != 0:
        fail(f"the container exited {code} on stop (expected 0: ptybox closes its sessions)")
    if took >= grace:
        fail(f"stop took {took:.1f} s, not within the {grace} s grace (SIGKILL?)")
    print(f"stop: exit 0 with an open session, in {took:.2f} s (grace {grace} s)")


def main():
    if len(sys.argv) < 3 or "--" not in sys.argv:
        fail(__doc__)
    mode = sys.argv[1]
    argv = sys.argv[sys.argv.index("--") + 1:]
    if mode == "rpc":
        rpc(argv)
    elif mode == "mcp":
        mcp(argv)
    elif mode == "stop":
        name = argv[argv.index("--name") + 1]
        stop(argv, name, int(sys.argv[2]))
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main()

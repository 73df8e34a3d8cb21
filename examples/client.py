#!/usr/bin/env python3
"""A minimal ptybox client (Python 3 standard library only): opens a sandboxed terminal in the
current directory, runs `echo hi`, reads the terminal's history and closes it.
    python3 examples/client.py [PATH_TO_PTYBOX]      (default: ptybox on PATH)"""
import json, subprocess, sys

server = subprocess.Popen([sys.argv[1] if len(sys.argv) > 1 else "ptybox", "serve", "--stdio"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
next_id = 0

def call(method, **params):
    """Sends one JSON-RPC request (one line) and returns its result (one line back)."""
    global next_id
    next_id += 1
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method,
                                   "params": params}) + "\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    if "error" in answer:
        sys.exit(f"{method}: {answer['error']['message']}")
    return answer["result"]

session = call("terminal_open", name="example")["sessionId"]
sent = call("terminal_send", sessionId=session, input="echo hi\n")
print(f"viewport={sent['viewport']!r} waitReason={sent['waitReason']} exitCode={sent['exitCode']}")
print("history:", call("terminal_read", sessionId=session)["text"].replace("\n", " | "))
print("closed:", call("terminal_close", sessionId=session)["sessionStatus"])
server.stdin.close()  # end of input: the server closes what is left and exits 0
sys.exit(server.wait() or (0 if sent["viewport"] == "hi" and sent["exitCode"] == 0 else 1))

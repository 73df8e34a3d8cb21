#!/usr/bin/env python3
"""A ptybox client with the typed Python package (clients/python, docs/clients.md): opens a
sandboxed terminal in the current directory, runs `echo hi`, reads the terminal's history and
closes it.
    pip install ./clients/python                     (from a clone it also runs without)
    python3 examples/client.py [PATH_TO_PTYBOX]      (default: ptybox on PATH)"""
import sys
from pathlib import Path

try:
    from ptybox import Client
except ImportError:  # not installed: the clone's copy (standard library only)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))
    from ptybox import Client

with Client.spawn(sys.argv[1] if len(sys.argv) > 1 else "ptybox") as c:  # ptybox serve --stdio
    session = c.terminal_open(name="example").session_id
    sent = c.terminal_send(session, "echo hi\n")
    print(f"viewport={sent.viewport!r} waitReason={sent.wait_reason} exitCode={sent.exit_code}")
    print("history:", c.terminal_read(session).text.replace("\n", " | "))
    print("closed:", c.terminal_close(session).session_status)
status = c.close()  # end of input: the server closed what was left and exited 0
sys.exit(status or (0 if sent.viewport == "hi" and sent.exit_code == 0 else 1))

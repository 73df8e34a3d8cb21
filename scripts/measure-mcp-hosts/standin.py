#!/usr/bin/env python3
"""A scripted stand-in for a model API, so a real MCP host can be driven offline.

    standin.py LOGDIR

Listens on 127.0.0.1 (an ephemeral port, written to LOGDIR/port) and speaks two wire formats:
  - the Anthropic Messages API (POST /v1/messages, streaming SSE or not; count_tokens) for
    Claude Code (ANTHROPIC_BASE_URL=http://127.0.0.1:PORT);
  - the OpenAI Responses API (POST /v1/responses, SSE) for Codex (a model_provider with
    base_url http://127.0.0.1:PORT/v1 and wire_api = "responses").
Every request is logged whole to LOGDIR/requests.jsonl (method, path, body; no headers, which
hold the key). Anything else is answered minimally and logged, so an unexpected call shows up.

The "model" follows one script (SCRIPT below), one tool call per turn, whatever the host's tool
names (it picks the tool whose name ends with the ptybox name): open a terminal; send
`seq 1 200000`; follow the elision line's terminal_read pointer exactly as it reads; the same with
`seq 1 5000`; a send that settles while `sleep 2` still runs, then terminal_wait; a call that
fails (an unknown sessionId); close; a final text answer.
Standard library only; nothing but loopback.
"""

import json
import os
import re
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOGDIR = sys.argv[1] if len(sys.argv) > 1 else "."
LOCK = threading.Lock()
COUNTER = [0]

SESSION_RE = re.compile(r"pty-[0-9a-f]{32}")
POINTER_RE = re.compile(r"terminal_read (\{[^{}]*\})")


def log(entry: dict) -> None:
    with LOCK:
        COUNTER[0] += 1
        entry = {"n": COUNTER[0], **entry}
        with open(os.path.join(LOGDIR, "requests.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def strings_in(text: str) -> str:
    """The text, and when it is JSON every string inside it: a pointer inside a structured
    result's viewport is escaped in the raw text."""
    parts = [text]
    try:
        stack = [json.loads(text)]
    except ValueError:
        # A host may wrap the JSON ("Wall time: ...\nOutput:\n{...}").
        try:
            stack = [json.loads(text[text.index("{") :])]
        except ValueError:
            return text
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return "\n".join(parts)


def find_pointer(text: str):
    """The arguments of the first `terminal_read {...}` in a result that parse as JSON (in a
    structured result the raw text has them escaped; the decoded viewport has them as sent)."""
    for m in POINTER_RE.finditer(strings_in(text)):
        try:
            return json.loads(m.group(1))
        except ValueError:
            continue
    return None


# The script: one tool call per turn. Each entry is the tool's name and its arguments, given the
# sessionId and the results so far; a pointer read whose send left nothing out asks for the
# status instead, so the steps stay in place.
def pointer_or_status(session, results):
    pointer = find_pointer(results[-1])
    return ("terminal_read", pointer) if pointer else ("terminal_status", {"sessionId": session})


SCRIPT = [
    lambda s, r: ("terminal_open", {}),
    # More output than the scrollback keeps (10,000 lines by default).
    lambda s, r: ("terminal_send", {"sessionId": s, "input": "seq 1 200000\n"}),
    pointer_or_status,
    # More than the budget, less than the scrollback: the pointer returns every line left out.
    lambda s, r: ("terminal_send", {"sessionId": s, "input": "seq 1 5000\n"}),
    pointer_or_status,
    # A command still running when the send settles, then waiting for it without typing.
    lambda s, r: ("terminal_send", {"sessionId": s, "input": "sleep 2; echo slept\n", "silenceMs": 300}),
    lambda s, r: ("terminal_wait", {"sessionId": s}),
    # A tool error (isError, no structuredContent): what the host forwards then.
    lambda s, r: ("terminal_status", {"sessionId": "pty-" + "0" * 32}),
    lambda s, r: ("terminal_close", {"sessionId": s}),
]


def next_step(results: list) -> tuple:
    """(tool suffix, arguments) for the next call, or (None, final text). `results` are the tool
    results' texts so far, in order."""
    step = len(results)
    session = None
    for r in results:
        m = SESSION_RE.search(r)
        if m:
            session = m.group(0)
            break
    if step == 0:
        return SCRIPT[0](None, results)
    if session is None:
        return None, "no sessionId in the terminal_open result"
    if step < len(SCRIPT):
        return SCRIPT[step](session, results)
    return None, "DONE: the stand-in's script is over."


def find_tool(names: list, suffix: str):
    for n in names:
        if n == suffix or n.endswith("__" + suffix) or n.endswith("." + suffix) or n.endswith("_" + suffix):
            return n
    return None


def tool_names(tools) -> list:
    """Every tool name in a request's tools, including ones nested in namespaces."""
    names = []
    stack = [tools or []]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(reversed(v))
        elif isinstance(v, dict):
            if isinstance(v.get("name"), str):
                names.append(v["name"])
            for key in ("tools", "function"):
                if key in v:
                    stack.append(v[key])
    return names


def block_text(content) -> str:
    """The text of a tool result's content: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return json.dumps(content)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # the request log is requests.jsonl
        pass

    def body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding") == "zstd" or self.headers.get("Content-Encoding") == "gzip":
            import gzip

            try:
                raw = gzip.decompress(raw)
            except OSError:
                pass
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def send_json(self, code: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: list) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        log({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models") or "/models?" in self.path:
            self.send_json(200, {"data": [], "models": [], "has_more": False, "object": "list"})
        else:
            self.send_json(200, {})

    def do_HEAD(self):
        log({"method": "HEAD", "path": self.path})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.body()
        path = self.path.split("?")[0]
        if path.endswith("/messages/count_tokens"):
            log({"method": "POST", "path": self.path, "body": body})
            self.send_json(200, {"input_tokens": 100})
        elif path.endswith("/messages"):
            self.anthropic(body)
        elif path.endswith("/responses"):
            self.openai(body)
        else:
            log({"method": "POST", "path": self.path, "body": body})
            self.send_json(200, {})

    # Anthropic Messages API (Claude Code).
    def anthropic(self, body: dict) -> None:
        names = tool_names(body.get("tools"))
        uses, results = {}, []
        for msg in body.get("messages", []):
            if not isinstance(msg.get("content"), list):
                continue
            for b in msg["content"]:
                if b.get("type") == "tool_use":
                    uses[b["id"]] = b["name"]
                elif b.get("type") == "tool_result":
                    results.append(
                        {
                            "tool": uses.get(b.get("tool_use_id")),
                            "content": b.get("content"),
                            "text": block_text(b.get("content")),
                        }
                    )
        main = find_tool(names, "terminal_open") is not None
        log({"method": "POST", "path": self.path, "api": "anthropic", "main": main, "body": body})
        if main:
            suffix, arg = next_step([r["text"] for r in results])
        else:
            suffix, arg = None, "ok"
        model = body.get("model", "standin")
        if suffix is not None:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": find_tool(names, suffix), "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arg)}
            final_block = {**block, "input": arg}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": arg}
            final_block = {"type": "text", "text": arg}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        msg_id = "msg_" + uuid.uuid4().hex[:24]
        if not body.get("stream"):
            self.send_json(
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [final_block],
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        start = {"id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
        self.send_sse(
            [
                ("message_start", {"type": "message_start", "message": start}),
                ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}),
                ("message_stop", {"type": "message_stop"}),
            ]
        )

    # OpenAI Responses API (Codex).
    def openai(self, body: dict) -> None:
        names = tool_names(body.get("tools"))
        calls, results = {}, []
        items = body.get("input") if isinstance(body.get("input"), list) else []
        for item in items:
            if item.get("type") == "function_call":
                calls[item.get("call_id")] = item.get("name")
            elif item.get("type") == "function_call_output":
                out = item.get("output")
                results.append({"tool": calls.get(item.get("call_id")), "content": out, "text": block_text(out)})
        main = find_tool(names, "terminal_open") is not None
        log({"method": "POST", "path": self.path, "api": "openai", "main": main, "body": body})
        if main:
            suffix, arg = next_step([r["text"] for r in results])
        else:
            suffix, arg = None, "ok"
        resp_id = "resp_" + uuid.uuid4().hex[:24]
        if suffix is not None:
            name = find_tool(names, suffix)
            item = {
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": "call_" + uuid.uuid4().hex[:24],
                "name": name,
                "arguments": json.dumps(arg),
                "status": "completed",
            }
            # A namespaced tool ("ptybox" holding "terminal_open") is called by its namespace too.
            for t in body.get("tools") or []:
                if isinstance(t, dict) and t.get("type") == "namespace" and name in tool_names(t.get("tools")):
                    item["namespace"] = t.get("name")
        else:
            item = {
                "type": "message",
                "role": "assistant",
                "id": "msg_" + uuid.uuid4().hex[:24],
                "status": "completed",
                "content": [{"type": "output_text", "text": arg, "annotations": []}],
            }
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 20}
        self.send_sse(
            [
                ("response.created", {"type": "response.created", "response": {"id": resp_id, "status": "in_progress", "output": []}}),
                ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
                ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
                ("response.completed", {"type": "response.completed", "response": {"id": resp_id, "status": "completed", "output": [item], "usage": usage}}),
            ]
        )


def main() -> None:
    os.makedirs(LOGDIR, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    tmp = os.path.join(LOGDIR, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, os.path.join(LOGDIR, "port"))
    server.serve_forever()


if __name__ == "__main__":
    main()

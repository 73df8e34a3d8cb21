#!/usr/bin/env python3
"""What one host handed its model, from a run.sh directory.

    report.py DIR

Reads DIR/log/requests.jsonl (every request the host made to the stand-in model API) and
DIR/mcp.jsonl (every line between the host and ptybox) and prints, for each ptybox tool call:
the bytes ptybox answered (whole JSON-RPC line, the text content, the structuredContent), which
of them reached the model and in how many bytes, and for the seq 1 200000 send whether `200000`
and the terminal_read pointer were there and whether following the pointer returned the lines
right after the kept head. Also the size of ptybox's tool list as the host forwarded it.
"""

import json
import re
import sys

POINTER_RE = re.compile(r"terminal_read (\{[^{}]*\})")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def compact(v) -> int:
    return len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode())


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return json.dumps(content)


def main() -> int:
    d = sys.argv[1]
    reqs = load(f"{d}/log/requests.jsonl")
    mcp = load(f"{d}/mcp.jsonl")
    main_reqs = [r for r in reqs if r.get("main")]
    others = {}
    for r in reqs:
        if not r.get("main"):
            key = f'{r["method"]} {r["path"]}'
            others[key] = others.get(key, 0) + 1
    print(f"model API requests: {len(reqs)} ({len(main_reqs)} with ptybox's tools)")
    for k, n in sorted(others.items()):
        print(f"  other: {k} x{n}")
    if not main_reqs:
        print("no request carried ptybox's tools: see host.stderr and log/requests.jsonl")
        return 1

    # The MCP side: tools/list and each tools/call with its answer, in order.
    sent, answers, calls = {}, {}, []
    for m in mcp:
        try:
            msg = json.loads(m["line"])
        except ValueError:
            continue
        if m["dir"] == "host->server" and "method" in msg and "id" in msg:
            sent[msg["id"]] = msg
            if msg["method"] == "tools/call":
                calls.append(msg["id"])
        elif m["dir"] == "server->host" and "id" in msg and "method" not in msg:
            answers[msg["id"]] = (m["bytes"], msg)
    tools_list = next((answers[i] for i, s in sent.items() if s["method"] == "tools/list" and i in answers), None)
    init = next((s for s in sent.values() if s["method"] == "initialize"), None)
    if init:
        print(f'host initialize: protocolVersion {init["params"].get("protocolVersion")}, clientInfo {json.dumps(init["params"].get("clientInfo"))}')

    # The tool list as the host forwarded it to the model.
    body = main_reqs[-1]["body"]
    tools = body.get("tools") or []
    mine = [t for t in tools if "terminal_" in json.dumps(t) or "policy_" in json.dumps(t)]
    print(f"tools sent to the model: {len(tools)} in all, {compact(tools)} bytes; ptybox's: {len(mine)}, {compact(mine)} bytes (compact JSON)")
    if tools_list:
        print(f"ptybox's tools/list answer: {tools_list[0]} bytes, {len(tools_list[1]['result']['tools'])} tools")

    # Each ptybox tool as forwarded, against tools/list: what the host kept of it.
    if tools_list:
        orig = {t["name"]: t for t in tools_list[1]["result"]["tools"]}
        forwarded, stack = {}, [tools]
        while stack:
            v = stack.pop()
            if isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, dict):
                name = v.get("name", "")
                for k in orig:
                    if name == k or name.endswith("__" + k):
                        forwarded[k] = v
                if isinstance(v.get("tools"), list):
                    stack.append(v["tools"])
        kept = sorted({k for v in forwarded.values() for k in v})
        same_desc = all(v.get("description") == orig[k]["description"] for k, v in forwarded.items())
        dropped = set()
        for k, v in forwarded.items():
            schema = v.get("input_schema") or v.get("parameters") or {}
            for pname, prop in orig[k]["inputSchema"].get("properties", {}).items():
                got_prop = schema.get("properties", {}).get(pname, {})
                dropped |= {key for key in prop if key not in got_prop}
        print(f"  forwarded {len(forwarded)} of {len(orig)} tools with keys {kept}; descriptions unchanged: {same_desc}; "
              f"schema keywords dropped: {sorted(dropped) or 'none'}; outputSchema forwarded: {any('outputSchema' in json.dumps(v) or 'output_schema' in v for v in forwarded.values())}")
    instr = next((json.loads(m["line"])["result"].get("instructions") for m in mcp
                  if m["dir"] == "server->host" and '"instructions"' in m["line"]), None)
    if instr:
        where = [k for k in ("system", "input", "tools", "messages") if instr in json.dumps(body.get(k), ensure_ascii=False).replace('\\"', '"')]
        print(f"  initialize instructions reach the model in: {where or 'nowhere'}")

    # Tool results as the model received them, from the last request (it holds the whole conversation).
    got = []
    if "messages" in body:
        for msg in body["messages"]:
            if isinstance(msg.get("content"), list):
                for b in msg["content"]:
                    if b.get("type") == "tool_result":
                        got.append(b.get("content"))
    else:
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                got.append(item.get("output"))

    send_text, head_last, partial = None, None, False
    for i, received in enumerate(got):
        t = text_of(received)
        line = f"result {i + 1}:"
        if i < len(calls) and calls[i] in answers:
            call = sent[calls[i]]["params"]
            nbytes, ans = answers[calls[i]]
            res = ans.get("result", {})
            ctext = "".join(c.get("text", "") for c in res.get("content", []) if c.get("type") == "text")
            sc = res.get("structuredContent")
            line += f' {call["name"]} {json.dumps(call.get("arguments"))[:120]}'
            print(line)
            print(f"  ptybox answered: {nbytes} bytes (content text {len(ctext.encode())}, structuredContent {compact(sc) if sc is not None else 'none'})")
            prefix, as_json = "", None
            try:
                as_json = json.loads(t)
            except ValueError:
                if "{" in t:
                    try:
                        as_json = json.loads(t[t.index("{") :])
                        prefix = t[: t.index("{")]
                    except ValueError:
                        pass
            if sc is not None and as_json == sc:
                kind = "structuredContent (serialized JSON)"
                if prefix:
                    kind += f", after a prefix the host added: {json.dumps(prefix)}"
            elif t == ctext:
                kind = "content (text)"
            elif sc is not None and ctext and ctext in t and json.dumps(sc)[:40] in t:
                kind = "both"
            else:
                kind = "something else (see below)"
            print(f"  the model received: {len(t.encode())} bytes, {kind}; shape: {type(received).__name__}")
            if kind.startswith("something"):
                print("    head: " + json.dumps(t[:400]))
                print("    tail: " + json.dumps(t[-400:]))
            seq = re.match(r"seq 1 (\d+)", (call.get("arguments") or {}).get("input", ""))
            if call["name"] == "terminal_send" and seq:
                send_text = t
                last = seq.group(1)
                view = (sc or {}).get("viewport", ctext)
                has_tail = re.search(rf"(^|\D){last}(\D|$)", t) is not None
                m = POINTER_RE.search(view)
                print(f"  holds {last}: {has_tail}; elision pointer: {m.group(1) if m else None}; <= 16384 bytes: {len(t.encode()) <= 16384}")
                head_last, partial = None, False
                if m:
                    partial = "bytes are kept: terminal_read" in view
                    line = next(x for x in view.split("\n") if x.startswith("[..."))
                    print(f"  elision line: {line}")
                    head = view[: view.find("[...")].rstrip("\n").split("\n")
                    nums = [s for s in head if s.isdigit()]
                    head_last = int(nums[-1]) if nums else None
            elif call["name"] in ("terminal_send", "terminal_wait") or res.get("isError"):
                print(f"  what the model read: {json.dumps(t)}")
                if ctext != t:
                    print(f"  the text content it did not read: {json.dumps(ctext)}")
            if call["name"] == "terminal_read" and head_last is not None:
                page = (sc or {}).get("text", ctext)
                first = page.split("\n")[0] if page else ""
                args = call.get("arguments") or {}
                if partial:
                    # The line said only the end of the span is still kept, and pointed there.
                    ok = (sc or {}).get("cursor") == args.get("cursor") and not (sc or {}).get("truncated")
                    verdict = "starts where the line said (the oldest kept line)" if ok else "DOES NOT start where the line said"
                else:
                    ok = first.strip() == str(head_last + 1)
                    verdict = "continues the head" if ok else "DOES NOT continue the head"
                print(f"  pointer followed: page starts with {first!r}, head ended at {head_last}: {verdict}; cursor {(sc or {}).get('cursor')}, nextCursor {(sc or {}).get('nextCursor')}, end {(sc or {}).get('end')}, truncated {(sc or {}).get('truncated')}")
        else:
            print(line + " (no matching tools/call in mcp.jsonl)")
            print(f"  the model received: {len(t.encode())} bytes: {json.dumps(t[:300])}")
    if send_text is None:
        print("no terminal_send result reached the model")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The contract the typed clients are checked against, read from where it lives, so that a
method or an error kind added there fails the clients' tests until they have it:

- the daemon's own method table, runtime/methods.cc (Contract(): one `{.name = "..."` entry per
  method), and its error kinds, common/error.cc (the kErrorKindTokens table of ErrorKind's wire spellings);
- the tables of docs/protocol.md ("Methods", and the kinds of "Errors");
- the real binary: `ptybox mcp`'s tools/list (every method that is an MCP tool).

    contract.py SOURCE_DIR PTYBOX   prints {"methods": [...], "errorKinds": [...]} as JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# ErrorKind spellings that are not application errors (-32000): -32602 and -32603.
NOT_APPLICATION_KINDS = {"invalid_params", "internal"}


def _section(text: str, heading: str) -> str:
    """The body of the `## heading` section of a Markdown text."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise SystemExit(f"contract.py: docs/protocol.md has no `## {heading}` section")
    return match.group(1)


def _table_names(section: str) -> list[str]:
    return re.findall(r"^\| `([a-z_$/]+)` \|", section, re.M)


def methods_from_docs(source: Path) -> list[str]:
    return _table_names(_section((source / "docs/protocol.md").read_text(), "Methods"))


def error_kinds_from_docs(source: Path) -> list[str]:
    return _table_names(_section((source / "docs/protocol.md").read_text(), "Errors"))


def methods_from_code(source: Path) -> list[str]:
    text = (source / "runtime/methods.cc").read_text()
    body = text[text.index("std::vector<MethodSpec> BuildContract()"):]
    body = body[:body.index("\n}\n")]
    return re.findall(r'^\s*\{\.name = "([^"]+)",', body, re.M)


def error_kinds_from_code(source: Path) -> list[str]:
    text = (source / "common/error.cc").read_text()
    # The one kind table: `{ErrorKind::kNotFound, "not_found"},` rows of kErrorKindTokens.
    start = text.find("kErrorKindTokens = {{")
    if start < 0:
        return []
    body = text[start:text.index("}};", start)]
    kinds = re.findall(r'\{ErrorKind::k[A-Za-z]+, "([a-z_]+)"\}', body)
    return [k for k in dict.fromkeys(kinds) if k not in NOT_APPLICATION_KINDS]


def methods_from_binary(ptybox: str) -> list[str]:
    """The MCP tools `ptybox mcp` lists: every contract method that has an MCP face."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "contract.py", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with tempfile.TemporaryDirectory(prefix="ptybox-contract-") as workspace:
        done = subprocess.run([str(Path(ptybox).absolute()), "mcp", "--workspace", workspace],
                              input="".join(json.dumps(l) + "\n" for l in lines),
                              capture_output=True, text=True, timeout=120, cwd=workspace)
    for line in done.stdout.splitlines():
        answer = json.loads(line)
        if answer.get("id") == 2:
            return [tool["name"] for tool in answer["result"]["tools"]]
    raise SystemExit(f"contract.py: `ptybox mcp` gave no tools/list answer (exit {done.returncode}): "
                     f"{done.stderr[-2000:]}")


def contract(source: Path, ptybox: str) -> dict[str, list[str]]:
    """Every method and application error kind any of the sources names, each once, in the
    code's order first."""
    code, docs, tools = methods_from_code(source), methods_from_docs(source), methods_from_binary(ptybox)
    if not code or not docs or not tools:
        raise SystemExit(f"contract.py: a source of methods is empty (code {code}, docs {docs}, "
                         f"tools/list {tools}): the parser no longer matches its file")
    kinds_code, kinds_docs = error_kinds_from_code(source), error_kinds_from_docs(source)
    if not kinds_code or not kinds_docs:
        raise SystemExit("contract.py: a source of error kinds is empty: the parser no longer "
                         "matches common/error.cc or docs/protocol.md")
    return {"methods": list(dict.fromkeys(code + docs + tools)),
            "errorKinds": list(dict.fromkeys(kinds_code + kinds_docs))}


if __name__ == "__main__":
    print(json.dumps(contract(Path(sys.argv[1]), sys.argv[2])))

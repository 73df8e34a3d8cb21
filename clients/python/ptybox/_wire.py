"""The wire, shared by both clients: one JSON-RPC 2.0 object per line (docs/protocol.md,
"Transport"), the command line that spawns `ptybox serve --stdio`, and turning one answer into
a result or an exception."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

from .errors import ConnectionClosed, PtyboxError, ProtocolError, error_from_response
from .types import decode, watch_event

# The largest line this client reads. The server bounds results by the policy's maxResultBytes
# and maxReadBytes; this only stops a broken peer from growing the client without end.
MAX_LINE_BYTES = 64 * 1024 * 1024


def request_line(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                       ensure_ascii=False) + "\n").encode("utf-8")


def cancel_line(request_id: int, reason: str | None) -> bytes:
    params: dict[str, Any] = {"id": request_id}
    if reason is not None:
        params["reason"] = reason
    return (json.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": params},
                       ensure_ascii=False) + "\n").encode("utf-8")


def parse_line(line: bytes) -> dict[str, Any]:
    """One line from the server as a JSON object, or ProtocolError."""
    try:
        message = json.loads(line.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as e:
        raise ProtocolError(f"the server sent a line that is not JSON ({e.msg}): {line[:80]!r}") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"the server sent JSON that is not an object: {line[:80]!r}")
    return message


def outcome(method: str, message: dict[str, Any], result_type: type) -> Any:
    """The decoded result of `message` (the answer to `method`); raises its error."""
    if "error" in message:
        raise error_from_response(method, message["error"])
    if "result" not in message:
        raise ProtocolError(f"{method}: the answer has neither result nor error")
    return decode(result_type, message["result"], method)


def notification(message: dict[str, Any]) -> Any:
    """`message` as a watch event (types.WatchOutput, types.WatchEnded) when it is a
    notification (a method, no id); None otherwise, or for a notification this client does not
    know (it is dropped)."""
    method = message.get("method")
    if "id" in message or not isinstance(method, str):
        return None
    return watch_event(method, message.get("params"))


def stray_error(message: dict[str, Any]) -> PtyboxError | None:
    """An error answered with id null (a line the server could not parse, or `busy` when it
    already serves --max-connections clients and closes this one): it concerns this client's
    requests as a whole."""
    if message.get("id") is None and "error" in message:
        return error_from_response("(connection)", message["error"])
    return None


def closed_error(method: str, detail: str = "") -> ConnectionClosed:
    return ConnectionClosed(f"{method}: the server closed the connection before answering{detail}")


def serve_command(ptybox: str | os.PathLike[str], workspace: str | os.PathLike[str] | None,
                  policy: str | os.PathLike[str] | None, args: Sequence[str]) -> list[str]:
    """`ptybox serve --stdio [--workspace DIR] [--policy FILE] ARGS...`."""
    command = [os.fspath(ptybox), "serve", "--stdio"]
    if workspace is not None:
        command += ["--workspace", os.fspath(workspace)]
    if policy is not None:
        command += ["--policy", os.fspath(policy)]
    return command + list(args)

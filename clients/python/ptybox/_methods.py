"""Each contract method once: its wire name, its params as the wire spells them, and its result
type. The sync client (client.py) and the asyncio client (aio.py) both call these, so the two
cannot disagree on a parameter's name. Parameters left as None are not sent: the server applies
its defaults (docs/protocol.md, "Methods")."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Sequence

from . import types as t


@dataclass(frozen=True)
class Request:
    method: str
    params: dict[str, Any]
    result: type  # the dataclass the result decodes to


def _params(**values: Any) -> dict[str, Any]:
    return {t.wire_name(k): v for k, v in values.items() if v is not None}


def terminal_open(type: str | None, name: str | None, cwd: str | None, cols: int | None,
                  rows: int | None, env: dict[str, str] | None, timeout_ms: int | None) -> Request:
    return Request("terminal_open",
                   _params(type=type, name=name, cwd=cwd, cols=cols, rows=rows, env=env,
                           timeout_ms=timeout_ms), t.OpenResult)


def terminal_send(session_id: str, input: str | None, keys: Sequence[str] | None,
                  timeout_ms: int | None, silence_ms: int | None, pattern: str | None,
                  background: bool) -> Request:
    # Exactly one of input and keys: the server says so (InvalidParams) when not.
    return Request("terminal_send",
                   _params(session_id=session_id, input=input,
                           keys=list(keys) if keys is not None else None, timeout_ms=timeout_ms,
                           silence_ms=silence_ms, pattern=pattern, background=background or None),
                   t.OperationStarted if background else t.SendResult)


def terminal_wait(session_id: str, timeout_ms: int | None, silence_ms: int | None,
                  pattern: str | None) -> Request:
    return Request("terminal_wait",
                   _params(session_id=session_id, timeout_ms=timeout_ms, silence_ms=silence_ms,
                           pattern=pattern), t.SendResult)


def terminal_output(session_id: str) -> Request:
    return Request("terminal_output", _params(session_id=session_id), t.OutputResult)


def terminal_cancel(session_id: str) -> Request:
    return Request("terminal_cancel", _params(session_id=session_id), t.CancelResult)


def terminal_read(session_id: str, cursor: int | None, max_bytes: int | None,
                  view: str | None) -> Request:
    return Request("terminal_read",
                   _params(session_id=session_id, cursor=cursor, max_bytes=max_bytes, view=view),
                   t.ReadResult)


def terminal_signal(session_id: str, signal: str) -> Request:
    return Request("terminal_signal", _params(session_id=session_id, signal=signal), t.SignalResult)


def terminal_status(session_id: str) -> Request:
    return Request("terminal_status", _params(session_id=session_id), t.StatusResult)


def terminal_close(session_id: str, reason: str | None) -> Request:
    return Request("terminal_close", _params(session_id=session_id, reason=reason), t.CloseResult)


def terminal_list() -> Request:
    return Request("terminal_list", {}, t.ListResult)


def policy_resolve() -> Request:
    return Request("policy_resolve", {}, t.PolicyResult)


def policy_set_mode(mode: str) -> Request:
    return Request("policy_set_mode", _params(mode=mode), t.ModeResult)


def terminal_resize(session_id: str, cols: int, rows: int) -> Request:
    return Request("terminal_resize", _params(session_id=session_id, cols=cols, rows=rows),
                   t.ResizeResult)


def owner_info() -> Request:
    return Request("owner_info", {}, t.OwnerInfo)


def owner_attach(owner_token: str) -> Request:
    return Request("owner_attach", _params(owner_token=owner_token), t.AttachResult)


# Watching a session (docs/protocol.md, "Watching a session"): JSON-RPC only, no MCP tool.


def owner_sessions(owner_token: str) -> Request:
    return Request("owner_sessions", _params(owner_token=owner_token), t.ListResult)


def terminal_watch(session_id: str, owner_token: str | None) -> Request:
    return Request("terminal_watch", _params(session_id=session_id, owner_token=owner_token),
                   t.WatchResult)


def terminal_unwatch(watch_id: int) -> Request:
    return Request("terminal_unwatch", _params(watch_id=watch_id), t.UnwatchResult)


def terminal_takeover(watch_id: int) -> Request:
    return Request("terminal_takeover", _params(watch_id=watch_id), t.TakeoverResult)


def terminal_type(watch_id: int, data: bytes | str) -> Request:
    # The wire carries bytes as base64; text is sent as its UTF-8.
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return Request("terminal_type",
                   _params(watch_id=watch_id, data=base64.b64encode(raw).decode("ascii")),
                   t.TypeResult)


def terminal_release(watch_id: int) -> Request:
    return Request("terminal_release", _params(watch_id=watch_id), t.ReleaseResult)


# Every contract method this package implements, in the contract's order. Both clients have a
# method of each name; tests/clients check this list against the daemon's own table.
METHODS: tuple[str, ...] = (
    "terminal_open", "terminal_send", "terminal_wait", "terminal_output", "terminal_cancel",
    "terminal_read", "terminal_signal", "terminal_status", "terminal_close", "terminal_list",
    "policy_resolve", "policy_set_mode", "terminal_resize", "owner_info", "owner_attach",
    "owner_sessions", "terminal_watch", "terminal_unwatch", "terminal_takeover", "terminal_type",
    "terminal_release",
)

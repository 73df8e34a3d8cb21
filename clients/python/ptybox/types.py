"""The contract's result types (docs/protocol.md, "Types" and "Methods") as frozen dataclasses.

Field names are the wire's in snake_case (`sessionId` -> `session_id`); `decode` builds them
from a result and checks every field's JSON type, so a result of the wrong shape is a
ProtocolError naming the method and the field, never a KeyError later. Enumerations
(`WaitReason`, `Mode`, ...) are checked as strings only: a value a newer server adds reaches the
caller as is instead of failing the call."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ProtocolError

WaitReason = Literal["stdin_read", "inferred_idle", "timeout", "session_exit", "pattern"]
Mode = Literal["read-only", "workspace-write", "danger-full-access"]
Signal = Literal["SIGINT", "SIGTERM", "SIGKILL", "SIGQUIT", "SIGHUP", "SIGTSTP", "SIGCONT"]


@dataclass(frozen=True)
class SessionStatus:
    """`{"kind": "running"}` or `{"kind": "exited", "exitCode", "signal"}`."""

    kind: Literal["running", "exited"]
    exit_code: int | None = None
    signal: str | None = None  # "SIGHUP"-style

    @property
    def running(self) -> bool:
        return self.kind == "running"


@dataclass(frozen=True)
class Foreground:
    """What holds the terminal when a send did not settle at the prompt (v1.2)."""

    pgid: int
    command: str


@dataclass(frozen=True)
class Match:
    """What a `pattern` matched (v1.2)."""

    text: str
    line: str


@dataclass(frozen=True)
class SendResult:
    """terminal_send (foreground) and terminal_wait."""

    viewport: str
    wait_reason: WaitReason
    session_status: SessionStatus
    truncated: bool
    exit_code: int | None
    cwd: str | None
    foreground: Foreground | None = None
    match: Match | None = None


@dataclass(frozen=True)
class OperationStarted:
    """terminal_send with `background=True`: collect with terminal_output."""

    operation_id: str


@dataclass(frozen=True)
class OpenResult:
    session_id: str
    name: str
    motd: str
    pid: int | None
    mode: Mode
    cwd: str


@dataclass(frozen=True)
class OutputResult:
    """terminal_output: output since the previous call; `result` once `done`."""

    output: str
    done: bool
    result: SendResult | None
    truncated: bool = False
    # Where `output` starts in the scrollback (a terminal_read cursor), when the server knows.
    output_cursor: int | None = None


@dataclass(frozen=True)
class CancelResult:
    canceled: bool


@dataclass(frozen=True)
class ReadResult:
    text: str
    cursor: int
    next_cursor: int
    truncated: bool
    end: bool


@dataclass(frozen=True)
class SignalResult:
    delivered: bool
    pgid: int


@dataclass(frozen=True)
class StatusResult:
    session_status: SessionStatus
    busy: bool
    name: str
    mode: Mode
    pid: int | None


@dataclass(frozen=True)
class CloseResult:
    session_status: SessionStatus


@dataclass(frozen=True)
class SessionInfo:
    """One entry of terminal_list and owner_attach."""

    session_id: str
    name: str
    mode: Mode
    busy: bool
    session_status: SessionStatus


@dataclass(frozen=True)
class ListResult:
    sessions: list[SessionInfo]


@dataclass(frozen=True)
class PolicySource:
    files: list[str]
    values: dict[str, str]


@dataclass(frozen=True)
class PolicyResult:
    mode: Mode
    workspace_root: str
    writable_roots: list[str]
    network: Literal["allow", "deny"]
    source: PolicySource
    ceiling: Mode | None = None


@dataclass(frozen=True)
class ModeResult:
    mode: Mode


@dataclass(frozen=True)
class ResizeResult:
    cols: int
    rows: int


@dataclass(frozen=True)
class OwnerInfo:
    """owner_info: keep `owner_token` like a password."""

    owner_token: str = field(repr=False)
    detach_grace_ms: int


@dataclass(frozen=True)
class Operation:
    operation_id: str
    session_id: str


@dataclass(frozen=True)
class AttachResult:
    sessions: list[SessionInfo]
    operations: list[Operation]


@dataclass(frozen=True)
class Cursor:
    """A 0-based screen position."""

    row: int
    column: int


@dataclass(frozen=True)
class WatchResult:
    """terminal_watch: the session's screen when the watch began (`lines`: `rows` strings, trailing
    blanks trimmed); every later output byte arrives as a WatchOutput event (docs/protocol.md,
    "Watching a session")."""

    watch_id: int
    session_id: str
    name: str
    mode: Mode
    busy: bool
    session_status: SessionStatus
    cols: int
    rows: int
    lines: list[str]
    cursor: Cursor
    alternate_screen: bool


@dataclass(frozen=True)
class UnwatchResult:
    unwatched: bool


@dataclass(frozen=True)
class TakeoverResult:
    """terminal_takeover: the agent's sends on the session answer Busy until released."""

    held: bool


@dataclass(frozen=True)
class TypeResult:
    typed: bool


@dataclass(frozen=True)
class ReleaseResult:
    released: bool


@dataclass(frozen=True)
class WatchOutput:
    """The notification terminal_watch_output: raw bytes the watched session printed, in order. A
    chunk may end inside a UTF-8 character or an escape sequence: decode the stream, not each
    chunk (codecs.getincrementaldecoder). Everything in it is the session's: hostile text."""

    watch_id: int
    data: bytes


@dataclass(frozen=True)
class WatchEnded:
    """The notification terminal_watch_ended: `reason` is "closed", "slow" or "owner_gone"."""

    watch_id: int
    reason: str
    message: str


@dataclass(frozen=True)
class WatchResized:
    """The notification terminal_watch_resized: the session's terminal took a new size; its
    screen at that size, as terminal_watch gave it (redraw from it). Hostile text, as output."""

    watch_id: int
    cols: int
    rows: int
    lines: list[str]
    cursor: Cursor
    alternate_screen: bool


WatchEvent = WatchOutput | WatchEnded | WatchResized


def watch_event(method: str, params: Any) -> WatchEvent | None:
    """A notification as a WatchEvent; None for a notification this client does not know (a
    newer server's). A malformed one is a ProtocolError naming it."""
    if method == "terminal_watch_output":
        raw = _decode(_WatchOutputWire, params, method, "params")
        try:
            data = base64.b64decode(raw.data, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError(f"{method}: params.data is not base64") from None
        return WatchOutput(raw.watch_id, data)
    if method == "terminal_watch_ended":
        return _decode(WatchEnded, params, method, "params")
    if method == "terminal_watch_resized":
        return _decode(WatchResized, params, method, "params")
    return None


@dataclass(frozen=True)
class _WatchOutputWire:
    watch_id: int
    data: str


def wire_name(name: str) -> str:
    """`session_id` -> `sessionId`: the wire's name of a dataclass field."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_T = typing.TypeVar("_T")


def decode(cls: type[_T], value: Any, method: str) -> _T:
    """`value` (a parsed JSON result) as `cls`, or ProtocolError naming `method` and the field."""
    return _decode(cls, value, method, "result")


def _fail(method: str, where: str, expected: str, value: Any) -> ProtocolError:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return ProtocolError(f"{method}: {where} should be {expected}, the server sent {shown}")


def _decode(tp: Any, value: Any, method: str, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is types.UnionType or origin is typing.Union:
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        (inner,) = [option for option in options if option is not type(None)]
        return _decode(inner, value, method, where)
    if origin is Literal:
        # Checked as a string only: see the module's comment.
        if not isinstance(value, str):
            return _fail_raise(method, where, "a string", value)
        return value
    if origin is list:
        if not isinstance(value, list):
            return _fail_raise(method, where, "a list", value)
        (item,) = typing.get_args(tp)
        return [_decode(item, v, method, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            return _fail_raise(method, where, "an object", value)
        _, item = typing.get_args(tp)
        return {k: _decode(item, v, method, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            return _fail_raise(method, where, "an object", value)
        hints = typing.get_type_hints(tp)
        args = {}
        for f in dataclasses.fields(tp):
            key = wire_name(f.name)
            if key not in value:
                has_default = f.default is not dataclasses.MISSING
                if has_default:
                    continue
                raise ProtocolError(f"{method}: {where}.{key} is missing")
            args[f.name] = _decode(hints[f.name], value[key], method, f"{where}.{key}")
        return tp(**args)
    if tp is bool:
        if not isinstance(value, bool):
            return _fail_raise(method, where, "a boolean", value)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return _fail_raise(method, where, "an integer", value)
        return value
    if tp is str:
        if not isinstance(value, str):
            return _fail_raise(method, where, "a string", value)
        return value
    raise TypeError(f"ptybox.types cannot decode {tp!r}")  # a bug in this module's types


def _fail_raise(method: str, where: str, expected: str, value: Any) -> typing.NoReturn:
    raise _fail(method, where, expected, value)

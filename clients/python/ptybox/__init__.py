"""Typed clients for ptybox, the runtime of persistent sandboxed terminals for AI agents
(docs/clients.md, docs/protocol.md). Standard library only.

    from ptybox import Client
    with Client.spawn("ptybox") as c:                 # or Client.connect(SOCKET_PATH)
        s = c.terminal_open(name="demo").session_id
        r = c.terminal_send(s, "echo hi\\n")
        print(r.viewport, r.wait_reason, r.exit_code)  # hi stdin_read 0

ptybox.aio.AsyncClient is the asyncio twin, with requests in flight concurrently."""

from ._methods import METHODS
from .aio import AsyncClient
from .client import Client
from .errors import (
    ERROR_CLASSES,
    ApplicationError,
    Busy,
    Canceled,
    CleanupFailed,
    Closed,
    ConnectionClosed,
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ModeFenced,
    NameTaken,
    NotFound,
    ParseError,
    PolicyDenied,
    PolicyError,
    ProtocolError,
    PtyboxError,
    RpcError,
    SandboxUnavailable,
    SpawnFailed,
    StartupTimeout,
)
from .types import (
    AttachResult,
    CancelResult,
    CloseResult,
    Cursor,
    Foreground,
    ListResult,
    Match,
    ModeResult,
    OpenResult,
    Operation,
    OperationStarted,
    OutputResult,
    OwnerInfo,
    PolicyResult,
    PolicySource,
    ReadResult,
    ReleaseResult,
    ResizeResult,
    SendResult,
    SessionInfo,
    SessionStatus,
    SignalResult,
    StatusResult,
    TakeoverResult,
    TypeResult,
    UnwatchResult,
    WatchEnded,
    WatchEvent,
    WatchResized,
    WatchOutput,
    WatchResult,
)

from types import ModuleType as _ModuleType

__all__ = [n for n, v in dict(globals()).items() if not n.startswith("_") and not isinstance(v, _ModuleType)]

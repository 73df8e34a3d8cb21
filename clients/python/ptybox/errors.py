"""Errors: one exception class per JSON-RPC error code and per `error.data.kind` of the contract
(docs/protocol.md, "Errors"), so a caller catches `NotFound` or `Busy` rather than comparing
strings. Everything the server sends is kept (`code`, `message`, `data`); the message is the
server's sentence, which says what to do."""

from __future__ import annotations

from typing import Any


class PtyboxError(Exception):
    """Base of every error this package raises."""


class ConnectionClosed(PtyboxError):
    """The server closed the connection (or exited) before answering."""


class ProtocolError(PtyboxError):
    """The server sent something the contract does not allow (not JSON, a result of the wrong
    shape). Names the method and the field."""


class RpcError(PtyboxError):
    """A JSON-RPC error response. `method` is the request's method, `code` the JSON-RPC code,
    `message` the server's sentence, `data` its `error.data` object (`kind`, `context`, ...)."""

    code: int = 0

    def __init__(self, method: str, code: int, message: str, data: dict[str, Any] | None):
        super().__init__(f"{method}: {message}")
        self.method = method
        self.code = code
        self.message = message
        self.data: dict[str, Any] = data or {}

    @property
    def kind(self) -> str | None:
        """`error.data.kind` (`not_found`, `busy`, ..., `invalid_params`), when the server gave one."""
        kind = self.data.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def context(self) -> str | None:
        """`error.data.context`: the parameter, path or key the error is about, when there is one."""
        context = self.data.get("context")
        return context if isinstance(context, str) else None


class ParseError(RpcError):
    """-32700: the line the server read was not JSON."""

    code = -32700


class InvalidRequest(RpcError):
    """-32600: not a valid request (nesting, id bounds, owner_attach after an open, ...)."""

    code = -32600


class MethodNotFound(RpcError):
    """-32601: the server does not know the method."""

    code = -32601


class InvalidParams(RpcError):
    """-32602: a parameter is missing, unknown, of the wrong type or out of bounds (`context`
    names it)."""

    code = -32602


class InternalError(RpcError):
    """-32603: the server failed unexpectedly on this one request (a bug worth reporting)."""

    code = -32603


class ApplicationError(RpcError):
    """-32000: an application error; its subclass is `error.data.kind`. A kind this client does
    not know yet is raised as ApplicationError itself, with `kind` set."""

    code = -32000


class NotFound(ApplicationError):
    """Unknown session id (or another owner's), or no detached owner with that token."""


class Busy(ApplicationError):
    """A send is already active on the session, the owner is attached elsewhere, or the daemon
    serves all the connections it may."""


class ModeFenced(ApplicationError):
    """A mode change while sessions are open or opening."""


class SpawnFailed(ApplicationError):
    """The shell could not start."""


class StartupTimeout(ApplicationError):
    """No prompt within the startup deadline; nothing is left running."""


class PolicyError(ApplicationError):
    """A policy file is invalid (`file:line:column: key: message`)."""


class PolicyDenied(ApplicationError):
    """The request exceeds the policy (mode above the ceiling, cwd outside, too many sessions)."""


class SandboxUnavailable(ApplicationError):
    """This host cannot sandbox; the message names the cause and the fix."""


class Closed(ApplicationError):
    """The session exited or is closing."""


class CleanupFailed(ApplicationError):
    """Processes of the session did not end; retry terminal_close."""


class Canceled(ApplicationError):
    """The request was cancelled; `data["reason"]` is the caller's reason."""


class NameTaken(ApplicationError):
    """This owner already has a session of that name; `data.get("sessionId")` names it."""


# error.data.kind -> class, for every kind of the contract's error table.
ERROR_CLASSES: dict[str, type[ApplicationError]] = {
    "not_found": NotFound,
    "busy": Busy,
    "mode_fenced": ModeFenced,
    "spawn_failed": SpawnFailed,
    "startup_timeout": StartupTimeout,
    "policy_error": PolicyError,
    "policy_denied": PolicyDenied,
    "sandbox_unavailable": SandboxUnavailable,
    "closed": Closed,
    "cleanup_failed": CleanupFailed,
    "canceled": Canceled,
    "name_taken": NameTaken,
}

_STANDARD: dict[int, type[RpcError]] = {
    cls.code: cls for cls in (ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError)
}


def error_from_response(method: str, error: Any) -> PtyboxError:
    """The exception for one JSON-RPC `error` member (already parsed JSON)."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return ProtocolError(f"{method}: the server answered an error without an integer code: {error!r:.200}")
    code = error["code"]
    message = error.get("message")
    message = message if isinstance(message, str) else "(the server gave no message)"
    data = error.get("data")
    data = data if isinstance(data, dict) else None
    if code == ApplicationError.code:
        kind = (data or {}).get("kind")
        cls: type[RpcError] = ERROR_CLASSES.get(kind, ApplicationError) if isinstance(kind, str) else ApplicationError
    else:
        cls = _STANDARD.get(code, RpcError)
    err = cls(method, code, message, data)
    err.code = code
    return err

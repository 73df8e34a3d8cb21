"""The synchronous client: one request at a time (a lock serializes threads sharing it). For
requests in flight concurrently (a long send on one session while reading another), use
ptybox.aio.AsyncClient.

    with Client.connect("/run/user/1000/ptybox/ptybox.sock") as c:   # serve --socket
        s = c.terminal_open(name="build").session_id
        print(c.terminal_send(s, "make\\n").viewport)

    with Client.spawn("ptybox", workspace=".") as c:                   # serve --stdio
        ..."""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import threading
from typing import IO, Any, Iterator, Literal, Sequence, overload

from . import _methods as m
from . import _wire as wire
from . import types as t
from .errors import ConnectionClosed, ProtocolError


class Client:
    """A connection to a ptybox daemon. It is one owner: the sessions it opens are its own and
    are closed when it disconnects, unless the operator gave owners a detach grace (then
    `owner_info()` gives the token a later connection passes to `connect(owner_token=...)`)."""

    def __init__(self, reader: IO[bytes], writer: IO[bytes] | socket.socket,
                 process: subprocess.Popen[bytes] | None = None, sock: socket.socket | None = None):
        """Use connect() or spawn()."""
        self._reader = reader
        self._writer = writer
        self._process = process
        self._socket = sock
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self.attached: t.AttachResult | None = None  # owner_attach's result, from connect()
        # Watch events read while waiting for an answer, kept for next_watch_event(). Unbounded
        # here: the daemon drops a watcher that falls 1 MiB behind, so read them while watching.
        self._events: collections.deque[t.WatchEvent] = collections.deque()

    @classmethod
    def connect(cls, socket_path: str | os.PathLike[str], *, owner_token: str | None = None) -> Client:
        """Connects to `ptybox serve --socket PATH`. With `owner_token`, first attaches to the
        detached owner that has it (owner_attach; `attached` holds its sessions and operations)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(os.fspath(socket_path))
        except OSError as e:
            sock.close()
            raise ConnectionClosed(
                f"cannot connect to the ptybox daemon at {os.fspath(socket_path)}: {e.strerror}; "
                "start it with `ptybox serve --socket PATH` or check the path") from e
        client = cls(sock.makefile("rb"), sock, sock=sock)
        if owner_token is not None:
            try:
                client.attached = client.owner_attach(owner_token)
            except BaseException:
                client.close()
                raise
        return client

    @classmethod
    def spawn(cls, ptybox: str | os.PathLike[str] = "ptybox", *,
              workspace: str | os.PathLike[str] | None = None,
              policy: str | os.PathLike[str] | None = None, args: Sequence[str] = (),
              stderr: int | IO[Any] | None = None) -> Client:
        """Starts `ptybox serve --stdio` and talks to it over its standard input and output. Its
        standard error (logs) goes to `stderr` (default: this process's)."""
        command = wire.serve_command(ptybox, workspace, policy, args)
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=stderr)
        except OSError as e:
            raise ConnectionClosed(f"cannot start {command[0]}: {e.strerror}; pass the path of "
                                   "the ptybox binary as spawn(ptybox=...)") from e
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin, process=process)

    def close(self) -> int | None:
        """Ends the connection; the daemon closes this owner's sessions (unless detached). For a
        spawned server: closes its input and waits for it to exit, returning its exit status."""
        if self._closed:
            return self._process.returncode if self._process else None
        self._closed = True
        if self._socket is not None:
            self._reader.close()
            self._socket.close()
            return None
        assert self._process is not None
        try:
            self._writer.close()
        except OSError:
            pass  # the server is gone already: wait() reports how it ended
        status = self._process.wait()
        self._reader.close()
        return status

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any method by its wire name, with wire params; returns the result as parsed JSON."""
        return self._call(m.Request(method, params or {}, Any))  # type: ignore[arg-type]

    def _call(self, request: m.Request) -> Any:
        with self._lock:
            if self._closed:
                raise ConnectionClosed(f"{request.method}: this client is closed")
            self._next_id += 1
            request_id = self._next_id
            line = wire.request_line(request_id, request.method, request.params)
            try:
                if isinstance(self._writer, socket.socket):
                    self._writer.sendall(line)
                else:
                    self._writer.write(line)
                    self._writer.flush()
            except OSError as e:
                raise wire.closed_error(request.method, f" ({e.strerror})") from e
            while True:
                message = self._read_message(request.method)
                if message is not None and message.get("id") == request_id:
                    return wire.outcome(request.method, message, request.result)
                # A notification (queued), or an answer to no request of ours (a cancelled
                # one's late reply): read on.

    def _read_message(self, method: str) -> dict[str, Any] | None:
        """The next line: an answer, or None for a notification (a watch event is queued in
        self._events). The caller holds the lock."""
        answer = self._reader.readline(wire.MAX_LINE_BYTES + 1)
        if not answer:
            raise wire.closed_error(method, self._exit_detail())
        if len(answer) > wire.MAX_LINE_BYTES:
            raise ProtocolError(f"{method}: an answer longer than {wire.MAX_LINE_BYTES} bytes")
        message = wire.parse_line(answer)
        if (stray := wire.stray_error(message)) is not None:
            raise stray
        if "id" not in message:
            if (event := wire.notification(message)) is not None:
                self._events.append(event)
            return None
        return message

    def next_watch_event(self) -> t.WatchEvent:
        """The next event of this connection's watches (terminal_watch), in the order the server
        sent them: a WatchOutput (bytes the session printed) or a WatchEnded. Blocks until one
        arrives (holding the client: other threads' calls wait); raises ConnectionClosed when
        the connection ends first."""
        with self._lock:
            if self._closed:
                raise ConnectionClosed("next_watch_event: this client is closed")
            while not self._events:
                self._read_message("next_watch_event")  # an answer here is a late one: skip it
            return self._events.popleft()

    def watch_events(self) -> Iterator[t.WatchEvent]:
        """next_watch_event() forever: `for event in c.watch_events(): ...` (break to stop)."""
        while True:
            yield self.next_watch_event()

    def _exit_detail(self) -> str:
        if self._process is None:
            return ""
        status = self._process.poll()
        return "" if status is None else f" (ptybox serve exited with status {status})"

    # --- the contract's methods (docs/protocol.md, "Methods"), named as on the wire ---

    def terminal_open(self, *, type: str | None = None, name: str | None = None,
                      cwd: str | None = None, cols: int | None = None, rows: int | None = None,
                      env: dict[str, str] | None = None,
                      timeout_ms: int | None = None) -> t.OpenResult:
        return self._call(m.terminal_open(type, name, cwd, cols, rows, env, timeout_ms))

    @overload
    def terminal_send(self, session_id: str, input: str | None = None, *,
                      keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                      silence_ms: int | None = None, pattern: str | None = None,
                      background: Literal[False] = False) -> t.SendResult: ...

    @overload
    def terminal_send(self, session_id: str, input: str | None = None, *,
                      keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                      silence_ms: int | None = None, pattern: str | None = None,
                      background: Literal[True]) -> t.OperationStarted: ...

    def terminal_send(self, session_id: str, input: str | None = None, *,
                      keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                      silence_ms: int | None = None, pattern: str | None = None,
                      background: bool = False) -> t.SendResult | t.OperationStarted:
        """Writes `input` verbatim (end it with "\\n" to press Enter), or presses `keys`, and
        waits for readiness. With background=True returns at once (collect: terminal_output)."""
        return self._call(m.terminal_send(session_id, input, keys, timeout_ms, silence_ms,
                                          pattern, background))

    def terminal_wait(self, session_id: str, *, timeout_ms: int | None = None,
                      silence_ms: int | None = None, pattern: str | None = None) -> t.SendResult:
        return self._call(m.terminal_wait(session_id, timeout_ms, silence_ms, pattern))

    def terminal_output(self, session_id: str) -> t.OutputResult:
        return self._call(m.terminal_output(session_id))

    def terminal_cancel(self, session_id: str) -> t.CancelResult:
        return self._call(m.terminal_cancel(session_id))

    def terminal_read(self, session_id: str, *, cursor: int | None = None,
                      max_bytes: int | None = None,
                      view: Literal["lines", "screen"] | None = None) -> t.ReadResult:
        return self._call(m.terminal_read(session_id, cursor, max_bytes, view))

    def terminal_signal(self, session_id: str, signal: t.Signal) -> t.SignalResult:
        return self._call(m.terminal_signal(session_id, signal))

    def terminal_status(self, session_id: str) -> t.StatusResult:
        return self._call(m.terminal_status(session_id))

    def terminal_close(self, session_id: str, *, reason: str | None = None) -> t.CloseResult:
        return self._call(m.terminal_close(session_id, reason))

    def terminal_list(self) -> t.ListResult:
        return self._call(m.terminal_list())

    def policy_resolve(self) -> t.PolicyResult:
        return self._call(m.policy_resolve())

    def policy_set_mode(self, mode: t.Mode) -> t.ModeResult:
        return self._call(m.policy_set_mode(mode))

    def terminal_resize(self, session_id: str, cols: int, rows: int) -> t.ResizeResult:
        return self._call(m.terminal_resize(session_id, cols, rows))

    def owner_info(self) -> t.OwnerInfo:
        return self._call(m.owner_info())

    def owner_attach(self, owner_token: str) -> t.AttachResult:
        """Only as the first call of a connection; connect(owner_token=...) does it for you."""
        return self._call(m.owner_attach(owner_token))

    # --- watching a session (docs/protocol.md, "Watching a session"): events arrive through
    # next_watch_event() ---

    def owner_sessions(self, owner_token: str) -> t.ListResult:
        """The sessions of the owner holding `owner_token` (owner_info), live or detached."""
        return self._call(m.owner_sessions(owner_token))

    def terminal_watch(self, session_id: str, *, owner_token: str | None = None) -> t.WatchResult:
        """The session's screen now; its later output arrives as WatchOutput events. A session
        of another owner needs that owner's token."""
        return self._call(m.terminal_watch(session_id, owner_token))

    def terminal_unwatch(self, watch_id: int) -> t.UnwatchResult:
        return self._call(m.terminal_unwatch(watch_id))

    def terminal_takeover(self, watch_id: int) -> t.TakeoverResult:
        """The agent's sends on the watched session answer Busy until terminal_release."""
        return self._call(m.terminal_takeover(watch_id))

    def terminal_type(self, watch_id: int, data: bytes | str) -> t.TypeResult:
        """Writes keystrokes (text as UTF-8) to the session this watch holds, as they are."""
        return self._call(m.terminal_type(watch_id, data))

    def terminal_release(self, watch_id: int) -> t.ReleaseResult:
        return self._call(m.terminal_release(watch_id))

"""The asyncio client: requests run concurrently on one connection, as the contract allows (a
long send on session A does not delay a read of session B); answers are matched by id.
Cancelling the task awaiting a call sends `$/cancelRequest` for it: a cancelled send is then
`terminal_cancel` on its session, a cancelled open closes its unpublished shell.

    async with await AsyncClient.connect(path) as c:
        s = (await c.terminal_open(name="build")).session_id
        build, tests = await asyncio.gather(c.terminal_send(s, "make\\n"), ...)"""

from __future__ import annotations

import asyncio
import os
from typing import Any, AsyncIterator, Literal, Sequence, overload

from . import _methods as m
from . import _wire as wire
from . import types as t
from .errors import ConnectionClosed, ProtocolError, PtyboxError


class AsyncClient:
    """A connection to a ptybox daemon, one owner (see ptybox.Client)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 process: asyncio.subprocess.Process | None = None):
        """Use connect() or spawn()."""
        self._reader = reader
        self._writer = writer
        self._process = process
        self._pending: dict[int, tuple[m.Request, asyncio.Future[Any]]] = {}
        self._next_id = 0
        self._write_lock = asyncio.Lock()
        self._failure: PtyboxError | None = None
        self._closed = False
        # Watch events, in the order the server sent them; None once the connection ended.
        # Unbounded here: the daemon drops a watcher that falls 1 MiB behind, so consume them.
        self._events: asyncio.Queue[t.WatchEvent | None] = asyncio.Queue()
        self._reading = asyncio.get_running_loop().create_task(self._read_answers())
        self.attached: t.AttachResult | None = None

    @classmethod
    async def connect(cls, socket_path: str | os.PathLike[str], *,
                      owner_token: str | None = None) -> AsyncClient:
        """Connects to `ptybox serve --socket PATH` (and attaches with `owner_token`)."""
        try:
            reader, writer = await asyncio.open_unix_connection(os.fspath(socket_path),
                                                                limit=wire.MAX_LINE_BYTES)
        except OSError as e:
            raise ConnectionClosed(
                f"cannot connect to the ptybox daemon at {os.fspath(socket_path)}: {e.strerror}; "
                "start it with `ptybox serve --socket PATH` or check the path") from e
        client = cls(reader, writer)
        if owner_token is not None:
            try:
                client.attached = await client.owner_attach(owner_token)
            except BaseException:
                await client.close()
                raise
        return client

    @classmethod
    async def spawn(cls, ptybox: str | os.PathLike[str] = "ptybox", *,
                    workspace: str | os.PathLike[str] | None = None,
                    policy: str | os.PathLike[str] | None = None, args: Sequence[str] = (),
                    stderr: Any = None) -> AsyncClient:
        """Starts `ptybox serve --stdio` and talks to it over its standard input and output."""
        command = wire.serve_command(ptybox, workspace, policy, args)
        try:
            process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=stderr, limit=wire.MAX_LINE_BYTES)
        except OSError as e:
            raise ConnectionClosed(f"cannot start {command[0]}: {e.strerror}; pass the path of "
                                   "the ptybox binary as spawn(ptybox=...)") from e
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin, process)

    async def close(self) -> int | None:
        """Ends the connection (a spawned server: closes its input, awaits its exit status)."""
        if not self._closed:
            self._closed = True
            if self._process is not None:
                self._writer.close()
                status = await self._process.wait()
                await self._reading
                return status
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass  # the daemon went first
            self._reading.cancel()
            try:
                await self._reading
            except asyncio.CancelledError:
                pass
            self._events.put_nowait(None)  # a cancelled reader did not: end watch_events()
        return self._process.returncode if self._process else None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any method by its wire name, with wire params; returns the result as parsed JSON."""
        return await self._call(m.Request(method, params or {}, Any))  # type: ignore[arg-type]

    async def _call(self, request: m.Request) -> Any:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise ConnectionClosed(f"{request.method}: this client is closed")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (request, future)
        try:
            await self._write(wire.request_line(request_id, request.method, request.params))
            return await future
        except asyncio.CancelledError:
            if request_id in self._pending and self._failure is None and not self._closed:
                # Tell the server, without waiting for it: its `canceled` answer is dropped.
                asyncio.get_running_loop().create_task(
                    self._notify(wire.cancel_line(request_id, "the client's task was cancelled")))
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _write(self, line: bytes) -> None:
        async with self._write_lock:
            try:
                self._writer.write(line)
                await self._writer.drain()
            except (OSError, RuntimeError) as e:  # RuntimeError: the transport is closing
                raise self._failure or ConnectionClosed(
                    f"the connection to the server is closed ({e})") from e

    async def _notify(self, line: bytes) -> None:
        """A notification nobody awaits: a connection that ended meanwhile has nothing to cancel."""
        try:
            await self._write(line)
        except PtyboxError:
            pass

    async def _read_answers(self) -> None:
        failure: PtyboxError
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    failure = wire.closed_error("(connection)", await self._exit_detail())
                    break
                message = wire.parse_line(line)
                if (stray := wire.stray_error(message)) is not None:
                    failure = stray
                    break
                if "id" not in message:
                    if (event := wire.notification(message)) is not None:
                        self._events.put_nowait(event)
                    continue
                key = message.get("id")
                pending = self._pending.get(key) if isinstance(key, int) else None
                if pending is None:
                    continue  # a cancelled request's late answer
                request, future = pending
                if future.done():
                    continue
                try:
                    future.set_result(wire.outcome(request.method, message, request.result))
                except PtyboxError as e:
                    # Without this task's frame: a caller that clears the frames of a
                    # traceback it caught (unittest's assertRaises does) would otherwise end
                    # this reader, suspended in one of them.
                    future.set_exception(e.with_traceback(None))
        except (PtyboxError, ValueError) as e:  # ValueError: a line over the limit
            failure = e if isinstance(e, PtyboxError) else ConnectionClosed(str(e))
        except OSError as e:
            failure = ConnectionClosed(f"the connection to the server failed: {e.strerror}")
        except Exception as e:  # a bug here must fail the calls, not leave them waiting
            failure = ProtocolError(f"reading the server's answers failed: {e!r}")
        # Every request still waiting fails with why the connection ended.
        self._failure = failure.with_traceback(None)
        self._events.put_nowait(None)
        for request, future in list(self._pending.values()):
            if not future.done():
                future.set_exception(self._failure)

    async def next_watch_event(self) -> t.WatchEvent:
        """The next event of this connection's watches (terminal_watch), in the order the server
        sent them: a WatchOutput or a WatchEnded; raises why the connection ended, when it did."""
        event = await self._events.get()
        if event is None:
            self._events.put_nowait(None)  # for the next caller too
            raise self._failure or ConnectionClosed("next_watch_event: the connection ended")
        return event

    async def watch_events(self) -> AsyncIterator[t.WatchEvent]:
        """`async for event in c.watch_events():` every watch event until the connection ends
        (then the iteration stops; break to stop earlier)."""
        while True:
            try:
                yield await self.next_watch_event()
            except PtyboxError:
                return

    async def _exit_detail(self) -> str:
        if self._process is None:
            return ""
        status = self._process.returncode
        return "" if status is None else f" (ptybox serve exited with status {status})"

    # --- the contract's methods (docs/protocol.md, "Methods"), named as on the wire ---

    async def terminal_open(self, *, type: str | None = None, name: str | None = None,
                            cwd: str | None = None, cols: int | None = None,
                            rows: int | None = None, env: dict[str, str] | None = None,
                            timeout_ms: int | None = None) -> t.OpenResult:
        return await self._call(m.terminal_open(type, name, cwd, cols, rows, env, timeout_ms))

    @overload
    async def terminal_send(self, session_id: str, input: str | None = None, *,
                            keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                            silence_ms: int | None = None, pattern: str | None = None,
                            background: Literal[False] = False) -> t.SendResult: ...

    @overload
    async def terminal_send(self, session_id: str, input: str | None = None, *,
                            keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                            silence_ms: int | None = None, pattern: str | None = None,
                            background: Literal[True]) -> t.OperationStarted: ...

    async def terminal_send(self, session_id: str, input: str | None = None, *,
                            keys: Sequence[str] | None = None, timeout_ms: int | None = None,
                            silence_ms: int | None = None, pattern: str | None = None,
                            background: bool = False) -> t.SendResult | t.OperationStarted:
        return await self._call(m.terminal_send(session_id, input, keys, timeout_ms, silence_ms,
                                                pattern, background))

    async def terminal_wait(self, session_id: str, *, timeout_ms: int | None = None,
                            silence_ms: int | None = None,
                            pattern: str | None = None) -> t.SendResult:
        return await self._call(m.terminal_wait(session_id, timeout_ms, silence_ms, pattern))

    async def terminal_output(self, session_id: str) -> t.OutputResult:
        return await self._call(m.terminal_output(session_id))

    async def terminal_cancel(self, session_id: str) -> t.CancelResult:
        return await self._call(m.terminal_cancel(session_id))

    async def terminal_read(self, session_id: str, *, cursor: int | None = None,
                            max_bytes: int | None = None,
                            view: Literal["lines", "screen"] | None = None) -> t.ReadResult:
        return await self._call(m.terminal_read(session_id, cursor, max_bytes, view))

    async def terminal_signal(self, session_id: str, signal: t.Signal) -> t.SignalResult:
        return await self._call(m.terminal_signal(session_id, signal))

    async def terminal_status(self, session_id: str) -> t.StatusResult:
        return await self._call(m.terminal_status(session_id))

    async def terminal_close(self, session_id: str, *, reason: str | None = None) -> t.CloseResult:
        return await self._call(m.terminal_close(session_id, reason))

    async def terminal_list(self) -> t.ListResult:
        return await self._call(m.terminal_list())

    async def policy_resolve(self) -> t.PolicyResult:
        return await self._call(m.policy_resolve())

    async def policy_set_mode(self, mode: t.Mode) -> t.ModeResult:
        return await self._call(m.policy_set_mode(mode))

    async def terminal_resize(self, session_id: str, cols: int, rows: int) -> t.ResizeResult:
        return await self._call(m.terminal_resize(session_id, cols, rows))

    async def owner_info(self) -> t.OwnerInfo:
        return await self._call(m.owner_info())

    async def owner_attach(self, owner_token: str) -> t.AttachResult:
        return await self._call(m.owner_attach(owner_token))

    # --- watching a session (docs/protocol.md, "Watching a session"): events arrive through
    # watch_events() / next_watch_event() ---

    async def owner_sessions(self, owner_token: str) -> t.ListResult:
        return await self._call(m.owner_sessions(owner_token))

    async def terminal_watch(self, session_id: str, *,
                             owner_token: str | None = None) -> t.WatchResult:
        return await self._call(m.terminal_watch(session_id, owner_token))

    async def terminal_unwatch(self, watch_id: int) -> t.UnwatchResult:
        return await self._call(m.terminal_unwatch(watch_id))

    async def terminal_takeover(self, watch_id: int) -> t.TakeoverResult:
        return await self._call(m.terminal_takeover(watch_id))

    async def terminal_type(self, watch_id: int, data: bytes | str) -> t.TypeResult:
        return await self._call(m.terminal_type(watch_id, data))

    async def terminal_release(self, watch_id: int) -> t.ReleaseResult:
        return await self._call(m.terminal_release(watch_id))

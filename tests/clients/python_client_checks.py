"""The Python client (clients/python), installed in a venv, against the real ptybox binary:
over `serve --stdio` and `serve --socket`, sync and asyncio. Run by run_python_client_test.py,
which installs the package and passes, in the environment:
  PTYBOX_BINARY    the ptybox binary under test
  PTYBOX_CONTRACT  {"methods": [...], "errorKinds": [...]} (tests/clients/contract.py)
  PTYBOX_SCRATCH   a scratch directory for workspaces and sockets"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import ptybox
from ptybox import AsyncClient, Client

BINARY = os.environ["PTYBOX_BINARY"]
CONTRACT = json.loads(os.environ["PTYBOX_CONTRACT"])
SCRATCH = Path(os.environ["PTYBOX_SCRATCH"])
UNKNOWN_SESSION = "pty-" + "0" * 32
# A send that only a cancel or the end of the server settles: no silence or deadline of a busy
# machine can settle it first. It prints `started` once the shell runs it.
HOLD = {"silence_ms": 3_600_000, "timeout_ms": 3_600_000}
HELD = "sh -c 'echo started; exec sleep 100'\n"  # the job, not bash, prints it


def workspace() -> str:
    return tempfile.mkdtemp(prefix="ws-", dir=SCRATCH)


class Daemon:
    """`ptybox serve --socket` in a scratch directory (outside the workspace, as it requires)."""

    def __init__(self, policy: str | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="daemon-", dir=SCRATCH))
        self.socket = str(self.dir / "ptybox.sock")
        command = [BINARY, "serve", "--socket", self.socket, "--workspace", workspace()]
        if policy is not None:
            (self.dir / "policy.yaml").write_text(policy)
            command += ["--policy", str(self.dir / "policy.yaml")]
        self.process = subprocess.Popen(command)
        # Wait until it accepts (no deadline asserted: only how long to keep trying).
        for _ in range(6000):  # 5 minutes
            if self.process.poll() is not None:
                raise AssertionError(f"ptybox serve --socket exited {self.process.returncode}")
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(self.socket)
                return
            except OSError:
                time.sleep(0.05)
            finally:
                probe.close()
        raise AssertionError("ptybox serve --socket never accepted a connection")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait()


class ContractTest(unittest.TestCase):
    def test_the_package_under_test_is_the_installed_one(self):
        self.assertTrue(ptybox.__file__.startswith(sys.prefix), (ptybox.__file__, sys.prefix))
        self.assertIn("site-packages", ptybox.__file__)

    def test_every_contract_method_is_a_method_of_both_clients(self):
        missing = [m for m in CONTRACT["methods"] if m not in ptybox.METHODS]
        self.assertEqual(missing, [], "methods of the contract the Python client lacks: add them "
                         "to clients/python/ptybox (_methods.py, client.py, aio.py)")
        stale = [m for m in ptybox.METHODS if m not in CONTRACT["methods"]]
        self.assertEqual(stale, [], "methods the Python client has that the contract does not")
        for method in ptybox.METHODS:
            self.assertTrue(callable(getattr(Client, method, None)), f"Client.{method}")
            self.assertTrue(asyncio.iscoroutinefunction(getattr(AsyncClient, method, None)),
                            f"AsyncClient.{method}")

    def test_every_error_kind_has_its_class(self):
        missing = [k for k in CONTRACT["errorKinds"] if k not in ptybox.ERROR_CLASSES]
        self.assertEqual(missing, [], "error kinds of the contract without an exception class")
        for kind, cls in ptybox.ERROR_CLASSES.items():
            error = ptybox.errors.error_from_response("m", {"code": -32000, "message": "x",
                                                            "data": {"kind": kind}})
            self.assertIs(type(error), cls)
            self.assertEqual(error.kind, kind)
        unknown = ptybox.errors.error_from_response("m", {"code": -32000, "message": "x",
                                                          "data": {"kind": "new_kind"}})
        self.assertIs(type(unknown), ptybox.ApplicationError)

    def test_watch_notifications_decode_or_fail_clearly(self):
        wire = ptybox._wire
        self.assertEqual(wire.notification({"jsonrpc": "2.0", "method": "terminal_watch_output",
                                            "params": {"watchId": 3, "data": "bHMNCg=="}}),
                         ptybox.WatchOutput(3, b"ls\r\n"))
        self.assertEqual(wire.notification({"jsonrpc": "2.0", "method": "terminal_watch_ended",
                                            "params": {"watchId": 3, "reason": "slow", "message": "m"}}),
                         ptybox.WatchEnded(3, "slow", "m"))
        resized = wire.notification({"jsonrpc": "2.0", "method": "terminal_watch_resized",
                                     "params": {"watchId": 3, "cols": 90, "rows": 2, "lines": ["$", ""],
                                                "cursor": {"row": 0, "column": 1},
                                                "alternateScreen": False}})
        self.assertEqual(resized, ptybox.WatchResized(3, 90, 2, ["$", ""], ptybox.Cursor(0, 1), False))
        with self.assertRaises(ptybox.ProtocolError) as caught:
            wire.notification({"jsonrpc": "2.0", "method": "terminal_watch_resized", "params": {"watchId": 3}})
        self.assertIn("terminal_watch_resized", str(caught.exception))
        # A notification a newer server adds is dropped; an answer is not a notification.
        self.assertIsNone(wire.notification({"jsonrpc": "2.0", "method": "new_thing", "params": {}}))
        self.assertIsNone(wire.notification({"jsonrpc": "2.0", "id": 1, "result": {}}))
        for params in ({"watchId": 3, "data": "not base64!"}, {"watchId": "3", "data": ""}, None):
            with self.assertRaises(ptybox.ProtocolError) as caught:
                wire.notification({"jsonrpc": "2.0", "method": "terminal_watch_output", "params": params})
            self.assertIn("terminal_watch_output", str(caught.exception))
        # terminal_type sends text as the base64 of its UTF-8, bytes as they are.
        self.assertEqual(ptybox._methods.terminal_type(1, "é\r").params, {"watchId": 1, "data": "w6kN"})
        self.assertEqual(ptybox._methods.terminal_type(1, b"\x03").params, {"watchId": 1, "data": "Aw=="})

    def test_the_daemon_knows_every_method_of_the_client(self):
        # A parameter no method has: every method refuses it (-32602) before acting; only a
        # method the daemon lacks answers -32601.
        with Client.spawn(BINARY, workspace=workspace()) as c:
            for method in ptybox.METHODS:
                with self.assertRaises(ptybox.InvalidParams, msg=method) as caught:
                    c.call(method, {"notAParameterOfAnyMethod": 1})
                self.assertEqual(caught.exception.code, -32602)


def scenario(test: unittest.TestCase, c: Client) -> None:
    """open, send (exit code and waitReason), read, list, errors, close: one client's round."""
    opened = c.terminal_open(name="scenario", cols=100, rows=30)
    test.assertIsInstance(opened, ptybox.OpenResult)
    test.assertTrue(opened.session_id.startswith("pty-"))
    test.assertEqual(opened.name, "scenario")
    sent = c.terminal_send(opened.session_id, "echo hi\n")
    test.assertIsInstance(sent, ptybox.SendResult)
    test.assertEqual((sent.viewport, sent.wait_reason, sent.exit_code), ("hi", "stdin_read", 0))
    test.assertTrue(sent.session_status.running)
    test.assertIsNone(sent.foreground)
    failed = c.terminal_send(opened.session_id, keys=["false", "Enter"])
    test.assertEqual((failed.wait_reason, failed.exit_code), ("stdin_read", 1))
    read = c.terminal_read(opened.session_id)
    test.assertIn("hi", read.text.splitlines())
    test.assertTrue(read.end)
    listed = c.terminal_list().sessions
    test.assertEqual([(s.session_id, s.name, s.busy) for s in listed],
                     [(opened.session_id, "scenario", False)])
    test.assertEqual(c.terminal_resize(opened.session_id, 90, 20), ptybox.ResizeResult(90, 20))
    test.assertEqual(c.policy_resolve().mode, "workspace-write")
    with test.assertRaises(ptybox.NotFound) as caught:
        c.terminal_send(UNKNOWN_SESSION, "echo x\n")
    test.assertEqual((caught.exception.kind, caught.exception.context, caught.exception.code),
                     ("not_found", "sessionId", -32000))
    test.assertIsInstance(caught.exception, ptybox.ApplicationError)
    with test.assertRaises(ptybox.InvalidParams) as caught:
        c.terminal_open(cols=1)
    test.assertEqual(caught.exception.context, "cols")
    with test.assertRaises(ptybox.InvalidParams):
        c.terminal_send(opened.session_id)  # neither input nor keys
    with test.assertRaises(ptybox.ModeFenced):
        c.policy_set_mode("read-only")
    closed = c.terminal_close(opened.session_id)
    test.assertEqual(closed.session_status.kind, "exited")
    with test.assertRaises(ptybox.NotFound):
        c.terminal_status(opened.session_id)
    test.assertEqual(c.terminal_list().sessions, [])


class SyncClientTest(unittest.TestCase):
    def test_over_stdio(self):
        with Client.spawn(BINARY, workspace=workspace()) as c:
            scenario(self, c)
        self.assertEqual(c.close(), 0)  # end of input: the server closed everything, exit 0

    def test_over_socket(self):
        daemon = Daemon()
        try:
            with Client.connect(daemon.socket) as c:
                scenario(self, c)
        finally:
            daemon.stop()

    def test_a_missing_socket_is_a_clear_error(self):
        with self.assertRaises(ptybox.ConnectionClosed) as caught:
            Client.connect(SCRATCH / "no-such.sock")
        self.assertIn("serve --socket", str(caught.exception))

    def test_a_missing_binary_is_a_clear_error(self):
        with self.assertRaises(ptybox.ConnectionClosed) as caught:
            Client.spawn(SCRATCH / "no-such-ptybox")
        self.assertIn("spawn(ptybox=...)", str(caught.exception))

    def test_background_send_and_output(self):
        with Client.spawn(BINARY, workspace=workspace()) as c:
            s = c.terminal_open().session_id
            started = c.terminal_send(s, "echo one; echo two\n", background=True)
            self.assertIsInstance(started, ptybox.OperationStarted)
            output = ""
            placed = 0
            while True:
                collected = c.terminal_output(s)
                output += collected.output
                if collected.output_cursor is not None:
                    # The collected bytes are the scrollback's from there.
                    page = c.terminal_read(s, cursor=collected.output_cursor,
                                           max_bytes=len(collected.output.encode()))
                    self.assertEqual(page.text, collected.output)
                    placed += 1
                if collected.done:
                    break
                time.sleep(0.05)
            self.assertEqual(output.split(), ["one", "two"])
            self.assertGreater(placed, 0)
            self.assertIsInstance(collected.result, ptybox.SendResult)
            self.assertEqual(collected.result.exit_code, 0)

    def test_owner_token_attaches_a_new_connection_to_the_detached_owner(self):
        daemon = Daemon(policy="version: 1\nlimits:\n  detachGraceMs: 600000\n")
        try:
            first = Client.connect(daemon.socket)
            s = first.terminal_open(name="kept").session_id
            first.terminal_send(s, "cd / && export KEPT=yes\n")
            info = first.owner_info()
            self.assertEqual(info.detach_grace_ms, 600000)
            self.assertNotIn(info.owner_token, repr(info))  # a secret stays out of logs
            first.close()
            with Client.connect(daemon.socket, owner_token=info.owner_token) as second:
                self.assertIsNotNone(second.attached)
                self.assertEqual([x.session_id for x in second.attached.sessions], [s])
                self.assertEqual(second.terminal_send(s, "echo $KEPT $PWD\n").viewport, "yes /")
                second.terminal_close(s)
            with self.assertRaises(ptybox.NotFound):
                Client.connect(daemon.socket, owner_token="owner-" + "0" * 64)
        finally:
            daemon.stop()


def watched_until(c: Client, watch_id: int, text: str, seen: bytearray) -> None:
    """Reads c's watch events into `seen` until its output holds `text` (the test's ctest
    timeout ends it otherwise: no deadline of a busy machine is asserted)."""
    while text.encode() not in seen:
        event = c.next_watch_event()
        if isinstance(event, ptybox.WatchEnded):
            raise AssertionError(f"the watch ended before {text!r} arrived: {event}")
        if isinstance(event, ptybox.WatchOutput) and event.watch_id == watch_id:
            seen += event.data


class WatchTest(unittest.TestCase):
    def test_watch_takeover_type_release_over_stdio(self):
        with Client.spawn(BINARY, workspace=workspace()) as c:
            s = c.terminal_open(name="watched", cols=80, rows=24).session_id
            w = c.terminal_watch(s)  # its own session: no token needed
            self.assertIsInstance(w, ptybox.WatchResult)
            self.assertEqual((w.session_id, w.name, w.cols, w.rows, w.busy), (s, "watched", 80, 24, False))
            self.assertEqual(len(w.lines), 24)
            self.assertIsInstance(w.cursor, ptybox.Cursor)
            self.assertFalse(w.alternate_screen)
            # A resize reaches the watcher as the screen at the new size.
            c.terminal_resize(s, 90, 30)
            event = c.next_watch_event()
            while not isinstance(event, ptybox.WatchResized):
                self.assertIsInstance(event, ptybox.WatchOutput)
                event = c.next_watch_event()
            self.assertEqual((event.watch_id, event.cols, event.rows, len(event.lines)), (w.watch_id, 90, 30, 30))
            # The agent's send reaches the watcher as raw bytes, after the snapshot.
            self.assertEqual(c.terminal_send(s, "echo watched-$((6*7))\n").viewport, "watched-42")
            seen = bytearray()
            watched_until(c, w.watch_id, "watched-42", seen)
            # Keys without holding the session are refused.
            with self.assertRaises(ptybox.Busy):
                c.terminal_type(w.watch_id, "echo no\n")
            self.assertEqual(c.terminal_takeover(w.watch_id), ptybox.TakeoverResult(held=True))
            with self.assertRaises(ptybox.Busy) as caught:
                c.terminal_send(s, "echo agent\n")
            self.assertEqual(caught.exception.kind, "busy")
            self.assertTrue(c.terminal_status(s).busy)
            self.assertEqual(c.terminal_type(w.watch_id, b"echo typed-$((2*3))\r"),
                             ptybox.TypeResult(typed=True))
            watched_until(c, w.watch_id, "typed-6", seen)
            self.assertEqual(c.terminal_release(w.watch_id), ptybox.ReleaseResult(released=True))
            self.assertEqual(c.terminal_send(s, "echo back\n").viewport, "back")
            self.assertEqual(c.terminal_unwatch(w.watch_id), ptybox.UnwatchResult(unwatched=True))
            with self.assertRaises(ptybox.NotFound):
                c.terminal_unwatch(w.watch_id)
            # A watch that the session's close ends says so.
            w2 = c.terminal_watch(s)
            self.assertNotEqual(w2.watch_id, w.watch_id)
            c.terminal_close(s)
            while True:
                event = c.next_watch_event()
                if isinstance(event, ptybox.WatchEnded):
                    break
            self.assertEqual((event.watch_id, event.reason), (w2.watch_id, "closed"))

    def test_owner_sessions_names_only_the_token_holders_sessions(self):
        with Client.spawn(BINARY, workspace=workspace()) as c:
            s = c.terminal_open(name="mine").session_id
            token = c.owner_info().owner_token
            listed = c.owner_sessions(token)
            self.assertIsInstance(listed, ptybox.ListResult)
            self.assertEqual([(x.session_id, x.name) for x in listed.sessions], [(s, "mine")])
            with self.assertRaises(ptybox.NotFound):
                c.owner_sessions("owner-" + "0" * 64)


async def until_busy(c: AsyncClient, session_id: str, send: asyncio.Future) -> None:
    """Waits until `send` holds the session; fails with the send's own outcome if it settled
    first (a `busy` answer, say), instead of waiting forever."""
    # Until the shell runs the command (a signal before it read the line would not reach it).
    while "started" not in (await c.terminal_read(session_id)).text.splitlines():
        if send.done():
            send.result()  # raises its error, if it failed
            raise AssertionError("the send settled before the test could interrupt it")
        await asyncio.sleep(0.02)


class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    async def round(self, c: AsyncClient) -> None:
        a = (await c.terminal_open(name="a")).session_id
        b = (await c.terminal_open(name="b")).session_id
        # Two sends in flight on one connection, the first the slower: each answer reaches
        # its own call whatever the order they arrive in.
        sent_a, sent_b, status = await asyncio.gather(
            c.terminal_send(a, "sleep 0.5; echo from-a\n"), c.terminal_send(b, "echo from-b\n"),
            c.terminal_status(b))
        self.assertEqual((sent_a.viewport, sent_a.exit_code), ("from-a", 0))
        self.assertEqual((sent_b.viewport, sent_b.wait_reason), ("from-b", "stdin_read"))
        self.assertEqual(status.name, "b")
        read = await c.terminal_read(a)
        self.assertIn("from-a", read.text)
        self.assertEqual(sorted(s.name for s in (await c.terminal_list()).sessions), ["a", "b"])
        with self.assertRaises(ptybox.NotFound) as caught:
            await c.terminal_close(UNKNOWN_SESSION)
        self.assertEqual(caught.exception.kind, "not_found")
        # Cancelling the awaiting task cancels the send on the server: the command gets SIGINT.
        task = asyncio.ensure_future(c.terminal_send(a, HELD, **HOLD))
        await until_busy(c, a, task)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        while (await c.terminal_status(a)).busy:
            await asyncio.sleep(0.02)
        # The dropped answer is still the send's result: the SIGINT ended `sleep` (exit 130).
        cancelled = await c.terminal_output(a)
        self.assertTrue(cancelled.done, cancelled)
        self.assertEqual(cancelled.result.exit_code if cancelled.result else None, 130, cancelled)
        for s in (a, b):
            self.assertEqual((await c.terminal_close(s)).session_status.kind, "exited")

    async def test_over_stdio(self):
        c = await AsyncClient.spawn(BINARY, workspace=workspace())
        async with c:
            await self.round(c)
        self.assertEqual(await c.close(), 0)

    async def test_over_socket(self):
        daemon = await asyncio.to_thread(Daemon)
        try:
            async with await AsyncClient.connect(daemon.socket) as c:
                await self.round(c)
        finally:
            await asyncio.to_thread(daemon.stop)

    async def test_another_connection_watches_with_the_owner_token(self):
        daemon = await asyncio.to_thread(Daemon)
        try:
            async with await AsyncClient.connect(daemon.socket) as agent, \
                    await AsyncClient.connect(daemon.socket) as person:
                s = (await agent.terminal_open(name="shared")).session_id
                token = (await agent.owner_info()).owner_token
                with self.assertRaises(ptybox.NotFound):  # not its owner, no token
                    await person.terminal_watch(s)
                self.assertEqual([x.session_id for x in (await person.owner_sessions(token)).sessions], [s])
                w = await person.terminal_watch(s, owner_token=token)
                self.assertEqual(w.session_id, s)
                sent = await agent.terminal_send(s, "echo seen-$((5*5))\n")
                self.assertEqual(sent.viewport, "seen-25")
                seen = bytearray()
                async for event in person.watch_events():
                    self.assertIsInstance(event, ptybox.WatchOutput)
                    self.assertEqual(event.watch_id, w.watch_id)
                    seen += event.data
                    if b"seen-25" in seen:
                        break
                await person.terminal_takeover(w.watch_id)
                with self.assertRaises(ptybox.Busy):
                    await agent.terminal_send(s, "echo agent\n")
                await person.terminal_type(w.watch_id, "echo typed-$((3*3))\r")
                async for event in person.watch_events():
                    seen += event.data
                    if b"typed-9" in seen:
                        break
                await person.terminal_release(w.watch_id)
                self.assertEqual((await agent.terminal_send(s, "echo back\n")).viewport, "back")
                await agent.terminal_close(s)
                ended = await person.next_watch_event()
                while not isinstance(ended, ptybox.WatchEnded):
                    ended = await person.next_watch_event()
                self.assertEqual((ended.watch_id, ended.reason), (w.watch_id, "closed"))
        finally:
            await asyncio.to_thread(daemon.stop)

    async def test_requests_in_flight_fail_when_the_server_exits(self):
        c = await AsyncClient.spawn(BINARY, workspace=workspace())
        s = (await c.terminal_open()).session_id
        pending = asyncio.ensure_future(c.terminal_send(s, HELD, **HOLD))
        await until_busy(c, s, pending)
        c._process.kill()  # the server dies with the send in flight
        with self.assertRaises(ptybox.ConnectionClosed):
            await pending
        with self.assertRaises(ptybox.ConnectionClosed):
            await c.terminal_list()
        await c.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

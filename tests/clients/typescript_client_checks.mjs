// The TypeScript client (clients/typescript), compiled with tsc and installed with npm, against
// the real ptybox binary over `serve --stdio` and `serve --socket`. Run by
// run_typescript_client_test.py from a project where `npm install` put the package, with:
//   PTYBOX_BINARY    the ptybox binary under test
//   PTYBOX_CONTRACT  {"methods": [...], "errorKinds": [...]} (tests/clients/contract.py)
//   PTYBOX_SCRATCH   a scratch directory for workspaces and sockets
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as ptybox from "ptybox";
import { ConnectionClosed, InvalidParams, ModeFenced, NotFound, PtyboxClient } from "ptybox";

const BINARY = process.env.PTYBOX_BINARY;
const CONTRACT = JSON.parse(process.env.PTYBOX_CONTRACT);
const SCRATCH = process.env.PTYBOX_SCRATCH;
const UNKNOWN_SESSION = "pty-" + "0".repeat(32);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const workspace = () => mkdtempSync(join(SCRATCH, "ws-"));
const LIMIT = { timeout: 300000 }; // a hang fails its test by name instead of the whole run
// A send that only a cancel or the end of the server settles: no silence or deadline of a busy
// machine can settle it first. It prints `started` once the shell runs it.
const HOLD = { silenceMs: 3600000, timeoutMs: 3600000 };
const HELD = "sh -c 'echo started; exec sleep 100'\n"; // the job, not bash, prints it

// Waits until `pending` (a send on sessionId) holds the session; fails with the send's own
// outcome if it settled first (a `busy` answer, say), instead of waiting forever.
async function untilBusy(c, sessionId, pending) {
  let settled = false;
  pending.then(() => (settled = true), () => (settled = true));
  // Until the shell runs the command (a signal before it read the line would not reach it).
  while (!(await c.terminal_read({ sessionId })).text.split("\n").includes("started")) {
    if (settled) {
      await pending; // throws its error, if it failed
      assert.fail("the send settled before the test could interrupt it");
    }
    await pause(20);
  }
}

// `ptybox serve --socket` in a scratch directory, outside the workspace as it requires.
async function startDaemon(policy) {
  const dir = mkdtempSync(join(SCRATCH, "daemon-"));
  const socket = join(dir, "ptybox.sock");
  const args = ["serve", "--socket", socket, "--workspace", workspace()];
  if (policy !== undefined) {
    writeFileSync(join(dir, "policy.yaml"), policy);
    args.push("--policy", join(dir, "policy.yaml"));
  }
  const child = spawn(BINARY, args, { stdio: ["ignore", "inherit", "inherit"] });
  let exited = null;
  const gone = new Promise((resolve) => child.once("exit", (code) => resolve((exited = code))));
  // Wait until it accepts (no deadline asserted: only how long to keep trying).
  for (let i = 0; i < 6000; i++) { // 5 minutes
    assert.equal(exited, null, "ptybox serve --socket exited");
    if (existsSync(socket)) {
      const accepted = await new Promise((resolve) => {
        const probe = createConnection(socket);
        probe.once("connect", () => (probe.end(), resolve(true)));
        probe.once("error", () => resolve(false));
      });
      if (accepted) break;
    }
    await pause(50);
  }
  return { socket, stop: () => (child.kill("SIGTERM"), gone) };
}

test("the package under test is the one npm installed", LIMIT, () => {
  const here = realpathSync(fileURLToPath(import.meta.url));
  assert.ok(!here.includes("/clients/typescript/"), here);
  assert.equal(typeof ptybox.PtyboxClient.connect, "function");
});

test("every contract method is a method of the client", LIMIT, () => {
  const missing = CONTRACT.methods.filter((m) => !ptybox.METHODS.includes(m));
  assert.deepEqual(missing, [], "methods of the contract the TypeScript client lacks: add them to clients/typescript/src (types.ts Methods and METHODS, client.ts)");
  const stale = ptybox.METHODS.filter((m) => !CONTRACT.methods.includes(m));
  assert.deepEqual(stale, [], "methods the TypeScript client has that the contract does not");
  for (const m of ptybox.METHODS) assert.equal(typeof PtyboxClient.prototype[m], "function", m);
});

test("every error kind has its class", LIMIT, () => {
  const missing = CONTRACT.errorKinds.filter((k) => !(k in ptybox.ERROR_CLASSES));
  assert.deepEqual(missing, [], "error kinds of the contract without an error class");
  for (const [kind, cls] of Object.entries(ptybox.ERROR_CLASSES)) {
    const error = ptybox.errorFromResponse("m", { code: -32000, message: "x", data: { kind } });
    assert.equal(error.constructor, cls);
    assert.ok(error instanceof ptybox.ApplicationError && error instanceof ptybox.PtyboxError);
    assert.equal(error.kind, kind);
  }
  const unknown = ptybox.errorFromResponse("m", { code: -32000, message: "x", data: { kind: "new" } });
  assert.equal(unknown.constructor, ptybox.ApplicationError);
});

test("the daemon knows every method of the client", LIMIT, async () => {
  // A parameter no method has: every method refuses it (-32602) before acting; only a method
  // the daemon lacks answers -32601.
  const c = await PtyboxClient.spawn({ ptybox: BINARY, workspace: workspace() });
  for (const m of ptybox.METHODS) {
    await assert.rejects(c.call(m, { notAParameterOfAnyMethod: 1 }), (e) => e instanceof InvalidParams && e.code === -32602, m);
  }
  assert.equal(await c.close(), 0);
});

// open, send (exit code and waitReason), read, list, errors, concurrency, cancel, close.
async function scenario(c) {
  const opened = await c.terminal_open({ name: "a", cols: 100, rows: 30 });
  assert.match(opened.sessionId, /^pty-/);
  assert.equal(opened.name, "a");
  const a = opened.sessionId;
  const sent = await c.terminal_send({ sessionId: a, input: "echo hi\n" });
  assert.deepEqual([sent.viewport, sent.waitReason, sent.exitCode, sent.foreground], ["hi", "stdin_read", 0, null]);
  assert.equal(sent.sessionStatus.kind, "running");
  const failed = await c.terminal_send({ sessionId: a, keys: ["false", "Enter"] });
  assert.deepEqual([failed.waitReason, failed.exitCode], ["stdin_read", 1]);
  const read = await c.terminal_read({ sessionId: a });
  assert.ok(read.text.split("\n").includes("hi"), read.text);
  assert.equal(read.end, true);
  const b = (await c.terminal_open({ name: "b" })).sessionId;
  // Two sends in flight on one connection, the first the slower: each answer reaches its own call.
  const [fromA, fromB] = await Promise.all([
    c.terminal_send({ sessionId: a, input: "sleep 0.5; echo from-a\n" }),
    c.terminal_send({ sessionId: b, input: "echo from-b\n" }),
  ]);
  assert.deepEqual([fromA.viewport, fromB.viewport], ["from-a", "from-b"]);
  const listed = (await c.terminal_list()).sessions.map((s) => [s.sessionId, s.name, s.busy]);
  assert.deepEqual(listed.sort(), [[a, "a", false], [b, "b", false]].sort());
  assert.deepEqual(await c.terminal_resize({ sessionId: a, cols: 90, rows: 20 }), { cols: 90, rows: 20 });
  assert.equal((await c.policy_resolve()).mode, "workspace-write");
  await assert.rejects(c.terminal_send({ sessionId: UNKNOWN_SESSION, input: "x\n" }), (e) => {
    assert.ok(e instanceof NotFound && e instanceof ptybox.ApplicationError);
    assert.deepEqual([e.code, e.kind, e.context, e.method], [-32000, "not_found", "sessionId", "terminal_send"]);
    return true;
  });
  await assert.rejects(c.terminal_open({ cols: 1 }), (e) => e instanceof InvalidParams && e.context === "cols");
  await assert.rejects(c.policy_set_mode({ mode: "read-only" }), ModeFenced);
  // Aborting a call cancels the send on the server: the command gets SIGINT.
  const abort = new AbortController();
  const pending = c.terminal_send({ sessionId: a, input: HELD, ...HOLD }, { signal: abort.signal });
  await untilBusy(c, a, pending);
  abort.abort(new Error("stopped by the test"));
  await assert.rejects(pending, /stopped by the test/);
  while ((await c.terminal_status({ sessionId: a })).busy) await pause(20);
  // The dropped answer is still the send's result: the SIGINT ended `sleep` (exit code 130).
  const cancelled = await c.terminal_output({ sessionId: a });
  assert.deepEqual([cancelled.done, cancelled.result?.exitCode], [true, 130], JSON.stringify(cancelled));
  for (const s of [a, b]) assert.equal((await c.terminal_close({ sessionId: s })).sessionStatus.kind, "exited");
  await assert.rejects(c.terminal_status({ sessionId: a }), NotFound);
  assert.deepEqual((await c.terminal_list()).sessions, []);
}

test("over --stdio", LIMIT, async () => {
  const c = await PtyboxClient.spawn({ ptybox: BINARY, workspace: workspace() });
  await scenario(c);
  assert.equal(await c.close(), 0); // end of input: the server closed everything, exit 0
});

test("over --socket", LIMIT, async () => {
  const daemon = await startDaemon();
  try {
    const c = await PtyboxClient.connect(daemon.socket);
    await scenario(c);
    await c.close();
  } finally {
    await daemon.stop();
  }
});

test("an owner token attaches a new connection to the detached owner", LIMIT, async () => {
  const daemon = await startDaemon("version: 1\nlimits:\n  detachGraceMs: 600000\n");
  try {
    const first = await PtyboxClient.connect(daemon.socket);
    const s = (await first.terminal_open({ name: "kept" })).sessionId;
    await first.terminal_send({ sessionId: s, input: "cd / && export KEPT=yes\n" });
    const info = await first.owner_info();
    assert.equal(info.detachGraceMs, 600000);
    await first.close();
    const second = await PtyboxClient.connect(daemon.socket, { ownerToken: info.ownerToken });
    assert.deepEqual(second.attached.sessions.map((x) => x.sessionId), [s]);
    assert.equal((await second.terminal_send({ sessionId: s, input: "echo $KEPT $PWD\n" })).viewport, "yes /");
    await second.terminal_close({ sessionId: s });
    await second.close();
    await assert.rejects(PtyboxClient.connect(daemon.socket, { ownerToken: "owner-" + "0".repeat(64) }), NotFound);
  } finally {
    await daemon.stop();
  }
});

test("clear errors for a missing socket or binary, and for a server that dies", LIMIT, async () => {
  await assert.rejects(PtyboxClient.connect(join(SCRATCH, "no-such.sock")), (e) => e instanceof ConnectionClosed && /serve --socket/.test(e.message));
  await assert.rejects(PtyboxClient.spawn({ ptybox: join(SCRATCH, "no-such-ptybox") }), (e) => e instanceof ConnectionClosed && /spawn\(\{ptybox/.test(e.message));
  const c = await PtyboxClient.spawn({ ptybox: BINARY, workspace: workspace() });
  const s = (await c.terminal_open()).sessionId;
  const pending = c.terminal_send({ sessionId: s, input: HELD, ...HOLD });
  await untilBusy(c, s, pending);
  c["process"].kill("SIGKILL"); // the server dies with the send in flight
  await assert.rejects(pending, ConnectionClosed);
  await assert.rejects(c.terminal_list(), ConnectionClosed);
});

// Reads c's watch events until the output of watchId holds `text` (the LIMIT ends it otherwise:
// no deadline of a busy machine is asserted); `seen` collects the bytes as text.
async function watchedUntil(c, watchId, text, seen) {
  const decoder = new TextDecoder();
  for await (const event of c.watchEvents()) {
    assert.equal(event.type, "output", `the watch ended before ${text} arrived: ${JSON.stringify(event)}`);
    assert.ok(event.data instanceof Uint8Array);
    if (event.watchId === watchId) seen.text += decoder.decode(event.data, { stream: true });
    if (seen.text.includes(text)) return;
  }
  assert.fail(`the connection ended before ${text} arrived`);
}

test("watch a session: a send's output, takeover, type, release, close", LIMIT, async () => {
  const c = await PtyboxClient.spawn({ ptybox: BINARY, workspace: workspace() });
  const s = (await c.terminal_open({ name: "watched", cols: 80, rows: 24 })).sessionId;
  const w = await c.terminal_watch({ sessionId: s }); // its own session: no token needed
  assert.deepEqual([w.sessionId, w.name, w.cols, w.rows, w.busy, w.alternateScreen], [s, "watched", 80, 24, false, false]);
  assert.equal(w.lines.length, 24);
  assert.equal(typeof w.cursor.row, "number");
  // A resize reaches the watcher as the screen at the new size.
  await c.terminal_resize({ sessionId: s, cols: 90, rows: 30 });
  for await (const event of c.watchEvents()) {
    if (event.type === "output") continue;
    assert.deepEqual([event.type, event.watchId, event.cols, event.rows, event.lines.length], ["resized", w.watchId, 90, 30, 30]);
    break;
  }
  assert.equal((await c.terminal_send({ sessionId: s, input: "echo watched-$((6*7))\n" })).viewport, "watched-42");
  const seen = { text: "" };
  await watchedUntil(c, w.watchId, "watched-42", seen);
  await assert.rejects(c.terminal_type({ watchId: w.watchId, data: "echo no\n" }), ptybox.Busy); // not held
  assert.deepEqual(await c.terminal_takeover({ watchId: w.watchId }), { held: true });
  await assert.rejects(c.terminal_send({ sessionId: s, input: "echo agent\n" }), (e) => e instanceof ptybox.Busy && e.kind === "busy");
  assert.equal((await c.terminal_status({ sessionId: s })).busy, true);
  assert.deepEqual(await c.terminal_type({ watchId: w.watchId, data: "echo typed-$((2*3))\r" }), { typed: true });
  await watchedUntil(c, w.watchId, "typed-6", seen);
  assert.deepEqual(await c.terminal_release({ watchId: w.watchId }), { released: true });
  assert.equal((await c.terminal_send({ sessionId: s, input: "echo back\n" })).viewport, "back");
  assert.deepEqual(await c.terminal_unwatch({ watchId: w.watchId }), { unwatched: true });
  await assert.rejects(c.terminal_unwatch({ watchId: w.watchId }), NotFound);
  const w2 = await c.terminal_watch({ sessionId: s });
  await c.terminal_close({ sessionId: s });
  let ended;
  do ended = await c.nextWatchEvent(); while (ended.type !== "ended");
  assert.deepEqual([ended.watchId, ended.reason], [w2.watchId, "closed"]);
  assert.equal(await c.close(), 0);
});

test("another connection watches with the owner token; owner_sessions lists its sessions", LIMIT, async () => {
  const daemon = await startDaemon();
  try {
    const agent = await PtyboxClient.connect(daemon.socket);
    const person = await PtyboxClient.connect(daemon.socket);
    const s = (await agent.terminal_open({ name: "shared" })).sessionId;
    const token = (await agent.owner_info()).ownerToken;
    await assert.rejects(person.terminal_watch({ sessionId: s }), NotFound); // not its owner
    await assert.rejects(person.owner_sessions({ ownerToken: "owner-" + "0".repeat(64) }), NotFound);
    assert.deepEqual((await person.owner_sessions({ ownerToken: token })).sessions.map((x) => [x.sessionId, x.name]), [[s, "shared"]]);
    const w = await person.terminal_watch({ sessionId: s, ownerToken: token });
    // A listener gets the events as they arrive.
    const decoder = new TextDecoder();
    let text = "";
    let ended = null;
    let wake = () => {};
    const stop = person.onWatchEvent((event) => {
      assert.equal(event.watchId, w.watchId);
      if (event.type === "output") text += decoder.decode(event.data, { stream: true });
      else ended = event;
      wake();
    });
    const until = async (done) => {
      while (!done()) await new Promise((resolve) => (wake = resolve));
    };
    assert.equal((await agent.terminal_send({ sessionId: s, input: "echo seen-$((5*5))\n" })).viewport, "seen-25");
    await until(() => text.includes("seen-25"));
    await person.terminal_takeover({ watchId: w.watchId });
    await assert.rejects(agent.terminal_send({ sessionId: s, input: "echo agent\n" }), ptybox.Busy);
    await person.terminal_type({ watchId: w.watchId, data: new TextEncoder().encode("echo typed-$((3*3))\r") });
    await until(() => text.includes("typed-9"));
    await person.terminal_release({ watchId: w.watchId });
    assert.equal((await agent.terminal_send({ sessionId: s, input: "echo back\n" })).viewport, "back");
    await agent.terminal_close({ sessionId: s });
    await until(() => ended !== null);
    assert.deepEqual([ended.watchId, ended.reason], [w.watchId, "closed"]);
    stop();
    await agent.close();
    await person.close();
  } finally {
    await daemon.stop();
  }
});

// The official MCP TypeScript SDK client against the real `ptybox mcp`: it spawns the server
// over stdio, checks the handshake, validates every tool's schemas and every structured result,
// and runs whole sandboxed sessions (open, send, read, signal, cancel, close), the tool errors,
// the policy resource and its update notification; then model consent with more clients: a
// widening is asked of the user (elicitation) and applies only on accept, a host without
// elicitation is refused, and --mode sets the start. Prints TAP; exits 1 on any failure.
//   node sdk_client_test.mjs PATH/TO/ptybox
// PTYBOX_MCP_TRANSCRIPT=FILE also writes every JSON-RPC message, one per line, to FILE.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  ElicitRequestSchema,
  LATEST_PROTOCOL_VERSION,
  ResourceUpdatedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';

import { GUARD_MS, binary, processGone, step, tap, waitFor } from './sdk_test_support.mjs';

const transcriptPath = process.env.PTYBOX_MCP_TRANSCRIPT;

const EXPECTED_TOOLS = [
  'terminal_open', 'terminal_send', 'terminal_wait', 'terminal_output', 'terminal_cancel',
  'terminal_read',
  'terminal_signal', 'terminal_status', 'terminal_close', 'terminal_list', 'policy_resolve',
  'policy_set_mode', 'terminal_resize'
];

function withGuard(promise, what) {
  let timer;
  const guard = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hang guard: ${what} did not finish`)), GUARD_MS);
  });
  return Promise.race([promise, guard]).finally(() => clearTimeout(timer));
}

// --- a transport that records the conversation for docs/mcp.md ----------------------------------
class RecordingTransport {
  constructor(inner, record) {
    this.inner = inner;
    this.record = record;
    inner.onmessage = (message) => {
      record({ direction: 'server->client', message });
      this.onmessage?.(message);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (error) => this.onerror?.(error);
  }
  get pid() { return this.inner.pid; }
  get stderr() { return this.inner.stderr; }
  start() { return this.inner.start(); }
  send(message, options) {
    this.record({ direction: 'client->server', message });
    return this.inner.send(message, options);
  }
  close() { return this.inner.close(); }
}

// --- schema checks -------------------------------------------------------------------------------
// Strict validators for both dialects a host may assume (MCP's default 2020-12, and draft-07,
// which the SDK itself uses): compiling validates the schema against the meta-schema.
const strict = { strict: true, allErrors: true, allowUnionTypes: true, validateSchema: true };
const ajv07 = new Ajv(strict);
const ajv2020 = new Ajv2020(strict);
const outputValidators = new Map();

function compileBoth(schema, what) {
  for (const [dialect, ajv] of [['draft-07', ajv07], ['2020-12', ajv2020]]) {
    assert.ok(ajv.validateSchema(schema), `${what} is not a valid ${dialect} schema: ` +
      ajv.errorsText(ajv.errors));
    ajv.compile(schema);
  }
  return ajv2020.compile(schema);
}

const workspace = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ptybox-mcp-sdk-')));
const transcript = [];
const clientErrors = [];
const updates = [];
let stderrText = '';

const inner = new StdioClientTransport({
  command: binary,
  args: ['mcp', '--workspace', workspace],
  // No host policy file may change what this test expects.
  env: { PTYBOX_OPERATOR_POLICY: path.join(workspace, 'no-operator-policy.yaml') },
  stderr: 'pipe'
});
inner.stderr?.on('data', (chunk) => { stderrText += chunk.toString(); });
const transport = new RecordingTransport(inner, (entry) => transcript.push(entry));
const client = new Client({ name: 'ptybox-sdk-test', version: '1.0.0' });
client.onerror = (error) => clientErrors.push(error);
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
  updates.push(notification.params.uri);
});

// Calls a tool through the SDK (which validates structuredContent against the outputSchema) and
// validates it again with the strict 2020-12 validator.
async function call(name, args = {}, options = {}) {
  return callWith(client, name, args, options);
}

async function callWith(someClient, name, args = {}, options = {}) {
  const result = await withGuard(someClient.callTool({ name, arguments: args }, undefined, options),
    `tools/call ${name}`);
  assert.ok(Array.isArray(result.content) && result.content[0]?.type === 'text',
    `${name}: content starts with a text block`);
  if (!result.isError) {
    const validate = outputValidators.get(name);
    assert.ok(validate(result.structuredContent),
      `${name}: structuredContent does not match its outputSchema: ` +
      `${ajv2020.errorsText(validate.errors)}\n${JSON.stringify(result.structuredContent)}`);
  }
  return result;
}

async function send(sessionId, input, extra = {}) {
  const result = await call('terminal_send', { sessionId, input, ...extra });
  assert.equal(result.isError, false, `terminal_send ${JSON.stringify(input)}: ` +
    result.content[0].text);
  return result;
}

const state = {};

await step('connect: handshake negotiates the latest protocol and states the policy', async () => {
  await withGuard(client.connect(transport), 'initialize');
  assert.equal(client.getServerVersion().name, 'ptybox');
  const initialize = transcript.find((e) => e.message.id !== undefined &&
    e.direction === 'server->client');
  assert.equal(initialize.message.result.protocolVersion, LATEST_PROTOCOL_VERSION);
  const caps = client.getServerCapabilities();
  assert.deepEqual(caps.tools, { listChanged: false });
  assert.equal(caps.resources.subscribe, true);
  const instructions = client.getInstructions();
  assert.equal(instructions,
    `Sandbox policy: workspace-write mode; writable: "${workspace}" (except policy files, and ` +
    'the hooks and configuration in .git directories: git add, commit, branch and tag work ' +
    'there and come back to the repository after each command) and a private /tmp; ' +
    'everything else read-only; network denied.');
});

await step('ping', async () => {
  assert.deepEqual(await withGuard(client.ping(), 'ping'), {});
});

await step('tools/list: every tool, each input and output schema valid in both dialects',
  async () => {
    const { tools } = await withGuard(client.listTools(), 'tools/list');
    assert.deepEqual(tools.map((t) => t.name), EXPECTED_TOOLS);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal(tool.outputSchema.type, 'object', tool.name);
      assert.ok(tool.title && tool.description.length > 40, `${tool.name} has a title and prose`);
      assert.equal(typeof tool.annotations.readOnlyHint, 'boolean', tool.name);
      compileBoth(tool.inputSchema, `${tool.name}.inputSchema`);
      outputValidators.set(tool.name, compileBoth(tool.outputSchema, `${tool.name}.outputSchema`));
    }
    // Sent to the model on every turn: under 10,000 bytes (it was 22 KB).
    const listed = transcript.filter((e) => e.direction === 'server->client' &&
      e.message.result?.tools);
    const listBytes = Buffer.byteLength(JSON.stringify(listed.at(-1).message));
    console.log(`# tools/list: ${listBytes} bytes`);
    assert.ok(listBytes < 10000, `tools/list is ${listBytes} bytes; under 10000`);
    const sendTool = tools.find((t) => t.name === 'terminal_send');
    for (const phrase of ['verbatim', 'newline', 'stdin_read', 'inferred_idle', 'timeout',
      'session_exit', 'does not prove it finished', 'background']) {
      assert.ok(sendTool.description.includes(phrase), `terminal_send describes ${phrase}`);
    }
    // input or keys: exactly one, which the server checks (hosts refuse a top-level oneOf).
    assert.deepEqual(sendTool.inputSchema.required, ['sessionId']);
    for (const phrase of ['keys', '"C-c"', '"Escape", ":q!", "Enter"', 'Up']) {
      assert.ok(sendTool.description.includes(phrase), `terminal_send teaches keys: ${phrase}`);
    }
    const validateInput = ajv2020.compile(sendTool.inputSchema);
    assert.ok(validateInput({ sessionId: 'pty-1', input: 'ls\n', timeoutMs: 1000 }));
    assert.ok(validateInput({ sessionId: 'pty-1', keys: ['C-c'] }));
    assert.ok(!validateInput({ sessionId: 'pty-1', keys: [] }), 'keys is not empty');
    assert.ok(!validateInput({ sessionId: 'pty-1', keys: 'C-c' }), 'keys is a list');
    assert.ok(!validateInput({ sessionId: 'pty-1', input: 'x', colour: 1 }), 'closed object');
  });

await step('resources: ptybox://policy lists, reads and subscribes', async () => {
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri), ['ptybox://policy']);
  const read = await client.readResource({ uri: 'ptybox://policy' });
  const json = JSON.parse(read.contents.find((c) => c.mimeType === 'application/json').text);
  assert.equal(json.mode, 'workspace-write');
  assert.equal(json.workspaceRoot, workspace);
  assert.equal(json.network, 'deny');
  assert.equal(read.contents.find((c) => c.mimeType === 'text/plain').text,
    client.getInstructions());
  assert.deepEqual(await client.subscribeResource({ uri: 'ptybox://policy' }), {});
  await assert.rejects(client.readResource({ uri: 'ptybox://nothing' }),
    (error) => error.code === -32002);
});

await step('terminal_open: a sandboxed (workspace-write) session', async () => {
  const opened = await call('terminal_open', { name: 'sdk' });
  assert.equal(opened.isError, false, opened.content[0].text);
  const s = opened.structuredContent;
  assert.match(s.sessionId, /^pty-[0-9a-f]{32}$/);
  assert.equal(s.mode, 'workspace-write');
  assert.equal(s.cwd, workspace);
  assert.equal(s.name, 'sdk');
  assert.ok(Number.isInteger(s.pid));
  assert.ok(opened.content[0].text.startsWith(`Opened terminal ${s.sessionId} "sdk"`));
  state.session = s.sessionId;
  state.shellPid = s.pid;
});

await step('terminal_send: echo returns its output, exact readiness, exit code and cwd',
  async () => {
    const r = await send(state.session, 'echo hello from ptybox\n');
    assert.deepEqual(r.structuredContent, {
      viewport: 'hello from ptybox', waitReason: 'stdin_read',
      sessionStatus: { kind: 'running' }, truncated: false, exitCode: 0, cwd: workspace,
      foreground: null
    });
    assert.equal(r.content[0].text,
      `hello from ptybox\n[waitReason: stdin_read | exitCode: 0 | cwd: ${workspace}]`);
  });

await step('terminal_send: state persists (cwd, variables) and exit codes are the shell\'s',
  async () => {
    let r = await send(state.session, 'mkdir -p sub && cd sub && export GREETING=persisted; false\n');
    assert.equal(r.structuredContent.exitCode, 1);
    assert.equal(r.structuredContent.cwd, path.join(workspace, 'sub'));
    r = await send(state.session, 'echo "$GREETING in $(pwd)"\n');
    assert.equal(r.structuredContent.viewport, `persisted in ${path.join(workspace, 'sub')}`);
    assert.equal(r.structuredContent.exitCode, 0);
  });

await step('terminal_send keys and terminal_resize: named keys run a command; the size changes',
  async () => {
    const keyed = await call('terminal_send', {
      sessionId: state.session, keys: ['echo $((6*7))', 'Enter'] });
    assert.equal(keyed.isError, false, keyed.content[0].text);
    assert.equal(keyed.structuredContent.viewport, '42');
    assert.equal(keyed.structuredContent.exitCode, 0);
    const resized = await call('terminal_resize', { sessionId: state.session, cols: 90, rows: 33 });
    assert.equal(resized.isError, false, resized.content[0].text);
    assert.deepEqual(resized.structuredContent, { cols: 90, rows: 33 });
    assert.ok(outputValidators.get('terminal_resize')(resized.structuredContent));
    const r = await send(state.session, 'stty size\n');
    assert.equal(r.structuredContent.viewport, '33 90');
    const bad = await call('terminal_send', { sessionId: state.session, keys: ['C-Foo'] });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /unknown key "C-Foo"/);
  });

await step('the sandbox: the workspace is writable, the rest of the host is not', async () => {
  let r = await send(state.session, `echo written > ${workspace}/from-sandbox.txt\n`);
  assert.equal(r.structuredContent.exitCode, 0, r.content[0].text);
  assert.equal(fs.readFileSync(path.join(workspace, 'from-sandbox.txt'), 'utf8'), 'written\n');
  r = await send(state.session, 'touch /usr/ptybox-must-not-exist\n');
  assert.notEqual(r.structuredContent.exitCode, 0);
  assert.match(r.structuredContent.viewport, /Read-only file system/);
  assert.ok(!fs.existsSync('/usr/ptybox-must-not-exist'));
});

await step('terminal_read: pages the scrollback with cursors up to the newest output', async () => {
  await send(state.session, 'for i in $(seq 1 40); do echo line$i; done\n');
  let page = await call('terminal_read', { sessionId: state.session, maxBytes: 64 });
  let all = page.structuredContent.text;
  assert.ok(Buffer.byteLength(all) <= 64);
  assert.equal(page.structuredContent.end, false);
  assert.match(page.content[0].text, /more: pass cursor \d+/);
  for (let i = 0; i < 200 && !page.structuredContent.end; i += 1) {
    page = await call('terminal_read', {
      sessionId: state.session, cursor: page.structuredContent.nextCursor, maxBytes: 64
    });
    all += page.structuredContent.text;
  }
  assert.equal(page.structuredContent.end, true);
  assert.ok(all.includes('hello from ptybox\n'));
  assert.ok(all.includes('line1\n') && all.includes('line40\n'));
  const screen = await call('terminal_read', { sessionId: state.session, view: 'screen' });
  assert.match(screen.structuredContent.text, /line40/);
});

await step('background send: terminal_output collects the output until done', async () => {
  const started = await send(state.session, 'echo bg-start; sleep 0.3; echo bg-done\n',
    { background: true });
  assert.match(started.structuredContent.operationId, /^op-/);
  let output = '';
  let last;
  await waitFor('the background send settles', async () => {
    last = await call('terminal_output', { sessionId: state.session });
    output += last.structuredContent.output;
    return last.structuredContent.done;
  });
  assert.ok(output.includes('bg-done'), output);
  assert.equal(last.structuredContent.result.waitReason, 'stdin_read');
  assert.equal(last.structuredContent.result.exitCode, 0);
  assert.match(last.content[0].text, /\[done\] \[waitReason: stdin_read \| exitCode: 0/);
});

// What the model receives: every result within --max-result-bytes (default 16384), counting the
// whole JSON-RPC line, head and tail kept, and a terminal_read pointer that returns the rest.
function responseBytes(id) {
  const response = transcript.filter((e) => e.direction === 'server->client' &&
    e.message.id === id).at(-1);
  return Buffer.byteLength(JSON.stringify(response.message));
}
function lastCallId() {
  return transcript.filter((e) => e.direction === 'client->server' &&
    e.message.method === 'tools/call').at(-1).message.id;
}
const POINTER = /terminal_read \{"sessionId": "([^"]+)", "cursor": (\d+), "maxBytes": (\d+)\}/;

await step('budget: seq 1 200000 is one result of at most 16 KiB with its tail and a pointer',
  async () => {
    const r = await send(state.session, 'seq 1 200000\n', { timeoutMs: 120000 });
    const bytes = responseBytes(lastCallId());
    console.log(`# seq 1 200000 over MCP: ${bytes} bytes`);
    assert.ok(bytes <= 16384, `the answer is ${bytes} bytes`);
    const s = r.structuredContent;
    assert.equal(s.waitReason, 'stdin_read');
    assert.equal(s.exitCode, 0);
    for (const text of [s.viewport, r.content[0].text]) {
      assert.ok(text.startsWith('1\n2\n3\n'), 'the head is kept');
      assert.ok(text.includes('199999\n200000'), 'the tail is kept');
      assert.match(text, POINTER);
    }
    const [, id, cursor, maxBytes] = s.viewport.match(POINTER);
    assert.equal(id, state.session);
    // The pointer works: the page starts right after the kept head, or, when the scrollback
    // (its last 10,000 lines) no longer has the head's neighbours, the line says so and points
    // at the oldest kept line, where the read starts exactly; its pages end right before the
    // kept tail.
    const page = await call('terminal_read', { sessionId: id, cursor: Number(cursor),
      maxBytes: Number(maxBytes) });
    assert.equal(page.isError, false, page.content[0].text);
    assert.ok(responseBytes(lastCallId()) <= 16384, 'the page is within the budget too');
    const tailFirst = s.viewport.slice(s.viewport.lastIndexOf(']\n') + 2).split('\n')[0];
    assert.ok(page.structuredContent.text.length > 0);
    assert.equal(page.structuredContent.truncated, false, 'the pointer names only kept bytes');
    assert.equal(page.structuredContent.cursor, Number(cursor));
    const headLast = s.viewport.slice(0, s.viewport.indexOf('\n[... ')).split('\n').at(-1);
    const pageFirst = Number(page.structuredContent.text.split('\n')[0]);
    if (/; only their last [\d,]+ bytes are kept: terminal_read/.test(s.viewport)) {
      assert.ok(pageFirst > Number(headLast) + 1, `the oldest kept line: ${pageFirst}`);
    } else {
      assert.equal(pageFirst, Number(headLast) + 1);
    }
    // Page to the end of the pointed range: it stops right before the tail.
    let at = page.structuredContent.nextCursor;
    let last = page.structuredContent.text;
    const end = Number(cursor) + Number(maxBytes);
    while (at < end) {
      const next = await call('terminal_read', { sessionId: id, cursor: at,
        maxBytes: Math.min(5000, end - at) });
      last = next.structuredContent.text;
      at = next.structuredContent.nextCursor;
    }
    assert.equal(at, end);
    assert.equal(Number(last.trimEnd().split('\n').at(-1)) + 1, Number(tailFirst));
  });

await step('budget: a 24 KB output the scrollback keeps whole is exactly head + pages + tail',
  async () => {
    const r = await send(state.session, 'seq 1 5000\n');
    const v = r.structuredContent.viewport;
    const [, , cursor, maxBytes] = v.match(POINTER);
    const head = v.slice(0, v.indexOf('[... '));
    const tail = v.slice(v.indexOf('...]\n') + 5);
    let middle = '';
    let at = Number(cursor);
    const end = at + Number(maxBytes);
    while (at < end) {
      const page = await call('terminal_read', { sessionId: state.session, cursor: at,
        maxBytes: end - at });
      middle += page.structuredContent.text;
      at = page.structuredContent.nextCursor;
    }
    const expected = Array.from({ length: 5000 }, (_, i) => String(i + 1)).join('\n');
    assert.equal(head + middle + tail, expected);
  });

await step('foreground and terminal_wait: a running command is named; a wait settles at the ' +
  'prompt without typing', async () => {
  const r = await send(state.session, 'sleep 2; echo slept\n', { silenceMs: 300 });
  const s = r.structuredContent;
  assert.equal(s.waitReason, 'inferred_idle');
  assert.ok(s.foreground && Number.isInteger(s.foreground.pgid), JSON.stringify(s));
  assert.match(s.foreground.command, /^sleep 2/);
  assert.match(r.content[0].text,
    /\[still running: "sleep 2"; wait with terminal_wait or interrupt with terminal_signal\]/);
  const waited = await call('terminal_wait', { sessionId: state.session, timeoutMs: 60000,
    silenceMs: 60000 });
  assert.equal(waited.isError, false, waited.content[0].text);
  assert.equal(waited.structuredContent.waitReason, 'stdin_read');
  assert.equal(waited.structuredContent.exitCode, 0);
  assert.equal(waited.structuredContent.viewport, 'slept');
  assert.equal(waited.structuredContent.foreground, null);
});

await step('shell changes: exit codes stay exact after hooks, job notices, a heredoc, stty sane, ' +
  'exec bash and exec $SHELL', async () => {
  const opened = await call('terminal_open', { name: 'changes', env: { SHELL: '/bin/bash' } });
  assert.equal(opened.isError, false, opened.content[0].text);
  const id = opened.structuredContent.sessionId;
  const exact = async (input, code) => {
    const r = await send(id, input, { silenceMs: 20000, timeoutMs: 30000 });
    assert.equal(r.structuredContent.waitReason, 'stdin_read', `${input}: ${r.content[0].text}`);
    assert.equal(r.structuredContent.exitCode, code, `${input}: ${r.content[0].text}`);
    assert.equal(r.structuredContent.cwd !== null, true, `${input}: ${r.content[0].text}`);
    return r.structuredContent;
  };
  for (const change of ["PROMPT_COMMAND='history -a'\n",
                        '_h() { return 0; }; PROMPT_COMMAND="_h;$PROMPT_COMMAND"\n',
                        'sleep 0.1 & wait\n', "cat > heredoc.txt <<'EOF'\nline\nEOF\n",
                        'stty sane\n', 'exec bash\n', 'exec $SHELL\n']) {
    await send(id, change, { silenceMs: 20000, timeoutMs: 30000 });
    const s = await exact('echo one; (exit 4)\n', 4);
    assert.equal(s.viewport, 'one', `after ${change}: ${JSON.stringify(s)}`);
  }
  const closed = await call('terminal_close', { sessionId: id });
  assert.equal(closed.isError, false, closed.content[0].text);
});

await step('pattern: settles at the matching line with the match; a bad one is refused',
  async () => {
    const r = await send(state.session,
      "sh -c 'sleep 1; echo \"Listening on 8000\"; sleep 60'\n",
      { pattern: 'Listening on \\d+', silenceMs: 60000, timeoutMs: 60000 });
    const s = r.structuredContent;
    assert.equal(s.waitReason, 'pattern');
    assert.deepEqual(s.match, { text: 'Listening on 8000', line: 'Listening on 8000' });
    assert.ok(s.foreground, 'the server is still running');
    // SIGKILL: a SIGINT between sh's echo and its fork of the last sleep may not end sh.
    const stopped = await call('terminal_signal', { sessionId: state.session, signal: 'SIGKILL' });
    assert.equal(stopped.isError, false, stopped.content[0].text);
    const after = await call('terminal_wait', { sessionId: state.session, timeoutMs: 60000,
      silenceMs: 60000 });
    assert.equal(after.structuredContent.waitReason, 'stdin_read');
    assert.equal(after.structuredContent.exitCode, 137);
    const bad = await call('terminal_send', { sessionId: state.session, input: 'true\n',
      pattern: '(unclosed' });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /^invalid_params: terminal_send: pattern does not compile/);
  });

await step('concurrency: a blocked send does not delay reads or a send on another terminal;' +
  ' a second send on it is busy', async () => {
  const other = await call('terminal_open', { name: 'other' });
  state.other = other.structuredContent.sessionId;
  await send(state.session, `mkfifo ${workspace}/gate\n`);
  let settled = false;
  // Blocks opening the FIFO (not reading the terminal) until the other terminal writes it.
  const blocked = call('terminal_send', {
    sessionId: state.session, input: `cat ${workspace}/gate; echo released\n`,
    silenceMs: GUARD_MS, timeoutMs: GUARD_MS
  }).then((r) => { settled = true; return r; });
  await waitFor('the blocked send holds the terminal', async () =>
    (await call('terminal_status', { sessionId: state.session })).structuredContent.busy);
  const busy = await call('terminal_send', { sessionId: state.session, input: 'echo no\n' });
  assert.equal(busy.isError, true);
  assert.match(busy.content[0].text, /^busy: /);
  const read = await call('terminal_read', { sessionId: state.session });
  assert.equal(read.isError, false);
  const list = await call('terminal_list');
  const byName = Object.fromEntries(list.structuredContent.sessions.map((x) => [x.name, x]));
  assert.equal(byName.sdk.busy, true);
  assert.equal(byName.other.busy, false);
  assert.equal(settled, false, 'the blocked send is still running');
  await send(state.other, `echo open-sesame > ${workspace}/gate\n`);
  const r = await blocked;
  assert.equal(r.structuredContent.viewport, 'open-sesame\nreleased');
  assert.equal(r.structuredContent.waitReason, 'stdin_read');
});

// Resolves once `token` shows in the terminal's scrollback: the command that printed it runs.
async function waitForOutput(sessionId, token) {
  await waitFor(`"${token}" on ${sessionId}`, async () => {
    const page = await call('terminal_read', { sessionId, view: 'screen' });
    return page.structuredContent.text.includes(token);
  });
}

// `exec` keeps one process, in its own foreground group, from the token to the sleep.
const SLEEPER = (token) => `sh -c 'echo ${token}-$((6*7)); exec sleep 300'\n`;

await step('terminal_signal: SIGINT reaches the foreground program, not the shell', async () => {
  const running = call('terminal_send', {
    sessionId: state.other, input: SLEEPER('sig'), silenceMs: GUARD_MS, timeoutMs: GUARD_MS
  });
  await waitForOutput(state.other, 'sig-42');
  const signalled = await call('terminal_signal', { sessionId: state.other, signal: 'SIGINT' });
  assert.equal(signalled.isError, false, signalled.content[0].text);
  assert.equal(signalled.structuredContent.delivered, true);
  const r = await running;
  assert.equal(r.structuredContent.waitReason, 'stdin_read');
  assert.equal(r.structuredContent.exitCode, 130);
  assert.equal(r.structuredContent.sessionStatus.kind, 'running');
});

await step('notifications/cancelled: aborting a send interrupts it; no response follows',
  async () => {
    const controller = new AbortController();
    const canceled = client.callTool({
      name: 'terminal_send',
      arguments: { sessionId: state.other, input: SLEEPER('cancel'), silenceMs: GUARD_MS,
        timeoutMs: GUARD_MS }
    }, undefined, { signal: controller.signal });
    await waitForOutput(state.other, 'cancel-42');
    controller.abort('the user changed their mind');
    await assert.rejects(canceled);
    await waitFor('the canceled send releases the terminal', async () =>
      !(await call('terminal_status', { sessionId: state.other })).structuredContent.busy);
    const r = await send(state.other, 'echo "after-cancel $?"\n');
    assert.equal(r.structuredContent.viewport, 'after-cancel 130');
    const cancelNote = transcript.find((e) => e.message.method === 'notifications/cancelled');
    assert.equal(cancelNote.message.params.reason, 'the user changed their mind');
    const canceledId = cancelNote.message.params.requestId;
    assert.ok(!transcript.some((e) => e.direction === 'server->client' &&
      e.message.id === canceledId), 'the canceled request got no response');
  });

await step('tool errors are results with isError: bogus id, bad arguments, unknown tool',
  async () => {
    const bogus = 'pty-00000000000000000000000000000000';
    for (const [name, args] of [
      ['terminal_send', { sessionId: bogus, input: 'echo x\n' }],
      ['terminal_read', { sessionId: bogus }],
      ['terminal_close', { sessionId: bogus }]
    ]) {
      const r = await call(name, args);
      assert.equal(r.isError, true, name);
      assert.equal(r.structuredContent, undefined);
      assert.match(r.content[0].text, /^not_found: no session pty-0+ is open/);
    }
    const bad = await call('terminal_open', { cols: 'wide' });
    assert.equal(bad.isError, true);
    assert.match(bad.content[0].text, /cols/);
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }),
      (error) => error.code === -32602 && /no_such_tool/.test(error.message));
  });

await step('policy_set_mode is fenced (isError, mode_fenced) while a terminal is open',
  async () => {
    const r = await call('policy_set_mode', { mode: 'read-only' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /^mode_fenced: /);
    assert.deepEqual(updates, []);
  });

await step('terminal_close: every terminal ends, its shell included', async () => {
  for (const id of [state.session, state.other]) {
    const closed = await call('terminal_close', { sessionId: id });
    assert.equal(closed.isError, false, closed.content[0].text);
    assert.equal(closed.structuredContent.sessionStatus.kind, 'exited');
  }
  assert.ok(processGone(state.shellPid), 'the shell is gone when terminal_close answers');
  const list = await call('terminal_list');
  assert.deepEqual(list.structuredContent.sessions, []);
});

await step('a mode change announces notifications/resources/updated and a superseding clause',
  async () => {
    const r = await call('policy_set_mode', { mode: 'read-only' });
    assert.equal(r.isError, false, r.content[0].text);
    assert.deepEqual(r.structuredContent, { mode: 'read-only' });
    assert.match(r.content[0].text,
      /Sandbox policy: read-only mode; writable: only a private \/tmp; .*network denied\./);
    assert.ok(r.content.some((c) => c.type === 'resource_link' && c.uri === 'ptybox://policy'));
    await waitFor('the resource update notification', () => updates.length > 0);
    assert.deepEqual(updates, ['ptybox://policy']);
    const updateIndex = transcript.findIndex((e) =>
      e.message.method === 'notifications/resources/updated');
    const resultIndex = transcript.findIndex((e) => e.direction === 'server->client' &&
      e.message.result?.structuredContent?.mode === 'read-only');
    assert.ok(updateIndex >= 0 && updateIndex < resultIndex, 'announced before the result');
    const read = await client.readResource({ uri: 'ptybox://policy' });
    const json = JSON.parse(read.contents.find((c) => c.mimeType === 'application/json').text);
    assert.equal(json.mode, 'read-only');
    const same = await call('policy_set_mode', { mode: 'read-only' });
    assert.equal(same.isError, false);
    assert.equal(updates.length, 1, 'no update when nothing changed');
  });

await step('a read-only session cannot write the workspace', async () => {
  const opened = await call('terminal_open', {});
  assert.equal(opened.structuredContent.mode, 'read-only');
  state.readOnly = opened.structuredContent.sessionId;
  state.readOnlyPid = opened.structuredContent.pid;
  const r = await send(state.readOnly, `touch ${workspace}/denied\n`);
  assert.notEqual(r.structuredContent.exitCode, 0);
  assert.match(r.structuredContent.viewport, /Read-only file system/);
  assert.ok(!fs.existsSync(path.join(workspace, 'denied')));
});

await step('disconnect: closing the client ends the server and the sessions it still had',
  async () => {
    const serverPid = transport.pid;
    await withGuard(client.close(), 'client.close');
    await waitFor('the server exits', () => processGone(serverPid));
    await waitFor('the left-open shell ends', () => processGone(state.readOnlyPid));
    assert.deepEqual(clientErrors.map(String), [], 'the SDK saw no protocol error (no response ' +
      'to a canceled request, nothing unparsable)');
  });

// --- model consent: more clients, each with its own server and workspace ---------------------
const cleanup = [];

// A client declaring `capabilities`, answering elicitation/create with `onElicit` (when given).
async function openClient({ capabilities = {}, onElicit, args = [] } = {}) {
  const ws = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ptybox-mcp-consent-')));
  cleanup.push(ws);
  const t = new StdioClientTransport({
    command: binary,
    args: ['mcp', '--workspace', ws, ...args],
    env: { PTYBOX_OPERATOR_POLICY: path.join(ws, 'no-operator-policy.yaml') },
    stderr: 'pipe'
  });
  t.stderr?.on('data', (chunk) => { stderrText += chunk.toString(); });
  const c = new Client({ name: 'ptybox-sdk-consent', version: '1.0.0' }, { capabilities });
  const asked = [];
  if (onElicit) {
    c.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      asked.push(request.params);
      return onElicit(request, extra);
    });
  }
  await withGuard(c.connect(t), 'initialize');
  return { client: c, workspace: ws, asked, pid: t.pid };
}

async function mode(c) {
  return (await callWith(c, 'policy_resolve')).structuredContent.mode;
}

// Opens a terminal and tries to write a file in a fresh host directory outside the workspace;
// true when the file reached the host.
async function writesOutside(c, name) {
  const outside = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ptybox-mcp-outside-')));
  cleanup.push(outside);
  const opened = await callWith(c, 'terminal_open', {});
  assert.equal(opened.isError, false, opened.content[0].text);
  const id = opened.structuredContent.sessionId;
  const target = path.join(outside, name);
  const r = await callWith(c, 'terminal_send', { sessionId: id, input: `echo escaped > ${target}\n` });
  assert.equal(r.structuredContent.waitReason, 'stdin_read', r.content[0].text);
  await callWith(c, 'terminal_close', { sessionId: id });
  return fs.existsSync(target);
}

await step('consent: a host with elicitation whose user accepts gets the wider mode', async () => {
  const host = await openClient({
    capabilities: { elicitation: {} },
    onElicit: async () => ({ action: 'accept', content: {} })
  });
  const r = await callWith(host.client, 'policy_set_mode', { mode: 'danger-full-access' });
  assert.equal(r.isError, false, r.content[0].text);
  assert.deepEqual(r.structuredContent, { mode: 'danger-full-access' });
  assert.equal(host.asked.length, 1);
  const asked = host.asked[0];
  assert.match(asked.message, /from workspace-write to danger-full-access/);
  assert.match(asked.message, new RegExp(`Now: workspace-write mode; writable: "${host.workspace}"`));
  assert.match(asked.message, /Requested: danger-full-access mode; no sandbox/);
  assert.equal(asked.requestedSchema.type, 'object');
  assert.ok(await writesOutside(host.client, 'accepted'),
    'a terminal opened after the accept writes outside the workspace');
  // Narrowing is free, and coming back to what the user accepted does not ask again.
  for (const m of ['read-only', 'workspace-write', 'danger-full-access']) {
    const again = await callWith(host.client, 'policy_set_mode', { mode: m });
    assert.equal(again.isError, false, again.content[0].text);
  }
  assert.equal(host.asked.length, 1);
  await host.client.close();
});

for (const action of ['decline', 'cancel']) {
  await step(`consent: a user who answers ${action} leaves the sandbox confined`, async () => {
    const host = await openClient({
      capabilities: { elicitation: {} },
      onElicit: async () => ({ action })
    });
    const r = await callWith(host.client, 'policy_set_mode', { mode: 'danger-full-access' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /^policy_denied: the sandbox stays in workspace-write mode/);
    assert.match(r.content[0].text, action === 'decline' ? /the user declined it/
      : /the user dismissed the request/);
    assert.match(r.content[0].text, /restart `ptybox mcp` with `--mode danger-full-access`/);
    assert.equal(host.asked.length, 1);
    assert.equal(await mode(host.client), 'workspace-write');
    assert.ok(!(await writesOutside(host.client, action)),
      'a terminal opened after the refusal cannot write outside the workspace');
    await host.client.close();
  });
}

await step('consent: a host without elicitation is refused with what to do', async () => {
  const host = await openClient({});
  const r = await callWith(host.client, 'policy_set_mode', { mode: 'danger-full-access' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /this MCP host cannot ask the user/);
  assert.match(r.content[0].text, /Continue within workspace-write mode/);
  assert.match(r.content[0].text, /--mode danger-full-access/);
  assert.equal(await mode(host.client), 'workspace-write');
  assert.ok(!(await writesOutside(host.client, 'no-elicitation')));
  const narrowed = await callWith(host.client, 'policy_set_mode', { mode: 'read-only' });
  assert.equal(narrowed.isError, false, 'narrowing always works');
  await host.client.close();
});

await step('consent: aborting the tool call withdraws the question; nothing changes', async () => {
  let withdrawn;
  const host = await openClient({
    capabilities: { elicitation: {} },
    // The user never answers; the server's notifications/cancelled aborts this handler.
    onElicit: (request, extra) => new Promise((resolve) => {
      extra.signal.addEventListener('abort', () => {
        withdrawn = String(extra.signal.reason);
        resolve({ action: 'accept' });
      });
    })
  });
  const controller = new AbortController();
  const pending = host.client.callTool({ name: 'policy_set_mode',
    arguments: { mode: 'danger-full-access' } }, undefined, { signal: controller.signal });
  await waitFor('the question reaches the user', () => host.asked.length === 1);
  controller.abort('the model moved on');
  await assert.rejects(pending);
  await waitFor('the server withdraws the question', () => withdrawn !== undefined);
  assert.match(withdrawn, /the model moved on/);
  assert.equal(await mode(host.client), 'workspace-write');
  assert.ok(!(await writesOutside(host.client, 'withdrawn')));
  await host.client.close();
});

await step('--mode sets the start: read-only, and workspace-write is then a widening', async () => {
  const host = await openClient({
    args: ['--mode', 'read-only'],
    capabilities: { elicitation: {} },
    onElicit: async () => ({ action: 'accept', content: {} })
  });
  assert.equal(host.client.getInstructions(), 'Sandbox policy: read-only mode; writable: only a ' +
    'private /tmp; everything else read-only; network denied.');
  const read = await host.client.readResource({ uri: 'ptybox://policy' });
  const json = JSON.parse(read.contents.find((c) => c.mimeType === 'application/json').text);
  assert.equal(json.mode, 'read-only');
  assert.equal(json.modelConsent.widestWithoutConsent, 'read-only');
  const opened = await callWith(host.client, 'terminal_open', {});
  assert.equal(opened.structuredContent.mode, 'read-only');
  const r = await callWith(host.client, 'terminal_send', {
    sessionId: opened.structuredContent.sessionId, input: 'touch denied\n' });
  assert.notEqual(r.structuredContent.exitCode, 0);
  assert.ok(!fs.existsSync(path.join(host.workspace, 'denied')));
  await callWith(host.client, 'terminal_close', { sessionId: opened.structuredContent.sessionId });
  const wider = await callWith(host.client, 'policy_set_mode', { mode: 'workspace-write' });
  assert.equal(wider.isError, false, wider.content[0].text);
  assert.equal(host.asked.length, 1, 'the user was asked');
  assert.match(host.asked[0].message, /from read-only to workspace-write/);
  await host.client.close();
});

for (const dir of cleanup) fs.rmSync(dir, { recursive: true, force: true });

if (transcriptPath) {
  fs.writeFileSync(transcriptPath, transcript.map((e) => JSON.stringify(e)).join('\n') + '\n');
}
fs.rmSync(workspace, { recursive: true, force: true });
console.log(`1..${tap.steps}`);
console.log(`# node ${process.version}, @modelcontextprotocol/sdk ${JSON.parse(fs.readFileSync(
  new URL('./node_modules/@modelcontextprotocol/sdk/package.json', import.meta.url))).version}`);
console.log(`# ${tap.passed} passed, ${tap.failed} failed`);
if (tap.failed > 0) {
  console.log('# ptybox mcp stderr:');
  for (const line of stderrText.split('\n')) console.log(`#   ${line}`);
}
process.exit(tap.failed > 0 ? 1 : 0);

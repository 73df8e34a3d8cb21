// `ptybox mcp --connect SOCKET` with the official MCP TypeScript SDK client (issue 15): a real
// `ptybox serve --socket` daemon whose operator policy gives owners a detach grace; an MCP
// server connected to it opens a terminal, sets shell state and starts a long command; the MCP
// process is killed (SIGKILL, as a crashing host would leave it); a new one attaches with the
// kept token, reads the command's output and result, and keeps using the same shell.
// Prints TAP; exits 1 on any failure.
//   node connect_sdk_test.mjs PATH/TO/ptybox
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { GUARD_MS, binary, processGone, step, tap, waitFor } from './sdk_test_support.mjs';

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ptybox-mcp-connect-')));
const workspace = path.join(root, 'ws');
const state = path.join(root, 'state');
const socket = path.join(root, 'ptybox.sock');
const policy = path.join(root, 'operator.yaml');
fs.mkdirSync(workspace);
fs.writeFileSync(policy, 'version: 1\nlimits: {detachGraceMs: 600000}\n');

let daemonLog = '';
const daemon = spawn(binary, ['serve', '--socket', socket, '--workspace', workspace,
  '--policy', policy], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PTYBOX_LOG: 'info' } });
daemon.stderr.on('data', (chunk) => { daemonLog += chunk.toString(); });

let mcpLog = '';
async function startMcp() {
  const transport = new StdioClientTransport({
    command: binary,
    args: ['mcp', '--connect', socket, '--workspace', workspace],
    env: { XDG_STATE_HOME: state, PTYBOX_LOG: 'info' },
    stderr: 'pipe'
  });
  transport.stderr?.on('data', (chunk) => { mcpLog += chunk.toString(); });
  const client = new Client({ name: 'ptybox-connect-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.isError, false, `${name}: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
}

let sessionId;
let first;
let second;

await step('the daemon listens', async () => {
  await waitFor('the socket', () => fs.existsSync(socket));
});

await step('mcp --connect opens a terminal on the daemon and starts a long command', async () => {
  first = await startMcp();
  const opened = await call(first.client, 'terminal_open', { name: 'build' });
  sessionId = opened.sessionId;
  assert.match(sessionId, /^pty-[0-9a-f]{32}$/);
  const set = await call(first.client, 'terminal_send', { sessionId, input: 'KEPT=state-7\n' });
  assert.equal(set.waitReason, 'stdin_read');
  const started = await call(first.client, 'terminal_send', {
    // A long silence: the send must settle at the prompt after the echo, not on the quiet sleep.
    sessionId, input: 'sleep 2; echo finished-$KEPT\n', background: true, silenceMs: 120000
  });
  assert.match(started.operationId, /^op-/);
});

await step('the owner token is kept in a 0600 file under XDG_STATE_HOME/ptybox', async () => {
  const dir = path.join(state, 'ptybox');
  const files = fs.readdirSync(dir).filter((name) => name.endsWith('.token'));
  assert.equal(files.length, 1, `files: ${files}`);
  const st = fs.statSync(path.join(dir, files[0]));
  assert.equal(st.mode & 0o777, 0o600);
  const token = fs.readFileSync(path.join(dir, files[0]), 'utf8').trim();
  assert.ok(token.length >= 38, 'at least 128 bits');
  assert.ok(!daemonLog.includes(token), 'the daemon never logs the token');
  assert.ok(!mcpLog.includes(token), 'the MCP server never logs the token');
});

await step('the MCP process is killed; its terminal keeps running on the daemon', async () => {
  const pid = first.transport.pid;
  assert.ok(pid > 0);
  process.kill(pid, 'SIGKILL');
  await waitFor('the MCP process to end', () => processGone(pid));
  await first.client.close().catch(() => {});
  await waitFor('the daemon to detach the owner', () => daemonLog.includes('detached'));
});

await step('a restarted mcp --connect finds the terminal, the output and the shell state', async () => {
  second = await startMcp();
  const list = await call(second.client, 'terminal_list', {});
  assert.deepEqual(list.sessions.map((s) => s.sessionId), [sessionId]);
  assert.equal(list.sessions[0].name, 'build');
  let output = '';
  let done;
  await waitFor('the long command to finish', async () => {
    const piece = await call(second.client, 'terminal_output', { sessionId });
    output += piece.output;
    done = piece;
    return piece.done;
  });
  assert.match(output, /finished-state-7/, JSON.stringify(done));
  assert.equal(done.result.waitReason, 'stdin_read');
  assert.equal(done.result.exitCode, 0);
  const again = await call(second.client, 'terminal_send', { sessionId, input: 'echo again-$KEPT\n' });
  assert.equal(again.viewport, 'again-state-7');
});

await step('instructions and the policy resource state the attached owner\'s mode', async () => {
  const mode = (await call(second.client, 'policy_resolve', {})).mode;
  assert.match(second.client.getInstructions() ?? '', new RegExp(`${mode} mode`));
  const resource = await second.client.readResource({ uri: 'ptybox://policy' });
  assert.match(resource.contents[0].text, new RegExp(`${mode} mode`));
});

await step('the daemon ends every session when it stops', async () => {
  await second.client.close();
  daemon.kill('SIGTERM');
  await waitFor('the daemon to exit', () => daemon.exitCode !== null || daemon.signalCode !== null);
  assert.equal(daemon.exitCode, 0, daemonLog);
});

if (!(daemon.exitCode !== null || daemon.signalCode !== null)) daemon.kill('SIGKILL');
fs.rmSync(root, { recursive: true, force: true });
console.log(`1..${tap.steps}`);
console.log(`# passed ${tap.passed}, failed ${tap.failed}`);
if (tap.failed > 0) {
  console.log('# daemon log:\n' + daemonLog.split('\n').map((l) => `#   ${l}`).join('\n'));
  console.log('# mcp log:\n' + mcpLog.split('\n').map((l) => `#   ${l}`).join('\n'));
}
process.exit(tap.failed > 0 ? 1 : 0);

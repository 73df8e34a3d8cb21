// What both SDK tests (sdk_client_test.mjs, connect_sdk_test.mjs) share: the binary under test,
// the hang guard, a tiny TAP runner whose steps run in order and share state, and waiting for
// a condition or a process. Copied beside them by run_sdk_client_test.sh.
import fs from 'node:fs';
import path from 'node:path';

export const binary = path.resolve(process.argv[2] ?? 'build/bin/ptybox');
export const GUARD_MS = 60_000; // hang guard only: nothing asserts durations

export const tap = { passed: 0, failed: 0, steps: 0 };
export async function step(name, fn) {
  tap.steps += 1;
  try {
    await fn();
    tap.passed += 1;
    console.log(`ok ${tap.steps} - ${name}`);
  } catch (error) {
    tap.failed += 1;
    console.log(`not ok ${tap.steps} - ${name}`);
    for (const line of String(error?.stack ?? error).split('\n')) console.log(`  # ${line}`);
  }
}

export async function waitFor(what, predicate) {
  const deadline = Date.now() + GUARD_MS;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`hang guard: ${what}`);
}

export function processGone(pid) {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if (error.code === 'ESRCH') return true;
    throw error;
  }
  // A zombie still answers kill(0): it has ended all the same.
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? true;
  } catch {
    return true;
  }
}

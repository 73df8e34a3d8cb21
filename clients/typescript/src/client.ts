// The client: one connection to a ptybox daemon (docs/protocol.md), over `serve --socket PATH`
// or a spawned `serve --stdio`. Requests run concurrently, as the contract allows, answers are
// matched by id; aborting a call's AbortSignal sends `$/cancelRequest` for it.

import { spawn, type ChildProcess } from "node:child_process";
import { createConnection, type Socket } from "node:net";

import { ConnectionClosed, ProtocolError, PtyboxError, errorFromResponse } from "./errors.js";
import type {
  AttachResult,
  Methods,
  Mode,
  OpenParams,
  OpenResult,
  OperationStarted,
  OutputResult,
  OwnerInfo,
  PolicyResult,
  ReadParams,
  ReadResult,
  SendParams,
  SendResult,
  SessionInfo,
  SessionStatus,
  Signal,
  StatusResult,
  WaitParams,
  WatchEvent,
  WatchResized,
  WatchResult,
} from "./types.js";

export interface CallOptions {
  /** Aborting it cancels the request (`$/cancelRequest`); the call rejects with its reason. */
  signal?: AbortSignal;
}

export interface ConnectOptions {
  /** Attach to the detached owner that has this token (owner_attach) before anything else. */
  ownerToken?: string;
}

export interface SpawnOptions {
  /** The ptybox binary (default: `ptybox` on PATH). */
  ptybox?: string;
  workspace?: string;
  policy?: string;
  /** More arguments for `ptybox serve --stdio`. */
  args?: string[];
  /** Where the server's log (standard error) goes: "inherit" (default) or "ignore". */
  stderr?: "inherit" | "ignore";
}

interface Pending {
  method: string;
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

/** The largest answer line this client buffers: only stops a broken peer from growing it. */
const MAX_LINE_CHARS = 64 * 1024 * 1024;

export class PtyboxClient {
  /** owner_attach's result when connect() was given an ownerToken. */
  attached: AttachResult | null = null;

  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private buffered = "";
  private failure: PtyboxError | null = null;
  private closing = false;
  // Watch events nobody has taken yet (nextWatchEvent, watchEvents), in the server's order.
  // Unbounded here: the daemon drops a watcher that falls 1 MiB behind, so consume them.
  private readonly events: WatchEvent[] = [];
  private readonly eventWaiters: { resolve: (event: WatchEvent) => void; reject: (error: Error) => void }[] = [];
  private readonly watchListeners = new Set<(event: WatchEvent) => void>();

  private constructor(
    private readonly input: Socket,
    private readonly output: Socket,
    private readonly process: ChildProcess | null,
    private readonly exited: Promise<number | null> | null,
  ) {
    input.setEncoding("utf8");
    input.on("data", (chunk) => this.receive(chunk));
    input.on("end", () => this.fail(new ConnectionClosed("the server closed the connection")));
    input.on("error", (e) => this.fail(new ConnectionClosed(`the connection failed: ${e.message}`)));
    if (output !== input) {
      output.on("error", (e) => this.fail(new ConnectionClosed(`the server's input failed: ${e.message}`)));
    }
  }

  /** Connects to `ptybox serve --socket PATH`. */
  static async connect(socketPath: string, options: ConnectOptions = {}): Promise<PtyboxClient> {
    const socket = createConnection(socketPath);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", (e) =>
        reject(
          new ConnectionClosed(
            `cannot connect to the ptybox daemon at ${socketPath}: ${e.code ?? e.message}; ` +
              "start it with `ptybox serve --socket PATH` or check the path",
          ),
        ),
      );
    });
    const client = new PtyboxClient(socket, socket, null, null);
    if (options.ownerToken !== undefined) {
      try {
        client.attached = await client.owner_attach({ ownerToken: options.ownerToken });
      } catch (e) {
        await client.close();
        throw e;
      }
    }
    return client;
  }

  /** Starts `ptybox serve --stdio` and talks to it over its standard input and output. */
  static async spawn(options: SpawnOptions = {}): Promise<PtyboxClient> {
    const binary = options.ptybox ?? "ptybox";
    const args = ["serve", "--stdio"];
    if (options.workspace !== undefined) args.push("--workspace", options.workspace);
    if (options.policy !== undefined) args.push("--policy", options.policy);
    args.push(...(options.args ?? []));
    const child = spawn(binary, args, { stdio: ["pipe", "pipe", options.stderr ?? "inherit"] });
    const exited = new Promise<number | null>((resolve) =>
      child.once("exit", (code, signal) => resolve(code ?? (signal === null ? null : 128))),
    );
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (e) =>
        reject(
          new ConnectionClosed(
            `cannot start ${binary}: ${e.code ?? e.message}; pass the ptybox binary as spawn({ptybox: PATH})`,
          ),
        ),
      );
    });
    child.on("error", () => {}); // later failures surface as the pipes' errors
    return new PtyboxClient(child.stdout, child.stdin, child, exited);
  }

  /** Ends the connection; the daemon closes this owner's sessions (unless detached). For a
   * spawned server: ends its input and resolves to its exit status. */
  async close(): Promise<number | null> {
    if (!this.closing) {
      this.closing = true;
      if (this.process === null) {
        // Once what was written is flushed, close the socket: the daemon then ends (or, with a
        // detach grace, detaches) this owner.
        if (!this.input.destroyed) {
          const closed = new Promise<void>((resolve) => this.input.once("close", resolve));
          this.output.end(() => this.output.destroy());
          await closed;
        }
      } else {
        this.output.end();
      }
    }
    return this.exited === null ? null : await this.exited;
  }

  /** Any method by its wire name, with wire params; resolves to the result as parsed JSON. */
  call<R = unknown>(method: string, params: object = {}, options: CallOptions = {}): Promise<R> {
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.closing) return Promise.reject(new ConnectionClosed(`${method}: this client is closed`));
    const id = ++this.nextId;
    return new Promise<R>((resolve, reject) => {
      const signal = options.signal;
      const onAbort = () => {
        if (!this.pending.has(id)) return;
        this.pending.delete(id);
        // Tell the server; its `canceled` answer is dropped when it arrives.
        this.write({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id, reason: String(signal?.reason ?? "aborted") } });
        reject(signal?.reason instanceof Error ? signal.reason : new PtyboxError(`${method}: aborted`));
      };
      if (signal?.aborted) {
        reject(signal.reason instanceof Error ? signal.reason : new PtyboxError(`${method}: aborted`));
        return;
      }
      this.pending.set(id, {
        method,
        resolve: (result) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(result as R);
        },
        reject: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.write({ jsonrpc: "2.0", id, method, params });
    });
  }

  private write(message: object): void {
    if (this.failure !== null || this.output.destroyed) return;
    this.output.write(JSON.stringify(message) + "\n");
  }

  private receive(chunk: string): void {
    this.buffered += chunk;
    let newline: number;
    while ((newline = this.buffered.indexOf("\n")) >= 0) {
      const line = this.buffered.slice(0, newline);
      this.buffered = this.buffered.slice(newline + 1);
      this.answer(line);
    }
    if (this.buffered.length > MAX_LINE_CHARS) {
      this.fail(new ProtocolError(`the server sent a line longer than ${MAX_LINE_CHARS} characters`));
      this.input.destroy();
    }
  }

  /** The next event of this connection's watches (terminal_watch), in the order the server sent
   * them; rejects with why the connection ended, when it did. Not used while a listener of
   * onWatchEvent is registered (the listeners get the events). */
  nextWatchEvent(): Promise<WatchEvent> {
    const queued = this.events.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.failure !== null) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.eventWaiters.push({ resolve, reject }));
  }

  /** `for await (const event of c.watchEvents())`: every watch event until the connection ends
   * (then the iteration stops; break to stop earlier). */
  async *watchEvents(): AsyncGenerator<WatchEvent, void, undefined> {
    for (;;) {
      let event: WatchEvent;
      try {
        event = await this.nextWatchEvent();
      } catch (e) {
        if (e instanceof PtyboxError) return;
        throw e;
      }
      yield event;
    }
  }

  /** Calls `listener` with each watch event as it arrives (instead of queueing it for
   * nextWatchEvent); returns the function that removes it. */
  onWatchEvent(listener: (event: WatchEvent) => void): () => void {
    this.watchListeners.add(listener);
    return () => this.watchListeners.delete(listener);
  }

  private notification(method: string, params: unknown): void {
    const event = watchEvent(method, params);
    if (event === null) return; // a notification this client does not know (a newer server's)
    if (this.watchListeners.size > 0) {
      // Outside this reader: a listener that throws is its own unhandled error, not ours.
      for (const listener of this.watchListeners) void Promise.resolve(event).then(listener);
      return;
    }
    const waiter = this.eventWaiters.shift();
    if (waiter !== undefined) waiter.resolve(event);
    else this.events.push(event);
  }

  private answer(line: string): void {
    let message: { id?: unknown; result?: unknown; error?: unknown; method?: unknown; params?: unknown };
    try {
      message = JSON.parse(line);
    } catch {
      this.fail(new ProtocolError(`the server sent a line that is not JSON: ${line.slice(0, 80)}`));
      return;
    }
    if (!("id" in message) && typeof message.method === "string") {
      try {
        this.notification(message.method, message.params);
      } catch (e) {
        this.fail(e instanceof PtyboxError ? e : new ProtocolError(String(e)));
      }
      return;
    }
    if (message.id === null && message.error !== undefined) {
      // A line it could not parse, or `busy` at --max-connections (then it closes): it concerns
      // every request of this connection.
      this.fail(errorFromResponse("(connection)", message.error));
      return;
    }
    const pending = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
    if (pending === undefined) return; // a cancelled request's late answer
    this.pending.delete(message.id as number);
    if (message.error !== undefined) pending.reject(errorFromResponse(pending.method, message.error));
    else if (!("result" in message)) pending.reject(new ProtocolError(`${pending.method}: the answer has neither result nor error`));
    else pending.resolve(message.result);
  }

  private fail(error: PtyboxError): void {
    if (this.failure === null) this.failure = error;
    for (const waiter of this.eventWaiters.splice(0)) waiter.reject(this.failure);
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      pending.reject(
        error instanceof ConnectionClosed
          ? new ConnectionClosed(`${pending.method}: the server closed the connection before answering (${error.message})`)
          : error,
      );
    }
  }

  // --- the contract's methods (docs/protocol.md, "Methods"), named as on the wire ---

  terminal_open(params: OpenParams = {}, options?: CallOptions): Promise<OpenResult> {
    return this.call("terminal_open", params, options);
  }
  /** Writes `input` verbatim (end with "\n" to press Enter) or presses `keys`, and waits for
   * readiness; `background: true` resolves at once (collect with terminal_output). */
  terminal_send(params: SendParams & { background?: false }, options?: CallOptions): Promise<SendResult>;
  terminal_send(params: SendParams & { background: true }, options?: CallOptions): Promise<OperationStarted>;
  terminal_send(params: SendParams, options?: CallOptions): Promise<SendResult | OperationStarted> {
    return this.call("terminal_send", params, options);
  }
  terminal_wait(params: WaitParams, options?: CallOptions): Promise<SendResult> {
    return this.call("terminal_wait", params, options);
  }
  terminal_output(params: { sessionId: string }, options?: CallOptions): Promise<OutputResult> {
    return this.call("terminal_output", params, options);
  }
  terminal_cancel(params: { sessionId: string }, options?: CallOptions): Promise<{ canceled: boolean }> {
    return this.call("terminal_cancel", params, options);
  }
  terminal_read(params: ReadParams, options?: CallOptions): Promise<ReadResult> {
    return this.call("terminal_read", params, options);
  }
  terminal_signal(
    params: { sessionId: string; signal: Signal },
    options?: CallOptions,
  ): Promise<{ delivered: boolean; pgid: number }> {
    return this.call("terminal_signal", params, options);
  }
  terminal_status(params: { sessionId: string }, options?: CallOptions): Promise<StatusResult> {
    return this.call("terminal_status", params, options);
  }
  terminal_close(
    params: { sessionId: string; reason?: string },
    options?: CallOptions,
  ): Promise<{ sessionStatus: SessionStatus }> {
    return this.call("terminal_close", params, options);
  }
  terminal_list(options?: CallOptions): Promise<{ sessions: SessionInfo[] }> {
    return this.call("terminal_list", {}, options);
  }
  policy_resolve(options?: CallOptions): Promise<PolicyResult> {
    return this.call("policy_resolve", {}, options);
  }
  policy_set_mode(params: { mode: Mode }, options?: CallOptions): Promise<{ mode: Mode }> {
    return this.call("policy_set_mode", params, options);
  }
  terminal_resize(
    params: { sessionId: string; cols: number; rows: number },
    options?: CallOptions,
  ): Promise<{ cols: number; rows: number }> {
    return this.call("terminal_resize", params, options);
  }
  owner_info(options?: CallOptions): Promise<OwnerInfo> {
    return this.call("owner_info", {}, options);
  }
  /** Only as the first call of a connection; connect(path, {ownerToken}) does it for you. */
  owner_attach(params: { ownerToken: string }, options?: CallOptions): Promise<AttachResult> {
    return this.call("owner_attach", params, options);
  }

  // --- watching a session (docs/protocol.md, "Watching a session"): events arrive through
  // nextWatchEvent(), watchEvents() or onWatchEvent() ---

  /** The sessions of the owner holding `ownerToken` (owner_info), live or detached. */
  owner_sessions(params: { ownerToken: string }, options?: CallOptions): Promise<{ sessions: SessionInfo[] }> {
    return this.call("owner_sessions", params, options);
  }
  /** The session's screen now; its later output arrives as watch events. Another owner's
   * session needs that owner's token. */
  terminal_watch(params: { sessionId: string; ownerToken?: string }, options?: CallOptions): Promise<WatchResult> {
    return this.call("terminal_watch", params, options);
  }
  terminal_unwatch(params: { watchId: number }, options?: CallOptions): Promise<{ unwatched: boolean }> {
    return this.call("terminal_unwatch", params, options);
  }
  /** The agent's sends on the watched session answer Busy until terminal_release. */
  terminal_takeover(params: { watchId: number }, options?: CallOptions): Promise<{ held: boolean }> {
    return this.call("terminal_takeover", params, options);
  }
  /** Writes keystrokes (a string as UTF-8) to the session this watch holds, as they are. */
  terminal_type(params: { watchId: number; data: Uint8Array | string }, options?: CallOptions): Promise<{ typed: boolean }> {
    const bytes = typeof params.data === "string" ? new TextEncoder().encode(params.data) : params.data;
    return this.call("terminal_type", { watchId: params.watchId, data: base64Encode(bytes) }, options);
  }
  terminal_release(params: { watchId: number }, options?: CallOptions): Promise<{ released: boolean }> {
    return this.call("terminal_release", params, options);
  }
}

function base64Encode(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function resizedEvent(method: string, watchId: number, params: unknown): WatchResized {
  const p = params as {
    cols?: unknown;
    rows?: unknown;
    lines?: unknown;
    cursor?: { row?: unknown; column?: unknown } | null;
    alternateScreen?: unknown;
  };
  if (
    typeof p.cols !== "number" ||
    typeof p.rows !== "number" ||
    !Array.isArray(p.lines) ||
    !p.lines.every((line) => typeof line === "string") ||
    typeof p.cursor !== "object" ||
    p.cursor === null ||
    typeof p.cursor.row !== "number" ||
    typeof p.cursor.column !== "number" ||
    typeof p.alternateScreen !== "boolean"
  ) {
    throw new ProtocolError(`${method}: params should be {cols, rows, lines, cursor, alternateScreen}`);
  }
  return {
    type: "resized",
    watchId,
    cols: p.cols,
    rows: p.rows,
    lines: p.lines as string[],
    cursor: { row: p.cursor.row, column: p.cursor.column },
    alternateScreen: p.alternateScreen,
  };
}

/** A notification as a WatchEvent; null for one this client does not know; throws
 * ProtocolError for a malformed one. */
function watchEvent(method: string, params: unknown): WatchEvent | null {
  if (
    method !== "terminal_watch_output" &&
    method !== "terminal_watch_ended" &&
    method !== "terminal_watch_resized"
  ) {
    return null;
  }
  const p = params as { watchId?: unknown; data?: unknown; reason?: unknown; message?: unknown } | null;
  if (typeof p !== "object" || p === null || typeof p.watchId !== "number") {
    throw new ProtocolError(`${method}: params.watchId should be a number`);
  }
  if (method === "terminal_watch_resized") return resizedEvent(method, p.watchId, params);
  if (method === "terminal_watch_ended") {
    if (typeof p.reason !== "string" || typeof p.message !== "string") {
      throw new ProtocolError(`${method}: params.reason and params.message should be strings`);
    }
    return { type: "ended", watchId: p.watchId, reason: p.reason as "closed", message: p.message };
  }
  if (typeof p.data !== "string") throw new ProtocolError(`${method}: params.data should be a string`);
  let binary: string;
  try {
    binary = atob(p.data);
  } catch {
    throw new ProtocolError(`${method}: params.data is not base64`);
  }
  const data = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) data[i] = binary.charCodeAt(i);
  return { type: "output", watchId: p.watchId, data };
}

// Each method of the contract is a method of the client with its params and result.
type Check<T extends { [M in keyof Methods]: unknown }> = T;
export type ClientMethods = Check<{ [M in keyof Methods]: PtyboxClient[M] }>;

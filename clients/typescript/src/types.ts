// The contract's types (docs/protocol.md, "Types" and "Methods"), spelled as on the wire: a
// result is the server's JSON as is. Enumerations list the values this client knows; a newer
// server may send others.

export type WaitReason = "stdin_read" | "inferred_idle" | "timeout" | "session_exit" | "pattern";
export type Mode = "read-only" | "workspace-write" | "danger-full-access";
export type Signal = "SIGINT" | "SIGTERM" | "SIGKILL" | "SIGQUIT" | "SIGHUP" | "SIGTSTP" | "SIGCONT";

export type SessionStatus =
  | { kind: "running" }
  | { kind: "exited"; exitCode: number | null; signal: string | null };

export interface SendResult {
  viewport: string;
  waitReason: WaitReason;
  sessionStatus: SessionStatus;
  truncated: boolean;
  exitCode: number | null;
  cwd: string | null;
  /** What holds the terminal when the send did not settle at the prompt (v1.2). */
  foreground: { pgid: number; command: string } | null;
  /** What `pattern` matched, when a pattern settled it (v1.2). */
  match?: { text: string; line: string };
}

export interface OperationStarted {
  operationId: string;
}

export interface OpenParams {
  type?: "shell";
  name?: string;
  cwd?: string;
  cols?: number;
  rows?: number;
  env?: Record<string, string>;
  timeoutMs?: number;
}
export interface OpenResult {
  sessionId: string;
  name: string;
  motd: string;
  pid: number | null;
  mode: Mode;
  cwd: string;
}

/** Exactly one of `input` (written verbatim: end with "\n" to press Enter) and `keys`. */
export type SendParams = {
  sessionId: string;
  timeoutMs?: number;
  silenceMs?: number;
  pattern?: string;
  background?: boolean;
} & ({ input: string; keys?: never } | { keys: string[]; input?: never });

export interface WaitParams {
  sessionId: string;
  timeoutMs?: number;
  silenceMs?: number;
  pattern?: string;
}

export interface OutputResult {
  output: string;
  done: boolean;
  result: SendResult | null;
  truncated?: boolean;
  /** Where `output` starts in the scrollback (a terminal_read cursor), when the server knows. */
  outputCursor?: number;
}

export interface ReadParams {
  sessionId: string;
  cursor?: number;
  maxBytes?: number;
  view?: "lines" | "screen";
}
export interface ReadResult {
  text: string;
  cursor: number;
  nextCursor: number;
  truncated: boolean;
  end: boolean;
}

export interface StatusResult {
  sessionStatus: SessionStatus;
  busy: boolean;
  name: string;
  mode: Mode;
  pid: number | null;
}

export interface SessionInfo {
  sessionId: string;
  name: string;
  mode: Mode;
  busy: boolean;
  sessionStatus: SessionStatus;
}

export interface PolicyResult {
  mode: Mode;
  ceiling: Mode;
  workspaceRoot: string;
  writableRoots: string[];
  network: "allow" | "deny";
  source: { files: string[]; values: Record<string, string> };
}

export interface OwnerInfo {
  /** A secret: keep it like a password. */
  ownerToken: string;
  detachGraceMs: number;
}

export interface AttachResult {
  sessions: SessionInfo[];
  operations: { operationId: string; sessionId: string }[];
}

// Watching a session (docs/protocol.md, "Watching a session"): JSON-RPC only, no MCP tool.

/** A watched session's screen: `lines` are `rows` strings, trailing blanks trimmed, `cursor`
 * 0-based. */
export interface WatchScreen {
  cols: number;
  rows: number;
  lines: string[];
  cursor: { row: number; column: number };
  alternateScreen: boolean;
}

/** terminal_watch: the session's screen when the watch began; later output arrives as watch
 * events. */
export interface WatchResult extends SessionInfo, WatchScreen {
  watchId: number;
}

/** The notification terminal_watch_output, its base64 decoded: raw bytes the session printed,
 * in order. A chunk may end inside a UTF-8 character or an escape sequence: decode the stream
 * (`new TextDecoder().decode(data, { stream: true })`), and treat it as hostile text. */
export interface WatchOutput {
  type: "output";
  watchId: number;
  data: Uint8Array;
}

/** The notification terminal_watch_ended. */
export interface WatchEnded {
  type: "ended";
  watchId: number;
  reason: "closed" | "slow" | "owner_gone";
  message: string;
}

/** The notification terminal_watch_resized: the session's terminal took a new size; its screen
 * at that size, as terminal_watch gave it (redraw from it). Hostile text, as output. */
export interface WatchResized extends WatchScreen {
  type: "resized";
  watchId: number;
}

export type WatchEvent = WatchOutput | WatchEnded | WatchResized;

/** Every method of the contract's table, as the wire names it. */
export interface Methods {
  terminal_open: [OpenParams, OpenResult];
  terminal_send: [SendParams, SendResult | OperationStarted];
  terminal_wait: [WaitParams, SendResult];
  terminal_output: [{ sessionId: string }, OutputResult];
  terminal_cancel: [{ sessionId: string }, { canceled: boolean }];
  terminal_read: [ReadParams, ReadResult];
  terminal_signal: [{ sessionId: string; signal: Signal }, { delivered: boolean; pgid: number }];
  terminal_status: [{ sessionId: string }, StatusResult];
  terminal_close: [{ sessionId: string; reason?: string }, { sessionStatus: SessionStatus }];
  terminal_list: [Record<string, never>, { sessions: SessionInfo[] }];
  policy_resolve: [Record<string, never>, PolicyResult];
  policy_set_mode: [{ mode: Mode }, { mode: Mode }];
  terminal_resize: [{ sessionId: string; cols: number; rows: number }, { cols: number; rows: number }];
  owner_info: [Record<string, never>, OwnerInfo];
  owner_attach: [{ ownerToken: string }, AttachResult];
  owner_sessions: [{ ownerToken: string }, { sessions: SessionInfo[] }];
  terminal_watch: [{ sessionId: string; ownerToken?: string }, WatchResult];
  terminal_unwatch: [{ watchId: number }, { unwatched: boolean }];
  terminal_takeover: [{ watchId: number }, { held: boolean }];
  /** `data`: the keystrokes; the client sends them as base64 (text as UTF-8). */
  terminal_type: [{ watchId: number; data: Uint8Array | string }, { typed: boolean }];
  terminal_release: [{ watchId: number }, { released: boolean }];
}

/** The contract's methods this client implements, in the contract's order (checked against the
 * daemon's table by tests/clients). */
export const METHODS: readonly (keyof Methods)[] = [
  "terminal_open", "terminal_send", "terminal_wait", "terminal_output", "terminal_cancel",
  "terminal_read", "terminal_signal", "terminal_status", "terminal_close", "terminal_list",
  "policy_resolve", "policy_set_mode", "terminal_resize", "owner_info", "owner_attach",
  "owner_sessions", "terminal_watch", "terminal_unwatch", "terminal_takeover", "terminal_type",
  "terminal_release",
];

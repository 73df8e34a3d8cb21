// Errors: one class per JSON-RPC error code and per `error.data.kind` of the contract
// (docs/protocol.md, "Errors"), so a caller writes `if (e instanceof NotFound)`. The server's
// code, sentence and data are kept whole.

/** Base of every error this package throws. */
export class PtyboxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** The server closed the connection (or exited) before answering. */
export class ConnectionClosed extends PtyboxError {}

/** The server sent something the contract does not allow (a line that is not JSON). */
export class ProtocolError extends PtyboxError {}

export interface ErrorData {
  kind?: string;
  context?: string;
  [key: string]: unknown;
}

/** A JSON-RPC error response to `method`. */
export class RpcError extends PtyboxError {
  readonly method: string;
  readonly code: number;
  /** The server's sentence, which says what to do. */
  readonly serverMessage: string;
  readonly data: ErrorData;
  constructor(method: string, code: number, message: string, data: ErrorData | undefined) {
    super(`${method}: ${message}`);
    this.method = method;
    this.code = code;
    this.serverMessage = message;
    this.data = data ?? {};
  }
  /** `error.data.kind` (`not_found`, `busy`, ..., `invalid_params`) when the server gave one. */
  get kind(): string | undefined {
    return typeof this.data.kind === "string" ? this.data.kind : undefined;
  }
  /** `error.data.context`: the parameter, path or key the error is about. */
  get context(): string | undefined {
    return typeof this.data.context === "string" ? this.data.context : undefined;
  }
}

/** -32700: the line the server read was not JSON. */
export class ParseError extends RpcError {}
/** -32600: not a valid request. */
export class InvalidRequest extends RpcError {}
/** -32601: the server does not know the method. */
export class MethodNotFound extends RpcError {}
/** -32602: a parameter is missing, unknown, of the wrong type or out of bounds (`context`). */
export class InvalidParams extends RpcError {}
/** -32603: the server failed unexpectedly on this request. */
export class InternalError extends RpcError {}
/** -32000: an application error; the subclass is its kind (a kind unknown here: this class). */
export class ApplicationError extends RpcError {}

export class NotFound extends ApplicationError {}
export class Busy extends ApplicationError {}
export class ModeFenced extends ApplicationError {}
export class SpawnFailed extends ApplicationError {}
export class StartupTimeout extends ApplicationError {}
export class PolicyError extends ApplicationError {}
export class PolicyDenied extends ApplicationError {}
export class SandboxUnavailable extends ApplicationError {}
export class Closed extends ApplicationError {}
export class CleanupFailed extends ApplicationError {}
export class Canceled extends ApplicationError {}
export class NameTaken extends ApplicationError {}

type ErrorClass = new (method: string, code: number, message: string, data: ErrorData | undefined) => RpcError;

/** error.data.kind -> class, for every kind of the contract's error table. */
export const ERROR_CLASSES: Readonly<Record<string, ErrorClass>> = {
  not_found: NotFound,
  busy: Busy,
  mode_fenced: ModeFenced,
  spawn_failed: SpawnFailed,
  startup_timeout: StartupTimeout,
  policy_error: PolicyError,
  policy_denied: PolicyDenied,
  sandbox_unavailable: SandboxUnavailable,
  closed: Closed,
  cleanup_failed: CleanupFailed,
  canceled: Canceled,
  name_taken: NameTaken,
};

const STANDARD: Readonly<Record<number, ErrorClass>> = {
  [-32700]: ParseError,
  [-32600]: InvalidRequest,
  [-32601]: MethodNotFound,
  [-32602]: InvalidParams,
  [-32603]: InternalError,
};

/** The error for one JSON-RPC `error` member. */
export function errorFromResponse(method: string, error: unknown): PtyboxError {
  const e = error as { code?: unknown; message?: unknown; data?: unknown } | null;
  if (typeof e !== "object" || e === null || typeof e.code !== "number") {
    return new ProtocolError(`${method}: the server answered an error without a numeric code`);
  }
  const message = typeof e.message === "string" ? e.message : "(the server gave no message)";
  const data =
    typeof e.data === "object" && e.data !== null && !Array.isArray(e.data) ? (e.data as ErrorData) : undefined;
  let cls: ErrorClass = RpcError;
  if (e.code === -32000) {
    cls = (typeof data?.kind === "string" && Object.hasOwn(ERROR_CLASSES, data.kind) && ERROR_CLASSES[data.kind]) || ApplicationError;
  } else if (Object.hasOwn(STANDARD, e.code)) {
    cls = STANDARD[e.code];
  }
  return new cls(method, e.code, message, data);
}

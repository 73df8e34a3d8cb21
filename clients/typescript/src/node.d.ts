// The few Node.js APIs the client uses, declared here so that it compiles with Debian 12's
// tsc (node-typescript) and no @types/node from a registry. Only what client.ts calls; the
// emitted .d.ts files do not depend on this file.

interface AbortSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

// Node.js >= 18 globals (WHATWG): base64 and UTF-8 for terminal_type and watch output.
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare class TextEncoder {
  encode(input: string): Uint8Array;
}

declare module "node:net" {
  export interface Socket {
    setEncoding(encoding: "utf8"): this;
    write(data: string): boolean;
    end(callback?: () => void): this;
    destroy(): this;
    on(event: "connect" | "end" | "close", listener: () => void): this;
    on(event: "data", listener: (chunk: string) => void): this;
    on(event: "error", listener: (error: Error & { code?: string }) => void): this;
    once(event: "connect" | "close", listener: () => void): this;
    once(event: "error", listener: (error: Error & { code?: string }) => void): this;
    removeListener(event: string, listener: (...args: never[]) => void): this;
    readonly destroyed: boolean;
  }
  export function createConnection(path: string): Socket;
}

declare module "node:child_process" {
  import type { Socket } from "node:net";
  export interface ChildProcess {
    readonly stdin: Socket;
    readonly stdout: Socket;
    readonly exitCode: number | null;
    readonly signalCode: string | null;
    once(event: "spawn", listener: () => void): this;
    once(event: "error", listener: (error: Error & { code?: string }) => void): this;
    once(event: "exit", listener: (code: number | null, signal: string | null) => void): this;
    on(event: "error", listener: (error: Error & { code?: string }) => void): this;
  }
  export function spawn(
    command: string,
    args: readonly string[],
    options: { stdio: ["pipe", "pipe", "inherit" | "ignore" | "pipe"] },
  ): ChildProcess;
}

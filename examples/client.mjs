// A minimal ptybox client (Node.js >= 18, no npm packages): opens a sandboxed terminal in the
// current directory, runs `echo hi`, reads the terminal's history and closes it.
//     node examples/client.mjs [PATH_TO_PTYBOX]      (default: ptybox on PATH)
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const server = spawn(process.argv[2] ?? "ptybox", ["serve", "--stdio"],
                     { stdio: ["pipe", "pipe", "inherit"] });
const lines = createInterface({ input: server.stdout })[Symbol.asyncIterator]();
let nextId = 0;

// Sends one JSON-RPC request (one line) and returns its result (one line back).
async function call(method, params) {
  server.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: ++nextId, method, params }) + "\n");
  const answer = JSON.parse((await lines.next()).value);
  if (answer.error) throw new Error(`${method}: ${answer.error.message}`);
  return answer.result;
}

const { sessionId } = await call("terminal_open", { name: "example" });
const sent = await call("terminal_send", { sessionId, input: "echo hi\n" });
console.log(`viewport=${JSON.stringify(sent.viewport)} waitReason=${sent.waitReason} exitCode=${sent.exitCode}`);
console.log("history:", (await call("terminal_read", { sessionId })).text.replaceAll("\n", " | "));
console.log("closed:", JSON.stringify((await call("terminal_close", { sessionId })).sessionStatus));
server.stdin.end(); // end of input: the server closes what is left and exits 0
const code = await new Promise((resolve) => server.on("exit", resolve));
process.exit(code || (sent.viewport === "hi" && sent.exitCode === 0 ? 0 : 1));

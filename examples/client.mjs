// A ptybox client with the typed TypeScript package (clients/typescript, docs/clients.md):
// opens a sandboxed terminal in the current directory, runs `echo hi`, reads the terminal's
// history and closes it.
//     tsc -p clients/typescript && npm install ./clients/typescript
//     node examples/client.mjs [PATH_TO_PTYBOX]      (default: ptybox on PATH)
import { PtyboxClient } from "ptybox";

const c = await PtyboxClient.spawn({ ptybox: process.argv[2] ?? "ptybox" }); // serve --stdio
const { sessionId } = await c.terminal_open({ name: "example" });
const sent = await c.terminal_send({ sessionId, input: "echo hi\n" });
console.log(`viewport=${JSON.stringify(sent.viewport)} waitReason=${sent.waitReason} exitCode=${sent.exitCode}`);
console.log("history:", (await c.terminal_read({ sessionId })).text.replaceAll("\n", " | "));
console.log("closed:", JSON.stringify((await c.terminal_close({ sessionId })).sessionStatus));
const status = await c.close(); // end of input: the server closed what was left and exited 0
process.exit(status || (sent.viewport === "hi" && sent.exitCode === 0 ? 0 : 1));

// Typed client for ptybox (docs/clients.md): persistent sandboxed terminals over JSON-RPC.
//   const c = await PtyboxClient.spawn({ ptybox: "ptybox" });   // or PtyboxClient.connect(SOCKET)
//   const { sessionId } = await c.terminal_open({ name: "demo" });
//   const r = await c.terminal_send({ sessionId, input: "echo hi\n" });  // r.viewport === "hi"
export * from "./client.js";
export * from "./errors.js";
export * from "./types.js";

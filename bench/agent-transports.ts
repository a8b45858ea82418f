/**
 * Latency of the agent-facing transports on loopback: a streamed run_command's first output event,
 * a keystroke's echo through a PTY (HTTP stdin in, SSE out), and an MCP tool call.
 * Run: node --import tsx bench/agent-transports.ts
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startComputerServer } from "../src/computer/server.js";
import { printTable, timeIt } from "./lib.js";

const server = await startComputerServer({ port: 0 });
const mcp = new Client({ name: "bench", version: "1.0.0" });
try {
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));

  /** Time from the request to the first `data:` event of a streamed command. */
  const firstStreamEvent = async () => {
    const res = await fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({
        command: "run_command",
        params: { command: "echo a; sleep 0.05", stream: true },
      }),
    });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
  };

  const { pid } = (await (
    await fetch(`${server.url}/pty`, { method: "POST", body: JSON.stringify({ command: "cat" }) })
  ).json()) as { pid: number };
  const stream = await fetch(`${server.url}/pty/${pid}/stream`);
  const reader = stream.body!.getReader();
  let n = 0;
  /** A line typed into `cat` on a PTY, until its echo arrives on the SSE stream. */
  const ptyEcho = async () => {
    const marker = `k${n++}`;
    await fetch(`${server.url}/pty/${pid}/stdin`, {
      method: "POST",
      body: JSON.stringify({ data: Buffer.from(`${marker}\r`).toString("base64") }),
    });
    let seen = "";
    while (!seen.includes(marker)) {
      const { value } = await reader.read();
      for (const m of new TextDecoder().decode(value).matchAll(/"data":"([^"]+)"/g)) {
        seen += Buffer.from(m[1], "base64").toString();
      }
    }
  };

  const rows = [
    await timeIt("run_command stream: first event (echo a)", firstStreamEvent, {
      runs: 30,
      target: "≤ 100 ms after it is printed",
    }),
    await timeIt("PTY keystroke echo (stdin POST → SSE)", ptyEcho, { runs: 50 }),
    await timeIt("MCP tools/call version (streamable HTTP)", () =>
      mcp.callTool({ name: "version", arguments: {} }),
    ),
    await timeIt("MCP tools/call run_command true", () =>
      mcp.callTool({ name: "run_command", arguments: { command: "true" } }),
    ),
  ];
  await reader.cancel();
  await fetch(`${server.url}/pty/${pid}`, { method: "DELETE" });
  printTable("Agent transports (loopback)", rows);
} finally {
  await mcp.close();
  await server.close();
}

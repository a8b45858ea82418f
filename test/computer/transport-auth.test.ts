import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { allCommands } from "../../commands/index.js";
import { createComputerApp } from "../../src/computer/app.js";
import { CommandRegistry } from "../../src/computer/core/registry.js";
import type { ComputerEnv } from "../../src/computer/http/env.js";
import { PtySessions } from "../../src/computer/transports/pty/pty-sessions.js";

// The app's `auth` hook (cloud mode plugs its middleware in there) guards the PTY routes and /mcp
// like /cmd; PTY WebSockets carry their credentials in the query string.
const KEY = "test-key";
const auth: MiddlewareHandler<ComputerEnv> = async (c, next) => {
  const key = c.req.header("x-api-key") ?? c.req.query("api_key");
  if (key !== KEY) return c.json({ detail: "Authentication failed" }, 401);
  await next();
};

const pty = new PtySessions();
const sockets = new WebSocketServer({ noServer: true });
let url: string;
let http: ReturnType<typeof serve>;
beforeAll(async () => {
  const app = createComputerApp({ registry: new CommandRegistry(allCommands), pty, auth });
  http = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0, websocket: { server: sockets } });
  await once(http, "listening");
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
});
afterAll(async () => {
  pty.close();
  sockets.close();
  await new Promise((resolve) => http.close(resolve));
});

const mcpInit = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

describe("the auth hook on the PTY and MCP transports", () => {
  it("rejects /pty and /mcp without credentials and serves them with", async () => {
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    expect((await fetch(`${url}/pty`, { method: "POST", body: "{}" })).status).toBe(401);
    const denied = await fetch(`${url}/mcp`, { method: "POST", headers, body: JSON.stringify(mcpInit) });
    expect(denied.status).toBe(401);

    const ok = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: { ...headers, "x-api-key": KEY },
      body: JSON.stringify(mcpInit),
    });
    expect(ok.status).toBe(200);
    expect((await ok.json()).result.serverInfo.name).toBe("hangar-computer-server");

    const created = await fetch(`${url}/pty`, {
      method: "POST",
      headers: { "x-api-key": KEY },
      body: JSON.stringify({ command: "sleep 30" }),
    });
    const { pid } = await created.json();
    expect(pid).toBeGreaterThan(0);

    const refused = new WebSocket(`${url.replace("http", "ws")}/pty/${pid}/ws`);
    const [, res] = await once(refused, "unexpected-response");
    expect(res.statusCode).toBe(401);

    const accepted = new WebSocket(
      `${url.replace("http", "ws")}/pty/${pid}/ws?api_key=${KEY}&container_name=c`,
    );
    await once(accepted, "open");
    accepted.close();
    pty.kill(pid);
  });
});

/**
 * Fault suite, HTTP and WebSocket (issue rows 5, 6, 11, 13, 14 and 17): bodies are limited while
 * they stream in; unauthenticated WebSocket peers cannot make the server hold big frames; a half
 * upgrade is a 400; exited terminals do not count toward the limit; keys in query strings only on
 * the PTY socket; keep-alive outlasts a load balancer's idle timeout.
 */
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { send, TestSocket, wsUrl } from "../support/clients.js";
import { startTestServer } from "../support/server.js";
import { rssBytes, type ServeProcess, serveProcess } from "./support.js";

const MB = 1024 * 1024;
const NAME = "vm-faults";
const KEY = "sk-faults-key";

/**
 * Sends `total` bytes of body (with or without a content-length) and resolves with the status and
 * how many bytes had been written when the answer came: a limit applies while the body streams in.
 */
function pushBody(url: string, total: number, declareLength: boolean) {
  return new Promise<{ status: number; sent: number }>((resolve) => {
    const chunk = Buffer.alloc(MB, 0x61);
    let sent = 0;
    const req = request(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(declareLength ? { "content-length": total } : {}) },
    });
    req.on("response", (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, sent });
      req.destroy();
    });
    // A connection closed before the answer: no status.
    req.on("error", () => resolve({ status: 0, sent }));
    const write = () => {
      while (sent < total && !req.destroyed) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", write);
      }
      if (!req.destroyed) req.end();
    };
    write();
  });
}

describe("limits before work", () => {
  let serve: ServeProcess;
  beforeAll(async () => {
    serve = await serveProcess();
  });
  afterAll(() => serve?.stop());

  it("refuses 300 MB on /mcp, /cmd and /pty with 413 before buffering it", async () => {
    const pid = serve.pid;
    const before = rssBytes(pid);
    for (const path of ["/mcp", "/cmd", "/pty"]) {
      const declared = await pushBody(`${serve.url}${path}`, 300 * MB, true);
      expect(declared.status, path).toBe(413);
    }
    expect(rssBytes(pid) - before).toBeLessThanOrEqual(64 * MB);
    // Without a length it is cut off at the limit (64 MiB), long before its end.
    for (const path of ["/mcp", "/cmd", "/pty"]) {
      const chunked = await pushBody(`${serve.url}${path}`, 300 * MB, false);
      expect(chunked.status, path).toBe(413);
      expect(chunked.sent, path).toBeLessThan(200 * MB);
    }
    expect((await fetch(`${serve.url}/status`)).status).toBe(200);
  });

  it("answers a PTY request whose body is not JSON with 400, and starts nothing", async () => {
    const reply = await send(`${serve.url}/pty`, {
      body: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(reply.status).toBe(400);
    expect(reply.json().detail).toMatch(/^Invalid JSON body/);
    const pid = serve.pid;
    expect(readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim()).toBe("");
  });

  it("answers a WebSocket upgrade without Connection: Upgrade with 400, not 500", async () => {
    for (const path of ["/ws", "/pty/1/ws"]) {
      const reply = await send(`${serve.url}${path}`, { headers: { upgrade: "websocket" } });
      expect(reply.status, path).toBe(400);
      expect(reply.json().detail).toBe("WebSocket upgrade needs the header Connection: Upgrade");
    }
  });

  it("keeps idle connections open longer than a load balancer's 60 s idle timeout", async () => {
    const agent = new Agent({ keepAlive: true });
    try {
      const reply = await new Promise<Record<string, unknown>>((resolve, reject) => {
        request(`${serve.url}/status`, { agent }, (res) => {
          res.resume();
          resolve(res.headers);
        })
          .on("error", reject)
          .end();
      });
      const timeout = Number(/timeout=(\d+)/.exec(String(reply["keep-alive"]))?.[1]);
      expect(timeout).toBeGreaterThan(60);
    } finally {
      agent.destroy();
    }
  });
});

describe("cloud mode under hostile peers", () => {
  let serve: ServeProcess;
  beforeAll(async () => {
    serve = await serveProcess([], { env: { HANGAR_API_KEYS: KEY, CONTAINER_NAME: NAME } });
  });
  afterAll(() => serve?.stop());

  it("closes unauthenticated /ws peers that send 50 MiB frames without holding them", async () => {
    const pid = serve.pid;
    const before = rssBytes(pid);
    const frame = Buffer.alloc(50 * MB, 0x61);
    const peers = await Promise.all(
      Array.from({ length: 5 }, async () => {
        const ws = new WebSocket(wsUrl(serve.url));
        ws.on("error", () => undefined);
        await once(ws, "open");
        const closed = once(ws, "close");
        ws.send(frame);
        return closed;
      }),
    );
    expect(peers).toHaveLength(5);
    expect(rssBytes(pid) - before).toBeLessThanOrEqual(64 * MB);
    const good = await TestSocket.open(wsUrl(serve.url));
    expect(await good.request("authenticate", { api_key: KEY, container_name: NAME })).toMatchObject({
      success: true,
    });
    expect(await good.request("version")).toMatchObject({ success: true });
    await good.close();
  });

  it("looks at a key in the query string only on the PTY socket's upgrade", async () => {
    const query = `?api_key=${KEY}&container_name=${NAME}`;
    const upgrade = { upgrade: "websocket", connection: "Upgrade", "sec-websocket-version": "13" };
    const headers = { ...upgrade, "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" };
    expect((await send(`${serve.url}/commands${query}`, { headers })).status).toBe(401);
    expect((await send(`${serve.url}/openapi.json${query}`, { headers })).status).toBe(401);
    expect((await send(`${serve.url}/pty/1/ws${query}`, { headers })).status).toBe(404);
  });
});

describe("terminal sessions", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer({ pty: { maxSessions: 2 } });
  });
  afterAll(() => server?.close());

  const post = (path: string, body: unknown) =>
    send(`${server.url}${path}`, {
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });

  it("does not count exited sessions toward the limit", async () => {
    for (let i = 0; i < 2; i++) {
      const started = await post("/pty", { command: "exit 0" });
      expect(started.status).toBe(200);
      const stream = await send(`${server.url}/pty/${started.json().pid}/stream`);
      expect(stream.text).toContain('"type":"exit"');
    }
    const third = await post("/pty", { command: "sleep 5" });
    expect(third.status).toBe(200);
    expect((await send(`${server.url}/pty/${third.json().pid}`, { method: "DELETE" })).json()).toEqual({
      killed: true,
    });
  });

  it("answers DELETE of an unknown session with 404", async () => {
    const reply = await send(`${server.url}/pty/999999999`, { method: "DELETE" });
    expect(reply.status).toBe(404);
    expect(reply.json()).toEqual({ detail: "PTY session 999999999 not found" });
  });
});

import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WebSocketServer } from "ws";
import { allCommands } from "../../commands/index.js";
import { createComputerApp } from "../../src/computer/app.js";
import { CommandRegistry } from "../../src/computer/core/registry.js";
import { wsTransport } from "../../src/computer/transports/ws/ws.js";
import { TestSocket, wsUrl } from "../support/clients.js";
import { isAlive } from "../support/processes.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
let dir: string;
beforeAll(async () => {
  // cua images set CONTAINER_NAME everywhere: a name alone must leave the server in local mode.
  process.env.CONTAINER_NAME ||= "some-container";
  server = await startTestServer();
  dir = mkdtempSync(join(tmpdir(), "hangar-ws-"));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("WS /ws in local mode", () => {
  it("answers a command with the cua shape: success and the result's fields, no content copy", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    expect(await ws.request("version")).toEqual({ success: true, protocol: 1, package: expect.any(String) });
    const run = await ws.request("run_command", { command: "echo hello" });
    expect(run).toEqual({ success: true, stdout: "hello\n", stderr: "", return_code: 0 });
    await ws.close();
  });

  it("answers pipelined frames one each, in the order they were sent, even when earlier ones are slower", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    ws.sendRaw(JSON.stringify({ command: "wait", params: { ms: 150 } }));
    ws.sendRaw(JSON.stringify({ command: "run_command", params: { command: "echo second" } }));
    ws.sendRaw("not json");
    ws.sendRaw(JSON.stringify({ command: "version" }));
    for (let i = 0; i < 20; i++)
      ws.sendRaw(JSON.stringify({ command: "run_command", params: { command: `echo ${i}` } }));
    expect(await ws.next()).toEqual({ success: true, waited_ms: 150 });
    expect((await ws.next()).stdout).toBe("second\n");
    expect((await ws.next()).error).toMatch(/^Invalid JSON/);
    expect((await ws.next()).protocol).toBe(1);
    for (let i = 0; i < 20; i++) expect((await ws.next()).stdout).toBe(`${i}\n`);
    await ws.close();
  });

  it("keeps the socket open after every kind of bad frame, with an error a person can act on", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    ws.sendRaw("{nope");
    expect(await ws.next()).toMatchObject({
      success: false,
      error: expect.stringMatching(/^Invalid JSON: /),
    });
    ws.sendRaw(Buffer.from([1, 2, 3]), true);
    expect(await ws.next()).toMatchObject({ success: false, error: expect.stringMatching(/Binary frames/) });
    ws.sendRaw("[1,2]");
    expect((await ws.next()).error).toMatch(/expected a JSON object/);
    ws.sendRaw(JSON.stringify({ params: {} }));
    expect(await ws.next()).toMatchObject({ success: false, error: "Command is required" });
    expect(await ws.request("versoin")).toMatchObject({
      success: false,
      code: "unknown_command",
      error: "Unknown command: versoin. Did you mean: version?",
    });
    expect(await ws.request("run_command", { command: 5 })).toMatchObject({
      success: false,
      code: "invalid_params",
      error: expect.stringMatching(/command/),
    });
    expect(await ws.request("read_text", { path: join(dir, "missing.txt") })).toMatchObject({
      success: false,
      code: "not_found",
    });
    expect((await ws.request("version")).success).toBe(true);
    await ws.close();
  });

  it("resolves the reference's aliases (shell, exec, ls, read_file, write_file, mkdir, rm, rmdir)", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    const sub = join(dir, "alias");
    const file = join(sub, "a.txt");
    expect((await ws.request("shell", { command: "echo s" })).stdout).toBe("s\n");
    expect((await ws.request("exec", { command: "echo e" })).stdout).toBe("e\n");
    expect((await ws.request("mkdir", { path: sub })).success).toBe(true);
    expect((await ws.request("write_file", { path: file, content: "alias" })).success).toBe(true);
    expect((await ws.request("read_file", { path: file })).content).toBe("alias");
    expect((await ws.request("ls", { path: sub })).files).toEqual(["a.txt"]);
    expect((await ws.request("rm", { path: file })).success).toBe(true);
    expect((await ws.request("rmdir", { path: sub })).success).toBe(true);
    await ws.close();
  });

  it("answers authenticate with success in local mode, whatever the credentials (cua clients send it)", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    expect(await ws.request("authenticate", { api_key: "anything", container_name: "x" })).toEqual({
      success: true,
      message: "Authentication successful",
    });
    expect((await ws.request("version")).success).toBe(true);
    await ws.close();
  });

  it("takes messages well over 16 MiB and answers replies as large", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    const data = Buffer.alloc(18 * 1024 * 1024, 7);
    const path = join(dir, "big.bin");
    const written = await ws.request("write_bytes", { path, content_b64: data.toString("base64") });
    expect(written.success).toBe(true);
    expect(readFileSync(path).equals(data)).toBe(true);
    const read = await ws.request("read_bytes", { path });
    expect(Buffer.from(read.content_b64, "base64").equals(data)).toBe(true);
    expect(Object.keys(read)).toEqual(["success", "content_b64"]);
    expect(ws.binaryFrames).toBe(0);
    await ws.close();
  });

  it("cancels a running command when the client goes away", async () => {
    const pidFile = join(dir, "cancelled.pid");
    const ws = await TestSocket.open(wsUrl(server.url));
    ws.sendRaw(
      JSON.stringify({ command: "run_command", params: { command: `echo $$ > ${pidFile}; exec sleep 30` } }),
    );
    // The command has started: its shell wrote its pid.
    const pid = await vi.waitFor(() => Number(readFileSync(pidFile, "utf8")), { timeout: 10_000 });
    expect(isAlive(pid)).toBe(true);
    await ws.close();
    await vi.waitFor(() => expect(isAlive(pid)).toBe(false), { timeout: 10_000 });
  });
});

describe("WS /ws limits", () => {
  it("closes with 1009 a message over the configured limit, and the server keeps serving", async () => {
    const small = await startTestServer({ wsMessageLimitBytes: 1024 * 1024 });
    try {
      const ws = await TestSocket.open(wsUrl(small.url));
      ws.sendRaw(JSON.stringify({ command: "version", params: { pad: "x".repeat(2 * 1024 * 1024) } }));
      expect((await ws.closed).code).toBe(1009);
      const again = await TestSocket.open(wsUrl(small.url));
      expect((await again.request("version")).success).toBe(true);
      await again.close();
    } finally {
      await small.close();
    }
  });
});

describe("the spread copy option", () => {
  it("--no-spread sends the seed shape alone on /cmd and leaves /ws replies as they are", async () => {
    const seed = await startTestServer({ spreadResult: false });
    try {
      const r = await seed.cmd("run_command", { command: "echo seed" });
      expect(r.event).toEqual({ success: true, content: { stdout: "seed\n", stderr: "", return_code: 0 } });
      expect(JSON.parse(r.text.trim().slice(6))).toEqual(r.event);
      const spread = await server.cmd("run_command", { command: "echo seed" });
      expect(spread.event).toEqual({ ...r.event, stdout: "seed\n", stderr: "", return_code: 0 });
      const ws = await TestSocket.open(wsUrl(seed.url));
      expect(await ws.request("run_command", { command: "echo seed" })).toEqual({
        success: true,
        stdout: "seed\n",
        stderr: "",
        return_code: 0,
      });
      await ws.close();
    } finally {
      await seed.close();
    }
  });
});

describe("WS /ws keep-alive", () => {
  it("drops a peer that stops answering pings, and keeps one that answers", async () => {
    const registry = new CommandRegistry(allCommands);
    const app = createComputerApp({ registry, websocket: wsTransport({ registry, pingIntervalMs: 100 }) });
    const sockets = new WebSocketServer({ noServer: true });
    const http = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0, websocket: { server: sockets } });
    await once(http, "listening");
    const port = (http.address() as AddressInfo).port;
    try {
      // A real client answers pings by itself and stays connected.
      const alive = await TestSocket.open(`ws://127.0.0.1:${port}/ws`);
      // A peer that completes the upgrade and then never answers anything.
      const silent = connect(port, "127.0.0.1");
      silent.write(
        "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
      );
      const [head] = await once(silent, "data");
      expect(String(head)).toMatch(/^HTTP\/1.1 101/);
      silent.resume(); // reads the pings, never answers them
      await once(silent, "close");
      expect((await alive.request("version")).success).toBe(true);
      await alive.close();
    } finally {
      for (const socket of sockets.clients) socket.terminate();
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

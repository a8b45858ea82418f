/**
 * Cloud mode end to end: HTTPS and WSS from one process with a certificate the test makes, the auth
 * matrix on every route and on the /ws handshake, rate limiting, and keys kept out of logs.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/common/logger.js";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";
import { postCommand, send, TestSocket, wsUrl } from "../support/clients.js";
import { makeTestCertificate, type TestCertificate } from "../support/tls.js";

const NAME = "vm-cloud-1";
const KEY = "sk-hangar-test-4f9c2a7d1e";
const OTHER_KEY = "sk-hangar-other-8b3e";

let cert: TestCertificate;
let server: RunningComputerServer;
let logPath: string;
let log: ReturnType<typeof createLogger>;

beforeAll(async () => {
  cert = makeTestCertificate();
  logPath = join(cert.dir, "server.log");
  log = createLogger({ level: "debug", destination: logPath });
  server = await startComputerServer({
    port: 0,
    log,
    tls: { cert: cert.cert, key: cert.key },
    cloud: { containerName: NAME, keys: [KEY], limiter: false },
  });
});
afterAll(async () => {
  await server?.close();
  cert?.remove();
});

const ok = { "X-Container-Name": NAME, "X-API-Key": KEY };

/** [case, headers, expected status, expected detail] */
const matrix: [string, Record<string, string>, number, string?][] = [
  ["no headers", {}, 401, "Container name required"],
  ["only the container name", { "X-Container-Name": NAME }, 401, "API key required"],
  ["only the key", { "X-API-Key": KEY }, 401, "Container name required"],
  [
    "a wrong container name",
    { "X-Container-Name": "vm-other", "X-API-Key": KEY },
    401,
    "Authentication failed",
  ],
  ["a wrong key", { "X-Container-Name": NAME, "X-API-Key": OTHER_KEY }, 401, "Authentication failed"],
  ["the key in the wrong header", { "X-Container-Name": NAME, "X-Api-Token": KEY }, 401, "API key required"],
  [
    "the key as Authorization without Bearer",
    { "X-Container-Name": NAME, Authorization: KEY },
    401,
    "API key required",
  ],
  ["name and key swapped", { "X-Container-Name": KEY, "X-API-Key": NAME }, 401, "Authentication failed"],
  ["header names in other cases", { "x-container-name": NAME, "X-API-KEY": KEY }, 200],
  ["the key as Authorization: Bearer", { "X-Container-Name": NAME, Authorization: `Bearer ${KEY}` }, 200],
  ["the right name and key", ok, 200],
];

describe("cloud mode over HTTPS", () => {
  it("serves HTTPS with the given certificate; /status needs no credentials", async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const r = await send(`${server.url}/status`, { ca: cert.cert });
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ status: "ok", os_type: "linux" });
  });

  it("refuses a client that does not trust the certificate", async () => {
    await expect(send(`${server.url}/status`)).rejects.toThrow(/self-signed|certificate/);
  });

  for (const route of ["/cmd", "/commands", "/openapi.json", "/metrics", "/no-such-route"]) {
    it.each(matrix)(`${route}: %s`, async (_case, headers, status, detail) => {
      const r =
        route === "/cmd"
          ? await postCommand(server.url, "version", {}, headers, cert.cert)
          : await send(`${server.url}${route}`, { headers, ca: cert.cert });
      if (status === 401) {
        expect(r.status).toBe(401);
        expect(r.json()).toEqual({ detail });
      } else if (route === "/no-such-route") {
        expect(r.status).toBe(404);
      } else {
        expect(r.status).toBe(200);
        if (route === "/cmd") expect((r as any).event).toMatchObject({ success: true, protocol: 1 });
      }
    });
  }

  it("checks credentials before the command: an unknown command with bad credentials is 401", async () => {
    const r = await postCommand(server.url, "no_such_command", {}, {}, cert.cert);
    expect(r.status).toBe(401);
    const good = await postCommand(server.url, "no_such_command", {}, ok, cert.cert);
    expect(good.status).toBe(400);
  });

  it("guards other WebSocket routes too; query credentials only on the PTY socket", async () => {
    const base = server.url.replace("https", "wss");
    const query = `?container_name=${NAME}&api_key=${KEY}`;
    await expect(TestSocket.open(`${base}/pty/1/ws`, { ca: cert.cert })).rejects.toThrow(/401/);
    // Past authentication: no such session.
    await expect(TestSocket.open(`${base}/pty/1/ws${query}`, { ca: cert.cert })).rejects.toThrow(/404/);
    // Anywhere else a key in the query is not looked at (query strings end up in logs).
    await expect(TestSocket.open(`${base}/commands${query}`, { ca: cert.cert })).rejects.toThrow(/401/);
  });
});

describe("cloud mode over WSS: the first-frame handshake", () => {
  const open = () => TestSocket.open(wsUrl(server.url), { ca: cert.cert });

  it("authenticates, then runs commands; a second authenticate is checked again", async () => {
    const ws = await open();
    expect(await ws.request("authenticate", { api_key: KEY, container_name: NAME })).toEqual({
      success: true,
      message: "Authentication successful",
    });
    expect(await ws.request("version")).toMatchObject({ success: true, protocol: 1 });
    expect(await ws.request("authenticate", { api_key: KEY, container_name: NAME })).toMatchObject({
      success: true,
    });
    expect(await ws.request("authenticate", { api_key: OTHER_KEY, container_name: NAME })).toEqual({
      success: false,
      error: "Authentication failed",
    });
    expect((await ws.closed).code).toBe(1000);
  });

  const handshakes: [string, string | Buffer, string][] = [
    [
      "a command before authenticating",
      JSON.stringify({ command: "version" }),
      "First message must be authentication",
    ],
    [
      "no api_key",
      JSON.stringify({ command: "authenticate", params: { container_name: NAME } }),
      "API key required",
    ],
    [
      "no container_name",
      JSON.stringify({ command: "authenticate", params: { api_key: KEY } }),
      "Container name required",
    ],
    ["no params", JSON.stringify({ command: "authenticate" }), "API key required"],
    [
      "a wrong key",
      JSON.stringify({ command: "authenticate", params: { api_key: OTHER_KEY, container_name: NAME } }),
      "Authentication failed",
    ],
    [
      "a wrong name",
      JSON.stringify({ command: "authenticate", params: { api_key: KEY, container_name: "vm-x" } }),
      "Authentication failed",
    ],
    ["a first frame that is not JSON", "authenticate please", "Authentication failed"],
    [
      "a binary first frame",
      Buffer.from(JSON.stringify({ command: "authenticate" })),
      "Authentication failed",
    ],
  ];

  it.each(handshakes)(
    "refuses %s with the reference's message, then closes 1000",
    async (_case, frame, error) => {
      const ws = await open();
      ws.sendRaw(frame, Buffer.isBuffer(frame));
      expect(await ws.next()).toEqual({ success: false, error });
      expect((await ws.closed).code).toBe(1000);
    },
  );

  it("ignores the upgrade request's headers: credentials there do not skip the handshake", async () => {
    const ws = await TestSocket.open(wsUrl(server.url), { ca: cert.cert, headers: ok });
    expect(await ws.request("version")).toEqual({
      success: false,
      error: "First message must be authentication",
    });
  });

  it("closes a socket that never authenticates once the deadline passes", async () => {
    const quick = await startComputerServer({
      port: 0,
      tls: { cert: cert.cert, key: cert.key },
      cloud: { containerName: NAME, keys: [KEY], limiter: false },
      wsAuthDeadlineMs: 300,
    });
    try {
      const ws = await TestSocket.open(wsUrl(quick.url), { ca: cert.cert });
      const started = Date.now();
      expect((await ws.next()).error).toMatch(/^Authentication timed out/);
      expect((await ws.closed).code).toBe(1008);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await quick.close();
    }
  });
});

describe("keys stay secret", () => {
  it("never appear in the log nor in any reply, while failures are logged", async () => {
    for (const [, headers] of matrix) await postCommand(server.url, "version", {}, headers, cert.cert);
    const ws = await TestSocket.open(wsUrl(server.url), { ca: cert.cert });
    await ws.request("authenticate", { api_key: OTHER_KEY, container_name: NAME });
    const ws2 = await TestSocket.open(wsUrl(server.url), { ca: cert.cert });
    await ws2.request("authenticate", { api_key: KEY, container_name: NAME });
    const reply = await ws2.request("run_command", { command: "true", env: { API_KEY: KEY } });
    expect(reply.success).toBe(true);
    await ws2.close();
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    // The asynchronous file destination may still be writing the last lines under load.
    let text = readFileSync(logPath, "utf8");
    for (let i = 0; i < 40 && !text.includes('"command":"run_command"'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      text = readFileSync(logPath, "utf8");
    }
    expect(text).toMatch(/authentication failed/);
    expect(text).toMatch(/"command":"run_command"/);
    expect(text).not.toContain(KEY);
    expect(text).not.toContain(OTHER_KEY);
    expect(text).not.toContain(KEY.slice(3, 15));
  });
});

describe("repeated failures from one address", () => {
  let limited: RunningComputerServer;
  beforeAll(async () => {
    limited = await startComputerServer({
      port: 0,
      tls: { cert: cert.cert, key: cert.key },
      cloud: { containerName: NAME, keys: [KEY], limiter: { burst: 3, refillMs: 60_000 } },
    });
  });
  afterAll(() => limited.close());

  it("are refused with 429 and Retry-After, while a valid client is not slowed down", async () => {
    const bad = { "X-Container-Name": NAME, "X-API-Key": OTHER_KEY };
    for (let i = 0; i < 3; i++)
      expect((await postCommand(limited.url, "version", {}, bad, cert.cert)).status).toBe(401);
    const refused = await postCommand(limited.url, "version", {}, bad, cert.cert);
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toBe("60");
    expect(refused.json().detail).toMatch(/^Too many failed authentication attempts/);

    const started = performance.now();
    const good = await postCommand(limited.url, "version", {}, ok, cert.cert);
    expect(good.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(2000);

    const ws = await TestSocket.open(wsUrl(limited.url), { ca: cert.cert });
    expect((await ws.request("authenticate", { api_key: OTHER_KEY, container_name: NAME })).error).toMatch(
      /^Too many/,
    );
    expect((await ws.closed).code).toBe(1008);
    const valid = await TestSocket.open(wsUrl(limited.url), { ca: cert.cert });
    expect((await valid.request("authenticate", { api_key: KEY, container_name: NAME })).success).toBe(true);
    await valid.close();
  });
});

describe("local mode", () => {
  it("needs no credentials anywhere, even with CONTAINER_NAME set", async () => {
    process.env.CONTAINER_NAME ||= "some-container";
    const local = await startComputerServer({ port: 0 });
    try {
      expect((await postCommand(local.url, "version", {})).event.success).toBe(true);
      expect((await send(`${local.url}/commands`)).status).toBe(200);
      const ws = await TestSocket.open(wsUrl(local.url));
      expect((await ws.request("version")).success).toBe(true);
      await ws.close();
    } finally {
      await local.close();
    }
  });
});

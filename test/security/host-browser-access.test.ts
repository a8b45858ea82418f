/**
 * No web page may drive the host service, and with a token nothing else may either: every route
 * group for each kind of Origin and Host, every route with no, a wrong and the right token, and the
 * refusal to listen beyond loopback without one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHostService } from "../../src/host/server.js";
import { startTestHost, type TestHost } from "../host/support.js";
import { rawRequest } from "../support/raw-http.js";

const ALLOWED = "http://localhost:5173";
const FOREIGN = "https://evil.example";
const TOKEN = "0123456789abcdef0123456789abcdef";

/** One request of each route group; bodies are invalid where a valid one would change something. */
const routes: [method: string, path: string, body?: string][] = [
  ["GET", "/svc/host/status"],
  ["GET", "/svc/vms"],
  ["POST", "/svc/vms", "{}"],
  ["GET", "/svc/vms/nope"],
  ["PATCH", "/svc/vms/nope", "{}"],
  ["DELETE", "/svc/vms/nope"],
  ["POST", "/svc/vms/nope/run", "{}"],
  ["POST", "/svc/vms/nope/stop", "{}"],
  ["POST", "/svc/vms/clone", "{}"],
  ["GET", "/svc/config"],
  ["POST", "/svc/config", '{"cachingEnabled":"no"}'],
  ["GET", "/svc/config/locations"],
  ["POST", "/svc/config/locations", "{}"],
  ["GET", "/svc/logs"],
  ["GET", "/svc/images?registry=bad%20name"],
  ["POST", "/svc/pull", "{}"],
  ["POST", "/svc/vms/push", "{}"],
  ["GET", "/svc/ipsw"],
];

describe("the host service refuses web pages", () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost({ allowOrigins: [ALLOWED] });
  });
  afterAll(() => host.cleanup());

  it.each(routes)("%s %s", async (method, path, body) => {
    const port = new URL(host.url).port;
    const hosts = { loopback: `127.0.0.1:${port}`, foreign: `evil.example:${port}` };
    const origins = { none: undefined, allowed: ALLOWED, foreign: FOREIGN, null: "null" };
    const send = (h: string, origin?: string) =>
      rawRequest(
        host.url,
        method,
        path,
        { host: h, "content-type": "text/plain", ...(origin ? { origin } : {}) },
        body,
      );
    const plain = await send(hosts.loopback);
    expect(plain.status).not.toBe(403);
    for (const [hostKind, h] of Object.entries(hosts)) {
      for (const [originKind, origin] of Object.entries(origins)) {
        const reply = await send(h, origin);
        const what = `${method} ${path} host=${hostKind} origin=${originKind}`;
        if (hostKind === "loopback" && (originKind === "none" || originKind === "allowed")) {
          expect(reply.status, what).toBe(plain.status);
        } else {
          expect(reply.status, what).toBe(403);
          expect(JSON.parse(reply.body).message, what).toMatch(/refused/);
          expect(reply.headers["access-control-allow-origin"], what).toBeUndefined();
        }
      }
    }
  });

  it("creates no VM for a foreign page's simple POST", async () => {
    const port = new URL(host.url).port;
    const reply = await rawRequest(
      host.url,
      "POST",
      "/svc/vms",
      { host: `127.0.0.1:${port}`, origin: FOREIGN, "content-type": "text/plain" },
      '{"name":"x","os":"linux","cpu":1,"memory":"1GB","diskSize":"1GB","display":"800x600"}',
    );
    expect(reply.status).toBe(403);
    expect((await host.api("GET", "/svc/vms")).body).toEqual([]);
  });

  it("answers the preflight of an allowed page only", async () => {
    const port = new URL(host.url).port;
    const ask = (origin: string) =>
      rawRequest(host.url, "OPTIONS", "/svc/vms", {
        host: `127.0.0.1:${port}`,
        origin,
        "access-control-request-method": "POST",
      });
    const allowed = await ask(ALLOWED);
    expect(allowed.status).toBe(204);
    expect(allowed.headers["access-control-allow-origin"]).toBe(ALLOWED);
    const foreign = await ask(FOREIGN);
    expect(foreign.status).toBe(403);
    expect(foreign.headers["access-control-allow-methods"]).toBeUndefined();
  });
});

describe("the host service's token", () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost({ token: TOKEN });
  });
  afterAll(() => host.cleanup());

  it.each(routes)("%s %s needs Authorization: Bearer <token>", async (method, path, body) => {
    const port = new URL(host.url).port;
    const send = (authorization?: string) =>
      rawRequest(
        host.url,
        method,
        path,
        {
          host: `127.0.0.1:${port}`,
          "content-type": "application/json",
          ...(authorization ? { authorization } : {}),
        },
        body,
      );
    const none = await send();
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body).message).toMatch(/Authorization: Bearer/);
    const wrong = await send(`Bearer ${TOKEN.replace("0", "1")}`);
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body).message).toBe("Invalid token");
    const right = await send(`Bearer ${TOKEN}`);
    expect(right.status).not.toBe(401);
    expect(right.status).toBeLessThan(500);
  });
});

describe("listening beyond loopback", () => {
  it("refuses to start without a token, and says how to add one", async () => {
    await expect(startHostService({ host: "0.0.0.0", port: 0 })).rejects.toThrow(/--token-file/);
  });

  it("refuses a token too short to resist guessing", async () => {
    await expect(startHostService({ port: 0, token: "short" })).rejects.toThrow(/too short/);
  });

  it("starts with a token, or with noAuth when asked for", async () => {
    const withToken = await startTestHost({ host: "0.0.0.0", token: TOKEN });
    const open = await startTestHost({ host: "0.0.0.0", noAuth: true });
    try {
      const url = (h: TestHost) => h.url.replace("0.0.0.0", "127.0.0.1");
      const ask = (h: TestHost, headers: Record<string, string>) =>
        rawRequest(url(h), "GET", "/svc/vms", { host: "vm-host.example:7777", ...headers });
      expect((await ask(withToken, {})).status).toBe(401);
      expect((await ask(withToken, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
      expect((await ask(open, {})).status).toBe(200);
    } finally {
      await withToken.cleanup();
      await open.cleanup();
    }
  });

  it("accepts '*' as an origin only with a token", async () => {
    await expect(startHostService({ port: 0, allowOrigins: ["*"] })).rejects.toThrow(/needs authentication/);
  });
});

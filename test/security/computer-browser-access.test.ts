/**
 * No web page may drive the computer server: every route and both WebSocket transports, for each
 * kind of Origin (none, allowed, the server's own, foreign, "null") and of Host (loopback, foreign).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startComputerServer } from "../../src/computer/server.js";
import { rawRequest, tryUpgrade } from "../support/raw-http.js";
import { startTestServer } from "../support/server.js";

const ALLOWED = "http://localhost:5173";
const FOREIGN = "https://evil.example";

type Server = Awaited<ReturnType<typeof startTestServer>>;
let server: Server;
let ptyPid: number;

beforeAll(async () => {
  server = await startTestServer({ allowOrigins: [ALLOWED] });
  const started = await fetch(`${server.url}/pty`, {
    method: "POST",
    body: JSON.stringify({ command: "cat" }),
  });
  ptyPid = ((await started.json()) as { pid: number }).pid;
});
afterAll(async () => {
  await fetch(`${server.url}/pty/${ptyPid}`, { method: "DELETE" });
  await server.close();
});

const routes: [method: string, path: string, body?: string][] = [
  ["GET", "/status"],
  ["GET", "/commands"],
  ["GET", "/openapi.json"],
  ["POST", "/cmd", '{"command":"version"}'],
  ["POST", "/cmd", '{"command":"run_command","params":{"command":"true"}}'],
  [
    "POST",
    "/mcp",
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
  ],
  ["POST", "/pty", '{"cols":0}'],
  ["GET", "/pty/999999"],
  ["GET", "/files/no/such/file"],
  ["POST", "/playwright_exec", '{"command":"nope"}'],
  ["GET", "/"],
  ["GET", "/console/assets/console.js"],
  ["GET", "/console/status"],
  ["GET", "/activity"],
  ["GET", "/activity/screenshots/1"],
  ["GET", "/activity/idle"],
  ["GET", "/live.mp4"],
  ["GET", "/control"],
  ["GET", "/recordings"],
  ["GET", "/trajectories"],
  ["GET", "/metrics"],
];

describe("the computer server refuses web pages", () => {
  const port = () => new URL(server.url).port;
  const hosts = () => ({
    loopback: `127.0.0.1:${port()}`,
    localhost: `localhost:${port()}`,
    foreign: `evil.example:${port()}`,
  });
  const origins = () => ({
    none: undefined,
    allowed: ALLOWED,
    own: `http://127.0.0.1:${port()}`,
    foreign: FOREIGN,
    null: "null",
  });

  it.each(routes)(
    "%s %s: served to programs and allowed pages, 403 to every other page and host",
    async (method, path, body) => {
      const headers = (host: string, origin?: string) => ({
        host,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(origin ? { origin } : {}),
      });
      const plain = await rawRequest(server.url, method, path, headers(hosts().loopback), body);
      expect(plain.status).not.toBe(403);
      for (const [hostKind, host] of Object.entries(hosts())) {
        for (const [originKind, origin] of Object.entries(origins())) {
          const reply = await rawRequest(server.url, method, path, headers(host, origin), body);
          const served =
            hostKind !== "foreign" &&
            (originKind === "none" ||
              originKind === "allowed" ||
              (originKind === "own" && hostKind === "loopback"));
          const what = `${method} ${path} host=${hostKind} origin=${originKind}`;
          if (served) {
            expect(reply.status, what).toBe(plain.status);
          } else {
            expect(reply.status, what).toBe(403);
            expect(JSON.parse(reply.body).detail, what).toMatch(/refused/);
            expect(reply.headers["access-control-allow-origin"], what).toBeUndefined();
          }
          if (served && originKind === "allowed") {
            expect(reply.headers["access-control-allow-origin"], what).toBe(ALLOWED);
            expect(reply.headers["access-control-allow-credentials"], what).toBe("true");
          }
        }
      }
    },
  );

  it("refuses the activity stream (GET /events) to a foreign page", async () => {
    const reply = await rawRequest(server.url, "GET", "/events", { host: hosts().loopback, origin: FOREIGN });
    expect(reply.status).toBe(403);
    const rebound = await rawRequest(server.url, "GET", "/events", { host: hosts().foreign });
    expect(rebound.status).toBe(403);
  });

  it("runs nothing for a foreign page's simple POST, and says how to allow it", async () => {
    const reply = await rawRequest(
      server.url,
      "POST",
      "/cmd",
      { host: hosts().loopback, origin: FOREIGN, "content-type": "text/plain" },
      '{"command":"run_command","params":{"command":"id"}}',
    );
    expect(reply.status).toBe(403);
    expect(JSON.parse(reply.body).detail).toBe(
      "Origin 'https://evil.example' is refused: web pages of other origins may not use this server; " +
        "start it with --allow-origin https://evil.example to allow that page",
    );
    expect(reply.body).not.toContain("uid=");
  });

  it("refuses a page's tag requests without Origin, but lets a person open a link", async () => {
    const tag = await rawRequest(server.url, "GET", "/commands", {
      host: hosts().loopback,
      "sec-fetch-site": "cross-site",
      "sec-fetch-mode": "no-cors",
    });
    expect(tag.status).toBe(403);
    const link = await rawRequest(server.url, "GET", "/status", {
      host: hosts().loopback,
      "sec-fetch-site": "cross-site",
      "sec-fetch-mode": "navigate",
    });
    expect(link.status).toBe(200);
  });

  it("answers the CORS preflight of an allowed page only", async () => {
    const ask = (origin: string) =>
      rawRequest(server.url, "OPTIONS", "/cmd", {
        host: hosts().loopback,
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,x-api-key",
      });
    const allowed = await ask(ALLOWED);
    expect(allowed.status).toBe(204);
    expect(allowed.headers["access-control-allow-origin"]).toBe(ALLOWED);
    expect(allowed.headers["access-control-allow-methods"]).toContain("POST");
    expect(allowed.headers["access-control-allow-headers"]).toBe("content-type,x-api-key");
    const foreign = await ask(FOREIGN);
    expect(foreign.status).toBe(403);
    expect(foreign.headers["access-control-allow-origin"]).toBeUndefined();
    expect(foreign.headers["access-control-allow-methods"]).toBeUndefined();
  });

  it.each(["/ws", "/pty/{pid}/ws", "/live"])(
    "upgrades %s for programs and allowed pages only",
    async (template) => {
      const path = template.replace("{pid}", String(ptyPid));
      const url = `${server.url.replace("http", "ws")}${path}`;
      expect(await tryUpgrade(url, { host: hosts().loopback })).toBe("open");
      expect(await tryUpgrade(url, { host: hosts().loopback, origin: ALLOWED })).toBe("open");
      expect(await tryUpgrade(url, { host: hosts().loopback, origin: FOREIGN })).toBe(403);
      expect(await tryUpgrade(url, { host: hosts().loopback, origin: "null" })).toBe(403);
      expect(await tryUpgrade(url, { host: hosts().foreign })).toBe(403);
    },
  );
});

describe("listening beyond loopback", () => {
  it("checks Host only against the names given with allowHosts", async () => {
    const open = await startComputerServer({ host: "0.0.0.0", port: 0 });
    const named = await startComputerServer({ host: "0.0.0.0", port: 0, allowHosts: ["my-vm.local"] });
    try {
      const ask = (url: string, host: string) =>
        rawRequest(url.replace("0.0.0.0", "127.0.0.1"), "POST", "/cmd", { host }, '{"command":"version"}');
      expect((await ask(open.url, "my-vm.example:8000")).status).toBe(200);
      expect((await ask(named.url, "my-vm.local:8000")).status).toBe(200);
      expect((await ask(named.url, "127.0.0.1:8000")).status).toBe(200);
      expect((await ask(named.url, "other.example:8000")).status).toBe(403);
    } finally {
      await open.close();
      await named.close();
    }
  });

  it("takes *.localhost names as loopback: browsers resolve them so, no page can rebind one", async () => {
    const port = new URL(server.url).port;
    const name = `8000-i0123456789.localhost:${port}`;
    const version = (origin?: string) =>
      rawRequest(
        server.url,
        "POST",
        "/cmd",
        { host: name, ...(origin && { origin }) },
        '{"command":"version"}',
      );
    expect((await version()).status).toBe(200);
    expect((await version(`http://${name}`)).status).toBe(200);
    expect((await version(`http://6080-i0123456789.localhost:${port}`)).status).toBe(403);
    // A name that only ends like it is not one.
    const lookalike = await rawRequest(server.url, "POST", "/cmd", { host: `evil-localhost:${port}` }, "{}");
    expect(lookalike.status).toBe(403);
  });

  it("refuses a page served under a DNS name, which could be rebound", async () => {
    const open = await startComputerServer({ host: "0.0.0.0", port: 0 });
    try {
      const url = open.url.replace("0.0.0.0", "127.0.0.1");
      // The page's own origin, reached by a name (rebindable) or by an address.
      const ownPage = (host: string) =>
        rawRequest(url, "POST", "/cmd", { host, origin: `http://${host}` }, '{"command":"version"}');
      expect((await ownPage("evil.example:8000")).status).toBe(403);
      expect((await ownPage("10.1.2.3:8000")).status).toBe(200);
    } finally {
      await open.close();
    }
  });
});

describe("allowing every origin", () => {
  it("is refused without authentication", async () => {
    await expect(startComputerServer({ port: 0, allowOrigins: ["*"] })).rejects.toThrow(
      /needs authentication/,
    );
  });

  it("lets any page through to cloud authentication, without credentials", async () => {
    const cloud = await startComputerServer({
      port: 0,
      allowOrigins: ["*"],
      cloud: { containerName: "vm-1", keys: ["sk-test-key"] },
    });
    try {
      const host = `127.0.0.1:${cloud.port}`;
      const body = '{"command":"version"}';
      const noKey = await rawRequest(cloud.url, "POST", "/cmd", { host, origin: FOREIGN }, body);
      expect(noKey.status).toBe(401);
      const withKey = await rawRequest(
        cloud.url,
        "POST",
        "/cmd",
        { host, origin: FOREIGN, "x-container-name": "vm-1", "x-api-key": "sk-test-key" },
        body,
      );
      expect(withKey.status).toBe(200);
      expect(withKey.headers["access-control-allow-origin"]).toBe("*");
      expect(withKey.headers["access-control-allow-credentials"]).toBeUndefined();
    } finally {
      await cloud.close();
    }
  });
});

/** The remote verifier against a small verifier server on loopback, directly and through the server. */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { remoteVerifier } from "../../../src/computer/auth/index.js";
import { type RunningComputerServer, startComputerServer } from "../../../src/computer/server.js";
import { postCommand, TestSocket, wsUrl } from "../../support/clients.js";

const NAME = "vm-remote";
const VALID = "sk-remote-valid-71c";

/** Answers like the reference's `/api/vm/auth`: 200 with a body for the valid key, 401 otherwise. */
class FakeVerifier {
  calls: { path: string; authorization?: string }[] = [];
  private server?: Server;
  port = 0;

  async start(port = 0) {
    this.server = createServer((req, res) => {
      this.calls.push({ path: req.url ?? "", authorization: req.headers.authorization });
      const url = new URL(req.url ?? "/", "http://x");
      const valid =
        url.pathname === "/api/vm/auth" &&
        url.searchParams.get("container_name") === NAME &&
        req.headers.authorization === `Bearer ${VALID}`;
      if (url.searchParams.get("container_name") === "empty-body") return res.writeHead(200).end("  ");
      res.writeHead(valid ? 200 : 401, { "content-type": "application/json" });
      res.end(valid ? '{"ok":true}' : '{"detail":"no"}');
    });
    this.server.listen(port, "127.0.0.1");
    await new Promise((r) => this.server!.once("listening", r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop() {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }
}

const verifier = new FakeVerifier();
beforeAll(() => verifier.start());
afterAll(() => verifier.stop());
beforeEach(() => {
  verifier.calls = [];
});

describe("remoteVerifier", () => {
  it("speaks the reference's protocol: GET /api/vm/auth?container_name= with a Bearer key", async () => {
    const verify = remoteVerifier({ baseUrl: `${verifier.url}/`, cacheMs: 0 });
    expect(await verify(NAME, VALID)).toBe(true);
    expect(verifier.calls).toEqual([
      { path: `/api/vm/auth?container_name=${NAME}`, authorization: `Bearer ${VALID}` },
    ]);
    expect(await verify(NAME, "sk-wrong")).toBe(false);
    expect(await verify("empty-body", VALID)).toBe(false);
  });

  it("remembers a success briefly, never a refusal", async () => {
    const verify = remoteVerifier({ baseUrl: verifier.url, cacheMs: 60_000 });
    expect(await verify(NAME, VALID)).toBe(true);
    expect(await verify(NAME, VALID)).toBe(true);
    expect(verifier.calls).toHaveLength(1);
    expect(await verify(NAME, "sk-wrong")).toBe(false);
    expect(await verify(NAME, "sk-wrong")).toBe(false);
    expect(verifier.calls).toHaveLength(3);
    expect(await verify(NAME, "sk-wrong", { cachedOnly: true })).toBe(false);
    expect(await verify(NAME, VALID, { cachedOnly: true })).toBe(true);
    expect(verifier.calls).toHaveLength(3);
  });

  it("asks once for concurrent checks of the same key", async () => {
    const verify = remoteVerifier({ baseUrl: verifier.url, cacheMs: 0 });
    const answers = await Promise.all(Array.from({ length: 5 }, () => verify(NAME, VALID)));
    expect(answers).toEqual([true, true, true, true, true]);
    expect(verifier.calls).toHaveLength(1);
  });
});

describe("the server with a remote verifier", () => {
  let server: RunningComputerServer;
  beforeAll(async () => {
    server = await startComputerServer({
      port: 0,
      cloud: {
        containerName: NAME,
        verify: remoteVerifier({ baseUrl: verifier.url, cacheMs: 0, timeoutMs: 1000 }),
        limiter: false,
      },
    });
  });
  afterAll(() => server.close());

  const headers = (key: string) => ({ "X-Container-Name": NAME, "X-API-Key": key });

  it("lets a valid key in on /cmd and /ws, and refuses an invalid one", async () => {
    expect((await postCommand(server.url, "version", {}, headers(VALID))).status).toBe(200);
    const bad = await postCommand(server.url, "version", {}, headers("sk-wrong"));
    expect(bad.status).toBe(401);
    expect(bad.json()).toEqual({ detail: "Authentication failed" });
    const ws = await TestSocket.open(wsUrl(server.url));
    expect((await ws.request("authenticate", { api_key: VALID, container_name: NAME })).success).toBe(true);
    expect((await ws.request("version")).success).toBe(true);
    await ws.close();
  });

  it("does not call the verifier for a wrong container name", async () => {
    const r = await postCommand(
      server.url,
      "version",
      {},
      { "X-Container-Name": "vm-other", "X-API-Key": VALID },
    );
    expect(r.status).toBe(401);
    expect(verifier.calls).toHaveLength(0);
  });

  it("refuses while the verifier is unreachable, and does not remember that once it is back", async () => {
    const port = verifier.port;
    await verifier.stop();
    try {
      const down = await postCommand(server.url, "version", {}, headers(VALID));
      expect(down.status).toBe(401);
      expect(down.json()).toEqual({ detail: "Authentication failed" });
    } finally {
      await verifier.start(port);
    }
    expect((await postCommand(server.url, "version", {}, headers(VALID))).status).toBe(200);
  });
});

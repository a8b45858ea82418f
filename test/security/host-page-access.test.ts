/**
 * The host service's page and its sockets under the origin policy and the token: the page (which
 * holds no data) is public to programs and to itself, refused to other pages; `WS /vnc/{name}` and
 * `WS /wall/{name}` need the token (as `?token=`, since a browser cannot give a WebSocket headers)
 * and refuse other pages.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../host/support.js";
import { rawRequest, tryUpgrade } from "../support/raw-http.js";

const FOREIGN = "https://evil.example";
const TOKEN = "0123456789abcdef0123456789abcdef";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost({ token: TOKEN });
});
afterAll(() => host.cleanup());

describe("the host page", () => {
  it.each(["/", "/host/assets/host.js"])(
    "GET %s: served without the token, refused to other pages",
    async (path) => {
      const port = new URL(host.url).port;
      const own = `http://127.0.0.1:${port}`;
      const ask = (headers: Record<string, string>) =>
        rawRequest(host.url, "GET", path, { host: `127.0.0.1:${port}`, ...headers });
      expect((await ask({})).status).toBe(200);
      expect((await ask({ origin: own })).status).toBe(200);
      expect((await ask({ origin: FOREIGN })).status).toBe(403);
      expect((await rawRequest(host.url, "GET", path, { host: `evil.example:${port}` })).status).toBe(403);
    },
  );

  it.each(["vnc", "wall"])("guards WS /%s/{name} with the token and the origin policy", async (route) => {
    const port = new URL(host.url).port;
    const url = (query = "") => `${host.url.replace("http", "ws")}/${route}/ghost${query}`;
    const loopback = { host: `127.0.0.1:${port}` };
    expect(await tryUpgrade(url(), loopback)).toBe(401);
    expect(await tryUpgrade(url(`?token=${TOKEN.replace("0", "1")}`), loopback)).toBe(401);
    expect(await tryUpgrade(url(`?token=${TOKEN}`), { ...loopback, origin: FOREIGN })).toBe(403);
    expect(await tryUpgrade(url(`?token=${TOKEN}`), { host: `evil.example:${port}` })).toBe(403);
    // The right token opens the socket; a VM that does not exist closes it at once.
    expect(await tryUpgrade(url(`?token=${TOKEN}`), loopback)).toBe("open");
    expect(await tryUpgrade(url(), { ...loopback, authorization: `Bearer ${TOKEN}` })).toBe("open");
  });
});

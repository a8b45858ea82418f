/**
 * What `hangar serve` loads before it answers: `/status` and `/cmd` are answered without hono's
 * Node adapter, whose loading makes Node load its web Request and Response (undici, with node:http2
 * and node:tls), and the first request to another route loads it (docs/performance.md, "Start of `hangar serve`").
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type RunningCli, startCli } from "../support/cli-process.js";

/** Preloaded in the server: says on stderr when the process first takes Node's web classes. */
const PROBE = `
for (const name of ["Request", "Response", "Headers", "fetch"]) {
  const own = Object.getOwnPropertyDescriptor(globalThis, name);
  Object.defineProperty(globalThis, name, {
    configurable: true,
    enumerable: own.enumerable,
    get() {
      process.stderr.write("web " + name + " taken\\n");
      Object.defineProperty(globalThis, name, own);
      return globalThis[name];
    },
  });
}
`;

let dir: string;
let server: RunningCli;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-start-"));
  writeFileSync(join(dir, "probe.mjs"), PROBE);
  server = await startCli(["serve", "--no-virtual-display", "--port", "0", "--warm-shells", "0"], {
    ...process.env,
    NODE_OPTIONS: `--import ${join(dir, "probe.mjs")}`,
  });
});
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("hangar serve at start", () => {
  it("answers /status and /cmd without loading Node's web Request and Response, and loads them for the app's routes", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${server.url}/status`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toMatchObject({
        status: "ok",
        features: expect.arrayContaining(["ws", "mcp"]),
      });
    }
    const cmd = await fetch(`${server.url}/cmd`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "version", params: {} }),
    });
    expect(await cmd.text()).toContain('"success":true');
    expect(server.log()).not.toContain("web ");

    const commands = await fetch(`${server.url}/commands`);
    expect(commands.status).toBe(200);
    expect(JSON.stringify(await commands.json())).toContain("run_command");
    await expect.poll(() => server.log()).toContain("web Response taken");
  });

  it("still refuses /status to a foreign page before and after that", async () => {
    const res = await fetch(`${server.url}/status`, { headers: { origin: "https://evil.example" } });
    expect(res.status).toBe(403);
  });
});

describe("hangar serve whose first request is a WebSocket", () => {
  it("loads the adapter for the upgrade and answers on /ws", async () => {
    const fresh = await startCli(["serve", "--no-virtual-display", "--port", "0", "--warm-shells", "0"]);
    try {
      const socket = new WebSocket(`${fresh.url.replace("http", "ws")}/ws`);
      const reply = new Promise<string>((resolve, reject) => {
        socket.once("message", (data) => resolve(String(data)));
        socket.once("error", reject);
      });
      socket.once("open", () => socket.send(JSON.stringify({ command: "version", params: {} })));
      expect(JSON.parse(await reply)).toMatchObject({ success: true });
      socket.close();
    } finally {
      await fresh.stop();
    }
  });
});

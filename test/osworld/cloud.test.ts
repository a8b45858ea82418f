/**
 * The controller in cloud mode: the same keys as every other route (over TLS when the server has a
 * certificate), and pyautogui in the programs it runs calls the server back with a key of the
 * server's own, read from a private file: never in their arguments or environment, nor the user's.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestCertificate, type TestCertificate } from "../support/tls.js";
import { type OsworldDesktop, startOsworldDesktop } from "./support.js";

const NAME = "osworld-test";
const KEY = "sk-osworld-test-key-0123456789";
const HEADERS = { "x-container-name": NAME, "x-api-key": KEY };

let desk: OsworldDesktop;
let cert: TestCertificate;

/** A directory like the one a killed server leaves behind (its pid is gone). */
let stale: string;

beforeAll(async () => {
  const gone = spawnSync("true").pid;
  stale = join(tmpdir(), `hangar-pyautogui-${gone}-leftover`);
  mkdirSync(stale, { mode: 0o700 });
  writeFileSync(join(stale, "connection.json"), "{}");
  cert = makeTestCertificate();
  desk = await startOsworldDesktop(
    {},
    {
      cloud: { containerName: NAME, keys: [KEY], limiter: false },
      tls: { cert: cert.cert, key: cert.key },
    },
  );
}, 60_000);

afterAll(async () => {
  await desk?.stop();
  cert?.remove();
});

/** An HTTPS request that trusts the test certificate; answers like `fetch` for what the tests read. */
function call(path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  return new Promise<{ status: number; headers: Headers; json(): Promise<any> }>((resolve, reject) => {
    const req = request(
      `${desk.base}${path}`,
      { method: init.method ?? "GET", headers: init.headers, ca: cert.cert },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") headers.set(k, v);
          resolve({ status: res.statusCode ?? 0, headers, json: async () => JSON.parse(text) });
        });
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

describe("cloud mode", () => {
  it("removed at start the directory a killed server had left", () => {
    expect(existsSync(stale)).toBe(false);
  });

  it("serves the controller over TLS and asks every route for the container name and key", async () => {
    expect(desk.base).toMatch(/^https:\/\//);
    const none = await call("/screenshot");
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ detail: "Container name required" });
    const wrong = await call("/execute", {
      method: "POST",
      headers: { ...HEADERS, "x-api-key": "sk-wrong", "content-type": "application/json" },
      body: JSON.stringify({ command: ["true"] }),
    });
    expect(wrong.status).toBe(401);
    const ok = await call("/screenshot", { headers: HEADERS });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toBe("image/png");
  });

  it("lets pyautogui call the server back with a key that is in no argument nor environment", async () => {
    const code =
      "import json, os, sys; pyautogui.moveTo(222, 111); " +
      "f = os.environ['HANGAR_PYAUTOGUI_CONNECTION']; c = json.load(open(f)); " +
      "print(json.dumps({'file': f, 'key': c['api_key'], 'cafile': c.get('cafile'), 'env': dict(os.environ), " +
      "'argv': sys.argv, 'cmdline': open('/proc/self/cmdline').read()}))";
    const res = await call("/execute", {
      method: "POST",
      headers: { ...HEADERS, "content-type": "application/json" },
      body: JSON.stringify({
        command: ["python", "-c", `import pyautogui; import time; pyautogui.FAILSAFE = False; ${code}`],
      }),
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.error).toBe("");
    expect(await desk.pointer()).toEqual({ x: 222, y: 111 });
    const seen = JSON.parse(body.output);
    expect(seen.key.length).toBeGreaterThan(30);
    expect(seen.key).not.toBe(KEY);
    const exposed = JSON.stringify([seen.env, seen.argv, seen.cmdline]);
    expect(exposed).not.toContain(seen.key);
    expect(exposed).not.toContain(KEY);
    expect(statSync(seen.file).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(seen.file)).mode & 0o777).toBe(0o700);
    expect(seen.cafile).toMatch(/server\.pem$/);
    // The server's own key is no key for the network-facing routes' clients to guess: it is random
    // per start, and the server removes the file when it stops.
    await desk.server.close();
    expect(existsSync(dirname(seen.file))).toBe(false);
  });
});

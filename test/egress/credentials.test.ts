/**
 * Secretless credentials (docs/egress.md), end to end: a secret set on the host service, bound to
 * a caged container desktop by a credential rule; the desktop's programs and its Chromium call the
 * world's HTTPS server (world.ts: a network namespace of the test's own), which says whether the
 * credential came (by its SHA-256: the answer goes back into the desktop). Then the desktop, the
 * host's log and every answer of the service are searched for the secret.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { desktopCommand, expectControllerOutOfReach } from "../host/desktop-client.js";
import type { TestEngine } from "../host/podman.js";
import { eventually, type TestHost } from "../host/support.js";
import { CONTAINER_DESKTOP, startCagedHost, startDesktop, stopCagedHost } from "./caged-host.js";
import { inDesktop } from "./desktop-probe.js";
import type { World } from "./world.js";

const SECRET = `tok_${randomBytes(18).toString("hex")}`;
const SENT = createHash("sha256").update(`Bearer ${SECRET}`).digest("hex");
const NAME = "secretless";
let world: World;
let engine: TestEngine;
let host: TestHost;
let desktop: { name: string; computerServerUrl: string; apiKey?: string };
/** Every body the service answered in this test, searched for the secret at the end. */
const answers: string[] = [];
const api = async (method: string, path: string, body?: unknown) => {
  const res = await host.api(method, path, body);
  answers.push(res.text);
  return res;
};

beforeAll(async () => {
  ({ world, engine, host } = await startCagedHost(["api.example.test", "other.example.test"]));
}, 120_000);

afterAll(() => stopCagedHost({ world, engine, host }, [NAME]));

describe("secrets kept by the host", () => {
  it("are set by POST and listed by name only", async () => {
    const set = await api("POST", "/svc/secrets", { name: "api-token", value: SECRET });
    expect(set.status).toBe(201);
    expect(set.body).toEqual({ message: "Secret set", name: "api-token" });
    const list = await api("GET", "/svc/secrets");
    expect(list.body).toEqual([
      { name: "api-token", createdAt: expect.any(String), updatedAt: expect.any(String), usedBy: [] },
    ]);
    const bad = await api("POST", "/svc/secrets", { name: "two\nlines", value: "a\r\nX-Evil: 1" });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/name: expected letters/);
    expect(bad.body.message).toMatch(/value: expected printable ASCII on one line/);
    const file = join(host.home, ".egress", "secrets.json");
    expect(((await import("node:fs")).statSync(file).mode & 0o777).toString(8)).toBe("600");
  });

  it("a credential rule names a secret that is set, for a domain the policy allows", async () => {
    const unknown = await api("POST", "/svc/vms", {
      name: "bad-secret",
      ...CONTAINER_DESKTOP,
      network: {
        egress: { allow: ["api.example.test"] },
        credentials: [{ domain: "api.example.test", secret: "nope" }],
      },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe("No secret named nope: set it first with POST /svc/secrets");
    const notAllowed = await api("POST", "/svc/vms", {
      name: "bad-domain",
      ...CONTAINER_DESKTOP,
      network: {
        egress: { allow: ["other.example.test"] },
        credentials: [{ domain: "api.example.test", secret: "api-token" }],
      },
    });
    expect(notAllowed.status).toBe(400);
    expect(notAllowed.body.message).toMatch(
      /network\.credentials\.0\.domain: 'api\.example\.test' is not allowed/,
    );
    expect((await api("GET", "/svc/vms")).body.map((vm: { name: string }) => vm.name)).not.toContain(
      "bad-secret",
    );
  });
});

describe("a desktop whose requests get a credential it never sees", () => {
  beforeAll(async () => {
    desktop = await startDesktop(host, NAME, {
      egress: { allow: ["api.example.test", "other.example.test"] },
      credentials: [{ domain: "api.example.test", secret: "api-token" }],
    });
    answers.push(JSON.stringify(desktop));
  }, 300_000);

  it("the server gets the header; another domain gets none and its TLS is the server's own", async () => {
    const seen = await inDesktop(
      desktop,
      `return {
        api: await verified("https://api.example.test/v1/me"),
        viaProxy: await viaProxy("api.example.test:443"),
        other: await byName("https://other.example.test/"),
      }`,
    );
    expect(seen.api.status, JSON.stringify(seen)).toBe(200);
    expect(JSON.parse(seen.api.body)).toMatchObject({
      server: "api.example.test",
      path: "/v1/me",
      authorization: SENT,
    });
    expect(seen.api.issuer).toBe(`Hangar egress CA (${NAME})`);
    expect(seen.viaProxy.status).toBe(200);
    expect(JSON.parse(seen.other.body)).toMatchObject({ server: "other.example.test", authorization: null });
    expect(seen.other.issuer).toBe("Hangar test world CA");
    await eventually(async () =>
      ((await api("GET", `/svc/vms/${NAME}/egress`)).body.events as any[]).find(
        (e) => e.name === "api.example.test" && e.credential === "api-token" && e.allowed,
      ),
    );
  });

  it("Chromium in the desktop loads the page without a certificate warning", async () => {
    // Debian's Chromium as a person starts it (the image's flags, the desktop user's NSS database).
    const started = await desktopCommand(desktop, "run_command", {
      command: "setsid chromium --new-window https://api.example.test/in-chromium >/dev/null 2>&1 &",
    });
    expect(started.status).toBe(200);
    // The window's title is the page's: the URL for a JSON answer, "Privacy error" behind a warning.
    const title = await eventually(async () => {
      const windows = await desktopCommand(desktop, "run_command", { command: "wmctrl -l" });
      return /api\.example\.test|Privacy error|not private/i.exec(windows.result.stdout)?.[0];
    }, 90_000);
    expect(title).toBe("api.example.test");
    const shot = await desktopCommand(desktop, "screenshot", { format: "png" });
    expect(shot.status).toBe(200);
    if (process.env.HANGAR_KEEP_SCREENSHOT) {
      await writeFile(process.env.HANGAR_KEEP_SCREENSHOT, Buffer.from(shot.result.image_data, "base64"));
    }
    await eventually(async () =>
      ((await api("GET", `/svc/vms/${NAME}/egress`)).body.events as any[]).find(
        (e) => e.name === "api.example.test" && e.credential === "api-token" && e.allowed && e.bytesOut === 0,
      ),
    );
  });

  it("runs the agent's commands as the desktop user, out of reach of the root server and its secrets", async () => {
    await expectControllerOutOfReach(desktop);
  });

  it("leaves no trace of the secret in the desktop, the host's log or the service's answers", async () => {
    const pattern = Buffer.from(Buffer.from(SECRET).toString("base64")).toString("base64");
    const found = await inDesktop(
      desktop,
      `const fs = require("node:fs"), path = require("node:path");
      const secret = Buffer.from(Buffer.from("${pattern}", "base64").toString(), "base64").toString();
      const hits = [];
      for (const pid of fs.readdirSync("/proc").filter((p) => /^\\d+$/.test(p))) {
        for (const part of ["environ", "cmdline"]) {
          try { if (fs.readFileSync("/proc/" + pid + "/" + part).includes(secret)) hits.push(pid + "/" + part); } catch {}
        }
      }
      const walk = (dir, depth) => {
        let entries = [];
        try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
        for (const e of entries) {
          const p = path.join(dir, e.name);
          if (e.isDirectory() && depth < 8) walk(p, depth + 1);
          else if (e.isFile()) { try { const st = fs.statSync(p); if (st.size < 8e6 && fs.readFileSync(p).includes(secret)) hits.push(p); } catch {} }
        }
      };
      for (const dir of ["/home", "/tmp", "/run", "/etc", "/var", "/root"]) walk(dir, 0);
      return { hits, checked: secret.length };`,
    );
    expect(found).toEqual({ hits: [], checked: SECRET.length });
    const logs = await eventually(async () => {
      const text = await readFile(join(host.home, ".logs", "info.log"), "utf8").catch(() => "");
      return text.includes("credential=api-token") && text;
    });
    expect(logs).not.toContain(SECRET);
    const containerLogs = await engine.podman("logs", `hangar-${NAME}`);
    expect(containerLogs).not.toContain(SECRET);
    for (const text of answers) expect(text).not.toContain(SECRET);
  });
});

/**
 * The browser by DOM commands, through cua's POST /playwright_exec and the registry's browser_*
 * commands: Debian's Chromium with a window on the test's own display, a page served by the test.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { systemChromium } from "../support/browser.js";
import { startTestServer } from "../support/server.js";

const FIRST = `<!doctype html><title>Hangar browser test</title>
<style>body{margin:0;font:16px sans-serif} #b{position:absolute;left:40px;top:100px;width:160px;height:50px}</style>
<h1>Heading here</h1>
<button id="b" onclick="document.getElementById('out').textContent = 'clicked ' + (++window.n)">Press</button>
<script>window.n = 0</script>
<div id="out" style="margin-top:120px">not clicked</div>
<input id="i" style="position:absolute;left:40px;top:300px;width:200px;height:30px"
  oninput="document.getElementById('out').textContent = 'typed: ' + this.value">
<a href="/second">to the second page</a>`;
const SECOND = "<!doctype html><title>Second page</title><p>This is the second page.</p>";

let display: VirtualDisplay;
let desktop: DesktopManager;
let server: Awaited<ReturnType<typeof startTestServer>>;
let site: Server;
let base: string;
let profile: string;

beforeAll(async () => {
  display = await startVirtualDisplay({ width: 1280, height: 800 });
  desktop = new DesktopManager({ display: display.display });
  profile = mkdtempSync(join(tmpdir(), "hangar-browser-profile-"));
  server = await startTestServer({
    desktop: desktop.provider,
    browser: { executablePath: systemChromium(), profileDir: profile, env: () => display.env },
  });
  site = createServer((req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end(req.url === "/second" ? SECOND : FIRST),
  );
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await server?.close();
  await desktop?.close();
  await display?.stop();
  site?.close();
  rmSync(profile, { recursive: true, force: true });
});

/** POSTs /playwright_exec as cua's Python SDK does and returns the status and JSON reply. */
async function playwright(command: string, params: Record<string, unknown> = {}) {
  const res = await fetch(`${server.url}/playwright_exec`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command, params }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("POST /playwright_exec (cua's request and reply shapes)", () => {
  it("visits a URL and reports where it is", async () => {
    const visited = await playwright("visit_url", { url: base });
    expect(visited).toEqual({
      status: 200,
      body: expect.objectContaining({ success: true, url: `${base}/`, title: "Hangar browser test" }),
    });
    expect((await playwright("get_current_url")).body.url).toBe(`${base}/`);
  });

  it("clicks in the page by viewport coordinates: the page's own handler runs", async () => {
    expect((await playwright("click", { x: 120, y: 125 })).body.success).toBe(true);
    const text = await server.cmd("browser_get_page_text");
    expect(text.event.text).toContain("clicked 1");
  });

  it("types into the focused field", async () => {
    await playwright("click", { x: 140, y: 315 });
    expect((await playwright("type", { text: "typed by the agent" })).body.success).toBe(true);
    const waited = await server.cmd("browser_wait_for", { text: "typed: typed by the agent", timeout: 5 });
    expect(waited.event.success).toBe(true);
    // browser_evaluate is off by default, and says how to turn it on.
    const read = await server.cmd("browser_evaluate", { expression: "document.getElementById('i').value" });
    expect(read.event).toMatchObject({ success: false, code: "not_supported" });
    expect(read.event.error).toMatch(/--browser-evaluate/);
  });

  it("lists links, goes there, back and forward", async () => {
    const links = await server.cmd("browser_get_links");
    expect(links.event.links).toEqual([{ text: "to the second page", href: `${base}/second` }]);
    await playwright("visit_url", { url: `${base}/second` });
    expect((await playwright("go_back")).body.url).toBe(`${base}/`);
    expect((await playwright("go_forward")).body.url).toBe(`${base}/second`);
    expect((await playwright("scroll", { delta_x: 0, delta_y: 200 })).body.success).toBe(true);
  });

  it("returns a PNG screenshot of the page in `screenshot`", async () => {
    const shot = await playwright("screenshot");
    const meta = await sharp(Buffer.from(shot.body.screenshot, "base64")).metadata();
    expect(meta.format).toBe("png");
    expect(meta.width).toBeGreaterThan(300);
  });

  it("answers an unknown command with a 400 naming the known ones, and a failure in words", async () => {
    const unknown = await playwright("fly", {});
    expect(unknown.status).toBe(400);
    expect(unknown.body.detail).toMatch(
      /^Unknown browser command: fly \(known: visit_url, click, type, scroll/,
    );
    const failed = await playwright("visit_url", { url: "http://127.0.0.1:1/", timeout: 5 });
    expect(failed.body).toMatchObject({ success: false });
    expect(failed.body.error).toMatch(/^Opening http:\/\/127\.0\.0\.1:1\/ failed: net::ERR_/);
  });
});

describe("browser_evaluate, when the server allows it", () => {
  it("returns the expression's value from the page", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-browser-eval-"));
    const allowing = await startTestServer({
      desktop: desktop.provider,
      browser: {
        executablePath: systemChromium(),
        profileDir: dir,
        allowEvaluate: true,
        env: () => display.env,
      },
    });
    try {
      await allowing.cmd("browser_visit_url", { url: base });
      const r = await allowing.cmd("browser_evaluate", {
        expression: "document.querySelector('h1').textContent",
      });
      expect(r.event).toMatchObject({ success: true, result: "Heading here" });
    } finally {
      await allowing.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the same browser on the desktop", () => {
  it("is a window of this display that the agent sees in its screenshots", async () => {
    await playwright("visit_url", { url: base });
    await vi.waitFor(
      async () => {
        const windows = await (await desktop.provider()).listWindows();
        expect(windows.map((w) => w.title)).toEqual(
          expect.arrayContaining([expect.stringMatching(/^Hangar browser test/)]),
        );
      },
      { timeout: 10_000 },
    );
  });
});

describe("one profile per server", () => {
  it("lets two servers of one user, both with the default profile, start their browsers at once", async () => {
    const state = mkdtempSync(join(tmpdir(), "hangar-browser-state-"));
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = state;
    const servers: Awaited<ReturnType<typeof startTestServer>>[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        servers.push(
          await startTestServer({
            desktop: desktop.provider,
            browser: { executablePath: systemChromium(), env: () => display.env },
          }),
        );
      }
      const visits = await Promise.all(
        servers.map((s) => s.cmd("browser_visit_url", { url: `${base}/second` })),
      );
      for (const visit of visits) expect(visit.event).toMatchObject({ success: true, title: "Second page" });
      // Each has its own profile, named by its port, holding Chromium's lock.
      expect(readdirSync(join(state, "hangar", "browser")).sort()).toEqual(
        servers.map((s) => `port-${s.port}`).sort(),
      );
    } finally {
      await Promise.all(servers.map((s) => s.close()));
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
      rmSync(state, { recursive: true, force: true });
    }
  }, 60_000);
});

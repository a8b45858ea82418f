/**
 * Accessibility everywhere on X11: a text entry is focused by click_element so that typing lands in
 * it; windows whose applications are not on the bus are in the tree from the window manager; and
 * `hangar serve` on a display without a session bus starts one, so that applications it launches
 * are in the tree.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AccessibleNode } from "../../src/desktop/accessibility.js";
import { atspiProvider } from "../../src/desktop/atspi/index.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { withRendererAccessibility } from "../../src/os/launch.js";
import { type A11yApp, startA11yDesktop } from "../support/a11y-app.js";
import { systemChromium } from "../support/browser.js";
import { type RunningCli, startCli } from "../support/cli-process.js";
import { PYTHON } from "../support/desktop.js";
import { postCmd, startTestServer } from "../support/server.js";

const flatten = (node: AccessibleNode): AccessibleNode[] => [node, ...(node.children ?? []).flatMap(flatten)];

describe("click_element on a text entry", () => {
  let desk: Awaited<ReturnType<typeof startA11yDesktop>>;
  let app: A11yApp;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    desk = await startA11yDesktop({ width: 1024, height: 768 });
    ({ app, server } = desk);
  });
  afterAll(() => desk?.stop());

  it("focuses it (no Enter), so that the typing that follows goes into it", async () => {
    // The focus elsewhere first: on the button, by a real click.
    await server.cmd("click_element", { role: "push button", title: "Press me", method: "mouse" });
    await app.waitFor(/^clicked 1$/);
    const r = await server.cmd("click_element", { role: "text", title: "Your name" });
    expect(r.event).toMatchObject({ success: true, method: "focus" });
    expect((await server.cmd("type_text", { text: "typed here" })).event.success).toBe(true);
    await app.waitFor(/^entry: typed here$/);
    const entry = await server.cmd("find_element", { role: "text", title: "Your name" });
    expect(entry.event.element.text).toBe("typed here");
    expect(entry.event.element.states).toContain("focused");
  });
});

describe("Chromium started by launch", () => {
  let desk: Awaited<ReturnType<typeof startA11yDesktop>>;
  let site: Server;
  let profile: string;
  const pids: number[] = [];
  beforeAll(async () => {
    desk = await startA11yDesktop({ width: 1024, height: 768 });
    profile = mkdtempSync(join(tmpdir(), "hangar-launch-chromium-"));
    site = createServer((_req, res) =>
      res
        .writeHead(200, { "content-type": "text/html" })
        .end("<!doctype html><title>launched page</title><button>Launched page button</button>"),
    );
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    for (const pid of pids) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {}
    }
    site?.close();
    await desk?.stop();
    rmSync(profile, { recursive: true, force: true });
  });

  it("gets --force-renderer-accessibility (arguments and command lines), so the page is in the tree", () => {
    expect(withRendererAccessibility("/usr/bin/chromium", ["http://x/"]).args).toEqual([
      "--force-renderer-accessibility",
      "http://x/",
    ]);
    expect(withRendererAccessibility("google-chrome --new-window http://x/", null).file).toBe(
      "google-chrome --force-renderer-accessibility --new-window http://x/",
    );
    expect(withRendererAccessibility("xterm", ["-e", "top"]).args).toEqual(["-e", "top"]);
    expect(withRendererAccessibility("chromium --force-renderer-accessibility", null).file).toBe(
      "chromium --force-renderer-accessibility",
    );
  });

  it("exposes the page's content in the accessibility tree", async () => {
    const url = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
    const args = [`--user-data-dir=${profile}`, "--no-first-run", "--no-default-browser-check"];
    if (process.getuid?.() === 0) args.push("--no-sandbox");
    const launched = await desk.server.cmd("launch", { app: systemChromium(), args: [...args, url] });
    expect(launched.event.success).toBe(true);
    pids.push(launched.event.pid);
    // Debian's wrapper script execs the browser in the same process: its command line has the flag.
    await vi.waitFor(
      () =>
        expect(readFileSync(`/proc/${launched.event.pid}/cmdline`, "utf8").split("\0")).toContain(
          "--force-renderer-accessibility",
        ),
      { timeout: 10_000 },
    );
    await vi.waitFor(
      async () => {
        const found = await desk.server.cmd("find_element", {
          role: "button",
          title: "Launched page button",
        });
        expect(found.event).toMatchObject({ success: true, element: { role: "push button" } });
      },
      { timeout: 30_000, interval: 250 },
    );
  }, 45_000);
});

describe("windows of applications that are not on the accessibility bus", () => {
  let display: VirtualDisplay;
  let desktop: DesktopManager;
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let xterm: ChildProcess;
  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 800, height: 600 });
    desktop = new DesktopManager({ display: display.display });
    // No session bus at all: AT-SPI is unavailable on this desktop.
    server = await startTestServer({
      accessibility: atspiProvider({ DISPLAY: display.display }),
      desktop: desktop.provider,
    });
    xterm = spawn("xterm", ["-T", "plain terminal"], {
      env: { ...process.env, ...display.env },
      stdio: "ignore",
    });
    await vi.waitFor(
      async () => expect((await server.cmd("get_application_windows", {})).event.windows).toHaveLength(1),
      {
        timeout: 10_000,
      },
    );
  });
  afterAll(async () => {
    xterm?.kill();
    await server?.close();
    await desktop?.close();
    await display?.stop();
  });

  it("are in the tree from the window manager, marked source x11", async () => {
    const r = await server.cmd("get_accessibility_tree");
    expect(r.event.success).toBe(true);
    const window = flatten(r.event.content.tree).find((n) => n.name === "plain terminal")!;
    expect(window).toMatchObject({ role: "frame", source: "x11", pid: xterm.pid, app: "XTerm" });
    expect(window.states).toEqual(expect.arrayContaining(["showing", "focused"]));
    expect(window.bounds!.width).toBeGreaterThan(100);
    expect(window.description).toMatch(/^this application exposes no accessibility tree/);
    expect(r.event.note).toMatch(/^no application exposes an accessibility tree/);
    // Asked for that application alone: said as such, not an empty tree.
    const scoped = await server.cmd("get_accessibility_tree", { window: "plain terminal" });
    expect(scoped.event.note).toBe(
      "this application exposes no accessibility tree: only its window is listed, from the window manager (source: x11)",
    );
    const none = await server.cmd("get_accessibility_tree", { app: "nosuchapp" });
    expect(none.event.note).toBe("no application or window matches app/window");
  });

  it("can be found and clicked (at their centre); they have no text to set", async () => {
    const found = await server.cmd("find_element", { title: "plain terminal" });
    expect(found.event.element.id).toMatch(/^x11:\d+$/);
    const clicked = await server.cmd("click_element", { id: found.event.element.id });
    expect(clicked.event).toMatchObject({ success: true, method: "mouse" });
    const { bounds } = found.event.element;
    expect((await server.cmd("get_cursor_position")).event.position).toEqual({
      x: Math.round(bounds.x + bounds.width / 2),
      y: Math.round(bounds.y + bounds.height / 2),
    });
    const text = await server.cmd("set_element_text", { id: found.event.element.id, text: "x" });
    expect(text.event).toMatchObject({ success: false, code: "not_supported" });
  });
});

describe("hangar serve on a display without a session bus", () => {
  let display: VirtualDisplay;
  let serve: RunningCli;
  let url: string;
  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 800, height: 600 });
    const env: NodeJS.ProcessEnv = { ...process.env, DISPLAY: display.display };
    delete env.DBUS_SESSION_BUS_ADDRESS;
    delete env.AT_SPI_BUS_ADDRESS;
    serve = await startCli(["serve", "--port", "0"], env);
    url = serve.url;
  });
  afterAll(async () => {
    await serve?.stop();
    await display?.stop();
  });

  it("starts one, and gives it to what it launches: the app's widgets are in the tree", async () => {
    const app = fileURLToPath(new URL("../support/a11y-app.py", import.meta.url));
    expect(
      (await postCmd(url, { command: "launch", params: { app: PYTHON, args: [app] } })).event.success,
    ).toBe(true);
    await vi.waitFor(
      async () => {
        const found = await postCmd(url, {
          command: "find_element",
          params: { role: "button", title: "Press me" },
        });
        expect(found.event).toMatchObject({ success: true, element: { role: "push button" } });
        expect(found.event.element.source).toBeUndefined();
      },
      { timeout: 15_000, interval: 100 },
    );
  });
});

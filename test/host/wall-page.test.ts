/**
 * The host page's wall in a real browser (Debian's Chromium), with real container desktops
 * (podman.ts) that have keys of their own: each running desktop's tile shows its screen (a colour
 * painted through its computer server, read from the tile's pixels), a change reaches the tile, a
 * click opens the desktop's console (a QEMU VM without a computer server: its VNC screen on the
 * page), a hibernated desktop is shown asleep and is not woken, a stopped one is not live.
 * `WS /wall/{name}` itself: JPEG frames at the asked width, the page's frames never reach the
 * desktop, a desktop killed under it ends it with the reason, bad settings refused before the
 * upgrade.
 * HANGAR_WALL_SCREENSHOT=file.png keeps a picture of the wall for a person to look at.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { launchBrowser } from "../support/browser.js";
import { desktopCommand } from "./desktop-client.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

const TOKEN = "wall-page-token-0123456789abcdef";
const COLOURS = {
  red: { hex: "#e02828", rgb: [224, 40, 40] },
  blue: { hex: "#2850e0", rgb: [40, 80, 224] },
  green: { hex: "#28c050", rgb: [40, 192, 80] },
} as const;
type Colour = keyof typeof COLOURS;

let engine: TestEngine;
let host: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];

/** The host's API with its token. */
async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${host.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, text };
}
const record = async (name: string) => (await api("GET", `/svc/vms/${name}`)).body;
async function paint(name: string, colour: Colour) {
  const out = await desktopCommand(await record(name), "run_command", {
    command: `xsetroot -solid '${COLOURS[colour].hex}'`,
  });
  expect(out.result.success, JSON.stringify(out.result)).toBe(true);
}

beforeAll(async () => {
  [engine, browser] = await Promise.all([startPodman(), launchBrowser()]);
  host = await startTestHost({
    token: TOKEN,
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
    desktopKeys: true,
  });
  for (const name of ["wall-a", "wall-b", "wall-off"]) {
    const made = await api("POST", "/svc/vms", { name, ...LINUX_VM });
    expect(made.status, made.text).toBe(200);
  }
  for (const name of ["wall-a", "wall-b"]) {
    expect((await api("POST", `/svc/vms/${name}/run`, {})).status).toBe(202);
  }
  for (const name of ["wall-a", "wall-b"]) {
    const ready = await api("GET", `/svc/vms/${name}?wait=ready&timeout=150`);
    expect(ready.status, ready.text).toBe(200);
    expect(ready.body.apiKey).toBeTruthy();
  }
  await Promise.all([paint("wall-a", "red"), paint("wall-b", "blue")]);
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("pageerror", (err) => problems.push(err.message));
}, 300_000);
afterAll(async () => {
  await browser?.close();
  // The paused desktop is stopped through the service, which unpauses it first.
  if (host) await api("POST", "/svc/vms/wall-b/stop", {}).catch(() => undefined);
  await host?.cleanup();
  await engine?.cleanup();
});

const tile = (name: string) => page.locator(`#wall .tile[data-name="${name}"]`);

/** The colour at the middle of a tile's picture, as the page drew it. */
function tileColour(name: string): Promise<number[]> {
  return page.evaluate((name) => {
    const canvas = document.querySelector<HTMLCanvasElement>(`#wall .tile[data-name="${name}"] canvas`);
    if (!canvas) return [];
    const data = canvas.getContext("2d")?.getImageData(canvas.width >> 1, canvas.height >> 1, 1, 1).data;
    return data ? [data[0], data[1], data[2]] : [];
  }, name);
}
const near = (got: number[], colour: Colour) =>
  got.length === 3 && got.every((v, i) => Math.abs(v - COLOURS[colour].rgb[i]) <= 24);
async function showsColour(name: string, colour: Colour) {
  await expect
    .poll(async () => near(await tileColour(name), colour), { timeout: 30_000, interval: 100 })
    .toBe(true);
}

describe("the wall", () => {
  it("shows each running desktop's screen live, and a change on it", async () => {
    await page.goto(host.url);
    await page.fill("input[name=token]", TOKEN);
    await page.click("#login button[type=submit]");
    await tile("wall-a").and(page.locator("[data-state=live]")).waitFor({ timeout: 30_000 });
    await showsColour("wall-a", "red");
    await showsColour("wall-b", "blue");
    // The page never holds a desktop's key: its sockets carry the host's token only.
    const html = await page.content();
    for (const name of ["wall-a", "wall-b"]) expect(html).not.toContain((await record(name)).apiKey);

    await paint("wall-a", "green");
    await showsColour("wall-a", "green");
    await showsColour("wall-b", "blue");
    expect(await tile("wall-off").getAttribute("data-state")).toBe("stopped");
    expect(await tile("wall-off").getAttribute("data-frames")).toBeNull();
    expect(await tile("wall-off").textContent()).toContain("stopped");
  }, 90_000);

  it("opens a desktop's console on a click", async () => {
    const { computerServerUrl } = await record("wall-a");
    const [popup] = await Promise.all([page.waitForEvent("popup"), tile("wall-a").click()]);
    await popup.waitForLoadState();
    expect(popup.url()).toBe(new URL(computerServerUrl).href);
    expect(await popup.title()).toBe("Hangar console");
    await popup.close();
  }, 60_000);

  it("shows a QEMU VM without a computer server its VNC screen on a click", async () => {
    const made = await api("POST", "/svc/vms", { name: "wall-vm", ...LINUX_VM, runtime: "qemu" });
    expect(made.status, made.text).toBe(200);
    expect((await api("POST", "/svc/vms/wall-vm/run", {})).status).toBe(202);
    await tile("wall-vm").and(page.locator("[data-state=vnc]")).waitFor({ timeout: 30_000 });
    expect(await tile("wall-vm").getAttribute("href")).toBeNull();
    await tile("wall-vm").click();
    await page.locator("#screen-section:not([hidden])").waitFor({ timeout: 10_000 });
    expect(await page.textContent("#screen-title")).toBe("Screen of wall-vm");
    expect((await api("POST", "/svc/vms/wall-vm/stop", {})).status).toBe(200);
    await tile("wall-vm").and(page.locator("[data-state=stopped]")).waitFor({ timeout: 30_000 });
  }, 90_000);

  it("shows a hibernated desktop asleep and does not wake it", async () => {
    const slept = await api("POST", "/svc/vms/wall-b/hibernate", {});
    expect(slept.status, slept.text).toBe(200);
    await tile("wall-b").and(page.locator("[data-state=hibernated]")).waitFor({ timeout: 30_000 });
    expect(await tile("wall-b").textContent()).toContain("hibernated");
    // Two more of the page's refreshes: the desktop stays asleep under the page's eyes.
    for (let i = 0; i < 2; i++) await page.waitForResponse((res) => res.url().endsWith("/svc/vms"));
    expect((await record("wall-b")).status).toBe("hibernated");
    if (process.env.HANGAR_WALL_SCREENSHOT) {
      await page.locator("section.wall").screenshot({ path: process.env.HANGAR_WALL_SCREENSHOT });
    }
    expect(problems).toEqual([]);
  }, 60_000);
});

describe("WS /wall/{name}", () => {
  const open = (path: string) =>
    new WebSocket(`${host.url.replace("http", "ws")}${path}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
  /** The first binary frame, or the close's code and reason. */
  const first = (ws: WebSocket) =>
    new Promise<{ jpeg?: Buffer; code?: number; reason?: string }>((resolve) => {
      ws.on("message", (data, binary) => binary && resolve({ jpeg: data as Buffer }));
      ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() }));
      ws.on("unexpected-response", (_req, res) => resolve({ code: res.statusCode }));
    });

  it("sends JPEG frames at the asked width, and keeps the page's frames from the desktop", async () => {
    const ws = open("/wall/wall-a?width=240&fps=2");
    ws.on("open", () => ws.send(JSON.stringify({ type: "control", on: true })));
    const { jpeg } = await first(ws);
    expect(jpeg?.subarray(0, 2).toString("hex")).toBe("ffd8");
    // The JPEG's width from its start-of-frame marker.
    const sof = jpeg!.indexOf(Buffer.from([0xff, 0xc0]));
    expect(jpeg!.readUInt16BE(sof + 7)).toBe(240);
    // Had the control frame reached the desktop, its agents would be paused now.
    const command = await desktopCommand(await record("wall-a"), "run_command", { command: "echo free" });
    expect(command.result.success, JSON.stringify(command.result)).toBe(true);
    ws.close();
  }, 30_000);

  it("closes at once with the reason for a stopped, hibernated or unknown desktop", async () => {
    expect(await first(open("/wall/wall-off"))).toMatchObject({
      code: 1011,
      reason: expect.stringMatching(/wall-off is stopped/),
    });
    expect(await first(open("/wall/wall-b"))).toMatchObject({
      code: 1011,
      reason: expect.stringMatching(/wall-b is hibernated/),
    });
    expect((await record("wall-b")).status).toBe("hibernated");
    expect(await first(open("/wall/nobody"))).toMatchObject({
      code: 1011,
      reason: expect.stringMatching(/nobody/),
    });
  }, 30_000);

  it("ends with the reason when the desktop dies under it", async () => {
    const ws = open("/wall/wall-a");
    expect((await first(ws)).jpeg).toBeDefined();
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    await engine.podman("kill", "hangar-wall-a");
    expect(await closed).toMatchObject({ reason: expect.stringMatching(/^wall-a's live view ended/) });
  }, 60_000);

  it.each([
    ["width=10", /parameter width: at least 160/],
    ["fps=100", /parameter fps: at most 10/],
    ["fps=two", /parameter fps: expected a whole number/],
  ])("refuses ?%s before the upgrade", async (query, message) => {
    const res = await api("GET", `/wall/wall-a?${query}`);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
  });
});

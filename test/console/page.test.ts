/**
 * The web console in a real browser (Debian's Chromium) against a real desktop (Xvfb + openbox):
 * the live view's pixels, the timeline of another client's click, the command console, take
 * control typing into an xterm, and cloud mode's login. Page screenshots go to .tmp/console/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startComputerServer } from "../../src/computer/server.js";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/console");
const PATTERN_AT = { x: 200, y: 150 };

let desk: DesktopServer;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  [desk, browser] = await Promise.all([startDesktopServer({ width: 1280, height: 800 }), launchBrowser()]);
  await desk.run("xsetroot", ["-solid", "#203040"]);
  desk.spawn(PYTHON, [join(APPS, "pattern.py"), String(PATTERN_AT.x), String(PATTERN_AT.y)]);
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  collectProblems(page, problems);
  await page.goto(desk.server.url);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await desk?.stop();
});

/** The live view canvas's colour at a screen point. */
function canvasPixel(point: { x: number; y: number }) {
  return page.evaluate(({ x, y }) => {
    const canvas = document.getElementById("screen") as HTMLCanvasElement;
    const scale = canvas.width / 1280;
    const [r, g, b] = canvas
      .getContext("2d")!
      .getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data;
    return { r, g, b };
  }, point);
}

const frames = () =>
  page.evaluate(() => (window as unknown as { hangarLive: { frames: number } }).hangarLive.frames);

describe("the console page", () => {
  it("loads without console errors and shows the status in words", async () => {
    await expect.poll(() => page.textContent("#status")).toMatch(/display 1280x800, x11 backend/);
    expect(await page.textContent("#status")).toMatch(/version \d+\.\d+\.\d+ · .* · up \d+ s · batch, ws/);
    expect(problems).toEqual([]);
  });

  it("shows a window the test opened in the live view", async () => {
    await expect
      .poll(() => canvasPixel({ x: PATTERN_AT.x + 50, y: PATTERN_AT.y + 50 }), { timeout: 15_000 })
      .toEqual({
        r: expect.toSatisfy((r: number) => r > 200),
        g: expect.toSatisfy((g: number) => g < 60),
        b: expect.toSatisfy((b: number) => b < 60),
      });
    await page.screenshot({ path: join(SHOTS, "live.png") });
  });

  it("shows a change within 300 ms, and sends no frames while the screen is still", async () => {
    const spot = { x: 1000, y: 650 };
    const started = performance.now();
    await desk.run("xsetroot", ["-solid", "#00ffff"]);
    await page.waitForFunction(
      ({ x, y }) => {
        const canvas = document.getElementById("screen") as HTMLCanvasElement;
        const scale = canvas.width / 1280;
        const [r, g, b] = canvas
          .getContext("2d")!
          .getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data;
        return r < 60 && g > 200 && b > 200;
      },
      spot,
      { polling: "raf" },
    );
    expect(performance.now() - started).toBeLessThan(300);
    // Nothing moves now: over a second no frame arrives (an absence can only be watched for a while).
    const before = await frames();
    await page.waitForTimeout(1000);
    expect(await frames()).toBe(before);
  });

  it("shows another client's click in the timeline, on the screenshot the agent had seen", async () => {
    await desk.cmd("screenshot", { scale: 0.5 });
    expect((await desk.cmd("left_click", { x: 250, y: 200 })).success).toBe(true);
    const row = page.locator('#timeline li[data-command="left_click"]').last();
    await expect.poll(() => row.textContent()).toMatch(/http.*left_click \(250, 200\)/);
    await row.click();
    const marker = page.locator("#detail .marker");
    await marker.waitFor();
    const image = page.locator("#detail img");
    expect(await image.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(640);
    // The marker sits where the click was, on the half-size screenshot.
    const [box, dot] = [await image.boundingBox(), await marker.boundingBox()];
    expect(((dot!.x + dot!.width / 2 - box!.x) / box!.width) * 1280).toBeCloseTo(250, -1);
    expect(((dot!.y + dot!.height / 2 - box!.y) / box!.height) * 800).toBeCloseTo(200, -1);
    await page.screenshot({ path: join(SHOTS, "timeline.png"), fullPage: true });
  });

  it("runs version and screenshot from the command console", async () => {
    await page.selectOption("#command", "version");
    await page.click("#run");
    await expect.poll(() => page.textContent("#reply")).toMatch(/"package": "\d+\.\d+\.\d+"/);
    await page.selectOption("#command", "screenshot");
    await page.fill("#param-max_width", "400");
    await page.click("#run");
    const image = page.locator("#reply img");
    await image.waitFor();
    expect(await image.evaluate((img: HTMLImageElement) => img.naturalWidth)).toBe(400);
    await page.click("#curl");
    expect(await page.textContent("#curl-text")).toContain(`curl -N '${desk.server.url}/cmd'`);
    const consoleRows = page.locator("#timeline li", { hasText: "console" });
    await expect.poll(() => consoleRows.count()).toBeGreaterThanOrEqual(2);
    await page.screenshot({ path: join(SHOTS, "console.png"), fullPage: true });
  });

  it("types into an xterm when the person takes control", async () => {
    const file = join(desk.dir, "typed.txt");
    desk.spawn("xterm", [
      "-T",
      "typing-target",
      "-geometry",
      "40x6+700+100",
      "-e",
      "sh",
      "-c",
      `cat > ${file}`,
    ]);
    const xterm = await desk.geometry(await desk.waitForWindow("typing-target"));
    expect(await page.isVisible("#control-banner")).toBe(false);
    await page.check("#control");
    await page.locator("#control-banner").waitFor();
    const canvas = await page.locator("#screen").boundingBox();
    await page.mouse.click(
      canvas!.x + ((xterm.x + xterm.width / 2) / 1280) * canvas!.width,
      canvas!.y + ((xterm.y + xterm.height / 2) / 800) * canvas!.height,
    );
    await page.keyboard.type("hello console");
    await page.keyboard.press("Enter");
    await eventually(() => desk.read("typed.txt").includes("hello console\n"), 10_000);
    await page.screenshot({ path: join(SHOTS, "control.png") });
    await page.uncheck("#control");
    await page.locator("#control-banner").waitFor({ state: "hidden" });
  });
});

describe("cloud mode", () => {
  it("shows only the login form until the key is given", async () => {
    const KEY = "sk-console-test-51c0";
    const cloud = await startComputerServer({
      port: 0,
      cloud: { containerName: "vm-7", keys: [KEY], limiter: false },
    });
    const tab = await browser.newPage();
    try {
      await tab.goto(cloud.url);
      await tab.locator("#login").waitFor();
      expect(await tab.isVisible("#app")).toBe(false);
      expect(await tab.textContent("body")).not.toMatch(/version \d/);
      await tab.screenshot({ path: join(SHOTS, "login.png") });
      await tab.fill("input[name=container]", "vm-7");
      await tab.fill("input[name=key]", KEY);
      await tab.click("button[type=submit]");
      await tab.locator("#app").waitFor();
      await expect.poll(() => tab.textContent("#status")).toMatch(/version \d+\.\d+\.\d+/);
      await expect.poll(() => tab.locator("#command option").count()).toBeGreaterThan(10);
      // The key lives in this tab's session storage, nowhere else.
      expect(await tab.evaluate(() => localStorage.length)).toBe(0);
      expect(await tab.evaluate(() => sessionStorage.getItem("hangar-console-credentials"))).toContain(KEY);
    } finally {
      await tab.close();
      await cloud.close();
    }
  });
});

/**
 * The host page's pools in a real browser (Debian's Chromium) against a real engine (podman's API
 * service): a pool made with the form, its desktops counted as they get ready, a claim and a
 * release with the buttons, the claimed desktop listed with its claimant, a container desktop's
 * viewer link. The page's screenshot goes to .tmp/host/pools.png.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { makeLightImage, startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { startTestHost, type TestHost } from "./support.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/host");

let engine: TestEngine;
let host: TestHost;
let browser: Browser;
let page: Page;
let light: string;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  engine = await startPodman();
  light = await makeLightImage(engine);
  [host, browser] = await Promise.all([
    startTestHost({
      containerEngine: engine.address,
      desktopImage: TEST_IMAGE,
      containerUlimits: testUlimits(),
      defaultRuntime: "container",
    }),
    launchBrowser(),
  ]);
  page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  collectProblems(page, problems);
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await host?.cleanup();
  await engine?.cleanup();
});

const cellsOf = async (selector: string) =>
  (await page.locator(`${selector} td`).allTextContents()).map((t) => t.trim());

describe("the host page's pools", () => {
  it("creates a pool, shows it filling, claims and releases a desktop with the buttons", async () => {
    await page.goto(host.url);
    await page.locator("#app").waitFor();
    await page.fill("#create-pool input[name=name]", "agents");
    await page.fill("#create-pool input[name=template]", light);
    await page.fill("#create-pool input[name=size]", "2");
    await page.fill("#create-pool input[name=ttl]", "900");
    await page.click("#create-pool button[type=submit]");
    const pool = 'tr[data-pool="agents"]';
    await page.locator(pool).waitFor();
    await expect
      .poll(() => cellsOf(pool), { timeout: 60_000, interval: 250 })
      .toEqual(["agents", "container", light, "2", "2", "0", "0", "900 s", "ClaimResizeDelete"]);

    await page.click(`${pool} button:has-text("Claim")`);
    const claimed = page.locator("#claims tr[data-claim]");
    await claimed.waitFor();
    const [desktop, poolName, by] = await cellsOf("#claims tr[data-claim]");
    expect(desktop).toMatch(/^agents-[0-9a-f]{8}$/);
    expect([poolName, by]).toEqual(["agents", "host page"]);
    // The claimed desktop is in the desktops' table too, as a container with its viewer.
    const vm = page.locator(`#vms tr[data-name="${desktop}"]`);
    await vm.waitFor();
    expect((await cellsOf(`#vms tr[data-name="${desktop}"]`)).slice(0, 2)).toEqual([desktop, "container"]);
    await expect.poll(() => cellsOf(pool), { timeout: 60_000 }).toEqual(expect.arrayContaining(["1"]));
    await page.screenshot({ path: join(SHOTS, "pools.png"), fullPage: true });

    await page.click(`#claims tr[data-claim="${desktop}"] button:has-text("Release")`);
    // As the waits above: the engine's calls take seconds on a loaded machine (one CI run took over 30).
    await expect.poll(() => page.locator("#claims tr[data-claim]").count(), { timeout: 60_000 }).toBe(0);
    expect((await host.api("GET", `/svc/vms/${desktop}`)).status).toBe(400);
    page.once("dialog", (dialog) => void dialog.accept());
    await page.click(`${pool} button:has-text("Delete")`);
    await expect.poll(() => page.locator(pool).count(), { timeout: 60_000 }).toBe(0);
    expect((await host.api("GET", "/svc/pools")).body).toEqual([]);
    expect(problems).toEqual([]);
  }, 180_000);
});

/**
 * The host service's page in a real browser (Debian's Chromium) against real QEMU: sign in with the
 * token, create a VM with the form, run it, see its screen (noVNC through `WS /vnc/{name}`) in the
 * canvas, stop it. The page's screenshot goes to .tmp/host/.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/host");
const TOKEN = "page-test-token-0123456789abcdef";

let host: TestHost;
let registry: TestRegistry;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  [host, browser, registry] = await Promise.all([
    startTestHost({ token: TOKEN }),
    launchBrowser(),
    startRegistry(),
  ]);
  page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  collectProblems(page, problems);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await host?.cleanup();
  await registry?.stop();
});

const row = (name: string) => page.locator(`#vms tr[data-name="${name}"]`);

describe("the host page", () => {
  it("asks for the token and shows nothing else until it is given", async () => {
    await page.goto(host.url);
    await page.locator("#login").waitFor();
    expect(await page.isVisible("#app")).toBe(false);
    await page.fill("input[name=token]", TOKEN);
    await page.click("#login button[type=submit]");
    await page.locator("#app").waitFor();
    await expect.poll(() => page.textContent("#status")).toMatch(/version \d+\.\d+\.\d+ · 0 running/);
    // The only complaints were the browser's about the first requests, refused without the token.
    expect(problems.filter((problem) => !/status of 401/.test(problem))).toEqual([]);
    problems.length = 0;
  });

  it("creates, runs and stops a VM, and shows its screen", async () => {
    await page.fill("#create input[name=name]", "page-vm");
    await page.fill("#create input[name=cpu]", String(LINUX_VM.cpu));
    await page.fill("#create input[name=memory]", LINUX_VM.memory);
    await page.fill("#create input[name=diskSize]", LINUX_VM.diskSize);
    await page.click("#create button[type=submit]");
    await row("page-vm").waitFor();
    expect(await row("page-vm").getAttribute("data-status")).toBe("stopped");
    expect(await row("page-vm").textContent()).toMatch(/page-vm\s*qemu\s*linux\s*stopped\s*1\s*0\.3 GB/);

    await row("page-vm").getByRole("button", { name: "Run" }).click();
    await page.locator('#vms tr[data-name="page-vm"][data-status="running"]').waitFor({ timeout: 30_000 });
    await row("page-vm").getByRole("button", { name: "Screen" }).click();
    // The VM's firmware draws on its screen: the canvas has pixels that are not black.
    await page.waitForFunction(
      () => {
        const canvas = document.querySelector("#screen canvas") as HTMLCanvasElement | null;
        if (!canvas || canvas.width < 100) return false;
        const data = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height).data;
        for (let i = 0; i < data.length; i += 4) if (data[i] + data[i + 1] + data[i + 2] > 150) return true;
        return false;
      },
      undefined,
      { timeout: 30_000, polling: 250 },
    );
    await page.screenshot({ path: join(SHOTS, "host.png"), fullPage: true });

    await row("page-vm").getByRole("button", { name: "Stop" }).click();
    await page.locator('#vms tr[data-name="page-vm"][data-status="stopped"]').waitFor({ timeout: 30_000 });
    expect(await page.isVisible("#screen-section")).toBe(false);
    expect(problems).toEqual([]);
  });

  it("pushes a VM to a registry and pulls it back as a new VM", async () => {
    await page.fill("#push input[name=name]", "page-vm");
    await page.fill("#push input[name=imageName]", "page-image");
    await page.fill("#push input[name=tags]", "v1");
    await page.fill("#push input[name=registry]", registry.host);
    await page.fill("#push input[name=organization]", "hangar");
    await page.click("#push button[type=submit]");
    await expect.poll(() => row("page-vm").textContent(), { timeout: 60_000 }).toMatch(/push pushed/);

    await page.fill("#pull input[name=image]", "page-image:v1");
    await page.fill("#pull input[name=name]", "pulled-vm");
    await page.fill("#pull input[name=registry]", registry.host);
    await page.fill("#pull input[name=organization]", "hangar");
    await page.click("#pull button[type=submit]");
    await page.locator('#vms tr[data-name="pulled-vm"][data-status="stopped"]').waitFor({ timeout: 60_000 });
    // The image cache (empty: this host does not cache pulls) is listed and pruned from the page.
    await page.fill("#images-org", "hangar");
    await expect.poll(() => page.textContent("#images")).toBe("(empty)");
    await page.click("#prune");
    await expect.poll(() => page.textContent("#message")).toBe("Prune the image cache: done");
    expect(problems).toEqual([]);
  });

  it("rides out a moment the service cannot be reached: after an action, and when it loads", async () => {
    // The VM list's requests fail, as Chromium's do when the machine's network changes.
    let cut = true;
    let failed = 0;
    await page.route("**/svc/vms", (route) => {
      if (!cut || route.request().method() !== "GET") return route.continue();
      failed++;
      return route.abort("internetdisconnected");
    });
    await page.click("#prune");
    await expect.poll(() => page.textContent("#message")).toBe("Prune the image cache: done");
    // The action's own refresh fails after its message (the next failure), and a later one works.
    const before = failed;
    await expect.poll(() => failed).toBeGreaterThan(before);
    cut = false;
    await expect.poll(() => page.textContent("#status")).toMatch(/version \d+\.\d+\.\d+ · \d+ running/);

    // Loaded while the service cannot be reached: it says so and tries again.
    cut = true;
    await page.reload();
    await expect
      .poll(() => page.textContent("#status"))
      .toMatch(/Cannot reach the host service .*trying again/);
    cut = false;
    await expect.poll(() => page.textContent("#status")).toMatch(/version \d+\.\d+\.\d+ · \d+ running/);
    expect(await page.isVisible("#app")).toBe(true);
    await page.unroute("**/svc/vms");
    expect(problems.filter((problem) => !problem.includes("net::ERR_INTERNET_DISCONNECTED"))).toEqual([]);
  });
});

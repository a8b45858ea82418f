/**
 * Hibernate and resume from the host page in a real browser (Debian's Chromium), against real
 * QEMU: a running VM's row has Hibernate, a hibernated one says so and has Resume.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../support/browser.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

const TOKEN = "sleep-page-token-0123456789abcdef";
let host: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  [host, browser] = await Promise.all([startTestHost({ token: TOKEN }), launchBrowser()]);
  page = await browser.newPage();
  page.on("pageerror", (err) => problems.push(err.message));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await host?.cleanup();
});

const row = (name: string) => page.locator(`#vms tr[data-name="${name}"]`);
const inState = (name: string, status: string) =>
  page.locator(`#vms tr[data-name="${name}"][data-status="${status}"]`).waitFor({ timeout: 60_000 });

describe("the host page", () => {
  it("hibernates a running VM and resumes it", async () => {
    await page.goto(host.url);
    await page.fill("input[name=token]", TOKEN);
    await page.click("#login button[type=submit]");
    await page.locator("#app").waitFor();
    await page.fill("#create input[name=name]", "nap-vm");
    await page.fill("#create input[name=cpu]", String(LINUX_VM.cpu));
    await page.fill("#create input[name=memory]", LINUX_VM.memory);
    await page.fill("#create input[name=diskSize]", LINUX_VM.diskSize);
    await page.click("#create button[type=submit]");
    await row("nap-vm").getByRole("button", { name: "Run" }).click();
    await inState("nap-vm", "running");

    await row("nap-vm").getByRole("button", { name: "Hibernate" }).click();
    await inState("nap-vm", "hibernated");
    expect(await row("nap-vm").textContent()).toMatch(/hibernated \(memory\)/);
    expect(await row("nap-vm").getByRole("button", { name: "Run" }).count()).toBe(0);

    await row("nap-vm").getByRole("button", { name: "Resume" }).click();
    await inState("nap-vm", "running");
    await row("nap-vm").getByRole("button", { name: "Stop" }).click();
    await inState("nap-vm", "stopped");
    expect(problems).toEqual([]);
    // A VM run, hibernated, resumed and stopped through the page: on a loaded machine, over 30 s.
  }, 120_000);
});

/**
 * The host page's snapshots in a real browser (Debian's Chromium) against real QEMU and the tiny
 * guest: a snapshot taken with the VM's button appears in the table; Restore puts the VM back (its
 * counter is the snapshot's); Fork makes VMs that answer; Delete of a snapshot forks use says which.
 * The page's screenshot goes to .tmp/host/snapshots.png.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { startTestHost, type TestHost } from "./support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "./tiny-guest.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/host");
let host: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];
/** What the next dialog (prompt or confirm) is answered with. */
let answer = "";

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  const guestDir = tinyGuest();
  [host, browser] = await Promise.all([startTestHost(), launchBrowser()]);
  expect((await host.api("POST", "/svc/vms", { name: "tiny", ...TINY_VM })).status).toBe(200);
  bootTinyGuest(join(host.home, "tiny"), guestDir);
  expect((await host.api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  expect((await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=170")).status).toBe(200);
  page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  collectProblems(page, problems);
  page.on("dialog", (dialog) => void dialog.accept(answer));
}, 200_000);
afterAll(async () => {
  await browser?.close();
  await host?.cleanup();
});

const vmRow = (name: string) => page.locator(`#vms tr[data-name="${name}"]`);
const snapRow = (id: string) => page.locator(`#snapshots tr[data-snapshot="${id}"]`);
const message = () => page.textContent("#message");
const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;

describe("the host page's snapshots", () => {
  it("takes, restores, forks and refuses to delete a snapshot in use", async () => {
    const url = (await record("tiny")).computerServerUrl;
    await guest(url, "/inc");
    await page.goto(host.url);
    await page.locator("#app").waitFor();
    expect(await page.textContent("#snapshots")).toMatch(/none/);

    answer = "clean";
    await vmRow("tiny").getByRole("button", { name: "Snapshot" }).click();
    await snapRow("tiny/clean").waitFor({ timeout: 60_000 });
    expect(await snapRow("tiny/clean").textContent()).toMatch(/tiny\s*clean\s*whole state\s*\d+ MB/);
    await guest(url, "/inc");
    await guest(url, "/inc");

    const before = (await record("tiny")).bootId;
    answer = "";
    await snapRow("tiny/clean").getByRole("button", { name: "Restore" }).click();
    await expect.poll(message, { timeout: 60_000 }).toBe("Restore tiny to clean: done");
    const restored = await record("tiny");
    expect(restored.bootId).not.toBe(before);
    const after = await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=60");
    expect((await guest(after.body.computerServerUrl, "/status")).counter).toBe(1);

    answer = "2";
    await snapRow("tiny/clean").getByRole("button", { name: "Fork" }).click();
    await expect.poll(message, { timeout: 90_000 }).toBe("Fork 2 from clean: done");
    for (const name of ["tiny-clean-1", "tiny-clean-2"]) {
      await vmRow(name).waitFor();
      const ready = await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=90`);
      expect((await guest(ready.body.computerServerUrl, "/status")).counter).toBe(1);
    }

    await snapRow("tiny/clean").getByRole("button", { name: "Delete" }).click();
    await expect
      .poll(message, { timeout: 30_000 })
      .toMatch(
        /^Delete snapshot clean: Snapshot tiny\/clean is in use: the disks of .*tiny-clean-1, tiny-clean-2/,
      );
    await page.screenshot({ path: join(SHOTS, "snapshots.png"), fullPage: true });
    expect(problems.filter((problem) => !/status of 400/.test(problem))).toEqual([]);
  }, 300_000);
});

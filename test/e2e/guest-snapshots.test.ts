/**
 * End to end, on the project's guest image (a real desktop, 2 GB of RAM, TCG where there is no
 * KVM): one cold boot, an app opened, a snapshot; then restores and forks from it, each answering
 * a screenshot with that app's window still the active one, the forks with the host's clock; a fork
 * hibernated (QEMU ends) and resumed, the app still there.
 * Prints its timings.
 *
 * Slow (minutes): only `npm run test:e2e` runs it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { copySparse } from "../../src/host/qemu/sparse-copy.js";
import { type RunningHostService, startHostService } from "../../src/host/server.js";
import { killQemusUnder } from "../host/support.js";
import { postCmd } from "../support/server.js";
import { GUEST_DESKTOP } from "./guest-image.js";
import { hostApi, timedInto } from "./host-api.js";

const VM = "snap-guest";
/** How old the snapshot is when forked: a fork keeping its clock would be this far behind. */
const CLOCK_GAP_MS = 10_000;
const timings: Record<string, number> = {};
let dir: string;
let host: RunningHostService;

const svc = (method: string, path: string, body?: unknown) => hostApi(host.url, method, path, body);

const timed = <T>(name: string, work: () => Promise<T>) => timedInto(timings, name, work);

/** A screenshot (PNG bytes) and the active window's title, from a desktop's computer server. */
async function look(url: string) {
  const shot = await postCmd(url, { command: "screenshot", params: { format: "png" } });
  expect(shot.event?.success, JSON.stringify(shot.event).slice(0, 300)).toBe(true);
  const title = await postCmd(url, { command: "get_active_window_title", params: {} });
  return {
    bytes: Buffer.from(shot.event.content.image_data, "base64").length,
    title: title.event?.title as string,
  };
}

beforeAll(async () => {
  const built = inject("guestImage");
  dir = await mkdtemp(join(tmpdir(), "hangar-e2e-snap-"));
  host = await startHostService({
    port: 0,
    configHome: join(dir, "config"),
    userHome: dir,
    defaultHomeDirectory: join(dir, "vms"),
  });
  const created = await svc("POST", "/svc/vms", {
    name: VM,
    ...GUEST_DESKTOP,
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  await copySparse(built.path, join(dir, "vms", VM, "disk.img"));
}, 20 * 60_000);

afterAll(async () => {
  await host?.close();
  if (dir) {
    await killQemusUnder(dir);
    await rm(dir, { recursive: true, force: true });
  }
  console.log(
    `guest snapshot e2e timings (ms): ${Object.entries(timings)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
}, 120_000);

describe("snapshots of the guest desktop", () => {
  it(
    "a restore and a fork come back with the app that was open",
    async () => {
      expect((await svc("POST", `/svc/vms/${VM}/run`, {})).status).toBe(202);
      const ready = await timed("cold boot: run → ready", () =>
        svc("GET", `/svc/vms/${VM}?wait=ready&timeout=900`),
      );
      expect(ready.status, JSON.stringify(ready.body)).toBe(200);
      const url = ready.body.computerServerUrl;
      // The image's kernel gives huge pages only where asked (its server's memory; build-guest-image.sh).
      const thp = await postCmd(url, {
        command: "run_command",
        params: { command: "cat /sys/kernel/mm/transparent_hugepage/enabled" },
      });
      expect(thp.event?.stdout).toContain("[madvise]");
      // No daily maintenance jobs (build-guest-image.sh): none may fire when a restore sets the clock forward.
      const maintenance = ["apt-daily", "apt-daily-upgrade", "fstrim", "e2scrub_all", "dpkg-db-backup"];
      const timers = await postCmd(url, {
        command: "run_command",
        params: { command: `systemctl is-enabled ${maintenance.map((unit) => `${unit}.timer`).join(" ")}` },
      });
      expect(String(timers.event?.stdout).trim().split("\n")).toEqual(maintenance.map(() => "masked"));

      const launched = await postCmd(url, { command: "launch", params: { app: "mousepad" } });
      expect(launched.event?.success).toBe(true);
      await expect
        .poll(async () => (await look(url)).title, { timeout: 120_000, interval: 1000 })
        .toMatch(/Mousepad/);

      const snap = await timed("snapshot (2 GB RAM)", () =>
        svc("POST", `/svc/vms/${VM}/snapshots`, { name: "app" }),
      );
      expect(snap.status, JSON.stringify(snap.body)).toBe(200);
      expect(snap.body.memory).toBe(true);
      // Something else on the screen before each restore: the restore must take it away.
      await postCmd(url, { command: "launch", params: { app: "xterm" } });

      for (let i = 1; i <= 3; i++) {
        const started = Date.now();
        const restored = await svc("POST", `/svc/vms/${VM}/restore?wait=ready&timeout=300`, {
          snapshot: "app",
        });
        expect(restored.status, JSON.stringify(restored.body)).toBe(200);
        const seen = await look(restored.body.computerServerUrl);
        timings[`restore ${i} → screenshot`] = Date.now() - started;
        expect(seen.title).toMatch(/Mousepad/);
        expect(seen.bytes).toBeGreaterThan(1000);
      }

      // The forks' clocks can only be told from the snapshot's when it is old enough: on a quiet
      // machine the restores take seconds, so time is let pass (not an event to wait for).
      const age = Date.now() - Date.parse(snap.body.createdAt);
      if (age < CLOCK_GAP_MS) await sleep(CLOCK_GAP_MS - age);
      const started = Date.now();
      const forked = await svc("POST", `/svc/vms/${VM}/fork?wait=ready&timeout=600`, {
        snapshot: "app",
        names: ["snap-fork-1", "snap-fork-2"],
      });
      expect(forked.status, JSON.stringify(forked.body)).toBe(200);
      for (const fork of forked.body.forks) {
        const seen = await look(fork.computerServerUrl);
        expect(seen.title).toMatch(/Mousepad/);
      }
      timings["fork of 2 → both screenshots"] = Date.now() - started;
      // Each fork answers as itself: its /status carries the launch id of its record (the guest's
      // agent writes it within half a second of the resume), and the two differ.
      const ids = forked.body.forks.map((fork: { bootId: string }) => fork.bootId);
      expect(new Set(ids).size).toBe(2);
      for (const fork of forked.body.forks) {
        await expect
          .poll(async () => (await (await fetch(`${fork.computerServerUrl}/status`)).json()).boot_id, {
            timeout: 10_000,
            interval: 200,
          })
          .toBe(fork.bootId);
      }
      // Long after the snapshot, the forks' clocks are the host's (hangar-snapshot-clock in the guest).
      expect(Date.now() - Date.parse(snap.body.createdAt)).toBeGreaterThan(CLOCK_GAP_MS);
      for (const fork of forked.body.forks) {
        await expect
          .poll(
            async () => {
              const reply = await postCmd(fork.computerServerUrl, {
                command: "run_command",
                params: { command: "date +%s" },
              });
              return Math.abs(Number(reply.event?.stdout) - Date.now() / 1000);
            },
            { timeout: 30_000, interval: 1000 },
          )
          .toBeLessThan(5);
      }

      // Hibernated with the app open, QEMU ends; resumed, the app is still the active window.
      const slept = await timed("hibernate a fork (2 GB RAM)", () =>
        svc("POST", "/svc/vms/snap-fork-1/hibernate", {}),
      );
      expect(slept.status, JSON.stringify(slept.body)).toBe(200);
      expect(slept.body).toMatchObject({ status: "hibernated", hibernation: "memory" });
      const woken = Date.now();
      const resumed = await svc("POST", "/svc/vms/snap-fork-1/resume?wait=ready&timeout=300", {});
      expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
      const after = await look(resumed.body.computerServerUrl);
      timings["resume → screenshot"] = Date.now() - woken;
      expect(after.title).toMatch(/Mousepad/);
    },
    30 * 60_000,
  );
});

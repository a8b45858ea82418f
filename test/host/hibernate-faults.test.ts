/**
 * `kill -9` of the host service in the middle of a hibernate and of a resume (at the moments the
 * files show), then a restart: the VM is either hibernated (no QEMU, its saved state complete) or
 * running (one QEMU, running), never both and never neither, with no intent or build left; and
 * it can be resumed or hibernated again with its RAM intact. A full disk while hibernating is a
 * clear 400 and the VM keeps running.
 */
import { type ChildProcess, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QmpClient } from "../../src/host/qemu/qmp.js";
import { boundedRequest, killProcess, killQemusUnder, spawnServiceProcess } from "./support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "./tiny-guest.js";

const root = mkdtempSync(join(tmpdir(), "hangar-sleepfault-"));
const home = join(root, "home");
const vmDir = join(home, "tiny");
let service: ChildProcess | undefined;
let url = "";

async function startService() {
  const started = await spawnServiceProcess(root);
  service = started.child;
  url = started.url;
}

const api = (method: string, path: string, body?: unknown, ms = 120_000) =>
  boundedRequest(url, method, path, body, ms);

/** Resolves when `check` holds (looked at every 2 ms: the moments last a fraction of a second). */
async function when(check: () => boolean, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("the moment never came");
    await new Promise((r) => setTimeout(r, 2));
  }
}

const intent = () => {
  try {
    return JSON.parse(readFileSync(join(vmDir, ".hangar-hibernate.json"), "utf8")) as { op: string };
  } catch {
    return undefined;
  }
};
const session = () => {
  try {
    return JSON.parse(readFileSync(join(vmDir, "session.json"), "utf8"));
  } catch {
    return undefined;
  }
};

async function qemus(): Promise<number> {
  let count = 0;
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    if (cmdline.includes("process=hangar-vm") && cmdline.includes(root) && !/\) Z /.test(stat)) count++;
  }
  return count;
}

/** After a restart: hibernated or running, exactly; nothing half-done left. */
async function oneSideOnly(): Promise<"hibernated" | "running"> {
  const status = (await api("GET", "/svc/vms/tiny")).body.status as string;
  expect(["hibernated", "running"]).toContain(status);
  expect(intent(), "the intent is settled").toBeUndefined();
  expect(readdirSync(vmDir).filter((e) => e.startsWith(".hangar-tmp-"))).toEqual([]);
  if (status === "hibernated") {
    expect(await qemus()).toBe(0);
    expect(existsSync(join(vmDir, "hibernation", "hibernation.json"))).toBe(true);
    expect(existsSync(join(vmDir, "hibernation", "state.bin"))).toBe(true);
  } else {
    expect(await qemus()).toBe(1);
    const qmp = await QmpClient.connect(session().qmpSocket);
    const state = await qmp.execute<{ status: string }>("query-status");
    qmp.close();
    expect(state.status, "runs (not paused, not waiting for its state)").toBe("running");
    expect(existsSync(join(vmDir, "hibernation", "hibernation.json"))).toBe(false);
  }
  return status as "hibernated" | "running";
}

let counter = 0;

beforeAll(async () => {
  const guestDir = tinyGuest();
  await startService();
  expect((await api("POST", "/svc/vms", { name: "tiny", ...TINY_VM })).status).toBe(200);
  bootTinyGuest(vmDir, guestDir);
  expect((await api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  const ready = await api("GET", "/svc/vms/tiny?wait=ready&timeout=170", undefined, 180_000);
  expect(ready.status).toBe(200);
  counter = (await guest(ready.body.computerServerUrl, "/inc")).counter;
}, 200_000);

afterAll(async () => {
  await killProcess(service);
  await killQemusUnder(root);
  execFileSync("sh", ["-c", `umount -l ${join(root, "small")} 2>/dev/null || true`]);
  rmSync(root, { recursive: true, force: true });
});

describe("kill -9 of the host service", () => {
  const cases: [string, "running" | "hibernated", string, () => boolean][] = [
    ["while the state and RAM are being written", "running", "hibernate", () => intent()?.op === "hibernate"],
    [
      "after the saved state is in place, before QEMU ends",
      "running",
      "hibernate",
      () => intent()?.op === "hibernate" && existsSync(join(vmDir, "hibernation", "hibernation.json")),
    ],
    [
      "while the resumed QEMU waits for its state",
      "hibernated",
      "resume",
      () => intent()?.op === "resume" && session() !== undefined,
    ],
    ["while the resume's intent is written", "hibernated", "resume", () => intent()?.op === "resume"],
    // Resumed above, its RAM is no longer a shared file: the hibernate gives it one (ram-file.ts).
    [
      "while a resumed VM's RAM file is written from the stream",
      "running",
      "hibernate",
      () =>
        intent()?.op === "hibernate" &&
        existsSync(join(vmDir, "hibernation", "hibernation.json")) &&
        readdirSync(vmDir).some(
          (e) => e.startsWith(".hangar-tmp-") && existsSync(join(vmDir, e, "memory.ram")),
        ),
    ],
  ];

  for (const [label, from, operation, moment] of cases) {
    it(`${operation} ${label}: the restart finds it hibernated or running, never both or neither`, async () => {
      const status = (await api("GET", "/svc/vms/tiny")).body.status;
      if (status !== from) {
        const put = await api("POST", `/svc/vms/tiny/${from === "running" ? "resume" : "hibernate"}`, {});
        expect(put.status, JSON.stringify(put.body)).toBe(200);
      }
      const pending = api("POST", `/svc/vms/tiny/${operation}`, {}).catch(() => undefined);
      await when(moment);
      await killProcess(service);
      await pending;
      await startService();
      const side = await oneSideOnly();
      // Either way the RAM is the guest's: wake it (if asleep) and read the counter.
      if (side === "hibernated") {
        const resumed = await api("POST", "/svc/vms/tiny/resume?wait=ready&timeout=60", {});
        expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
      }
      const ready = await api("GET", "/svc/vms/tiny?wait=ready&timeout=60");
      expect((await guest(ready.body.computerServerUrl, "/status")).counter).toBe(counter);
    }, 180_000);
  }
});

describe("a full disk", () => {
  it("is a clear 400 when hibernating, and the VM keeps running", async () => {
    const small = join(root, "small");
    mkdirSync(small);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", small]);
    expect((await api("POST", "/svc/config/locations", { name: "small", path: small })).status).toBe(200);
    const created = await api("POST", "/svc/vms", { name: "full", ...TINY_VM, storage: "small" });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const full = join(small, "full");
    bootTinyGuest(full, tinyGuest());
    expect((await api("POST", "/svc/vms/full/run", {})).status).toBe(202);
    const ready = await api("GET", "/svc/vms/full?wait=ready&timeout=170", undefined, 180_000);
    expect(ready.status).toBe(200);
    await guest(ready.body.computerServerUrl, "/inc");
    const res = await api("POST", "/svc/vms/full/hibernate", {});
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(
      /^(Not enough disk space for hibernating full \(the VM keeps running\): about .* is needed, .* is free|Cannot hibernate full: no space left on the disk\. The VM keeps running\.)$/,
    );
    expect(existsSync(join(full, "hibernation"))).toBe(false);
    expect(existsSync(join(full, ".hangar-hibernate.json"))).toBe(false);
    expect(readdirSync(full).filter((e) => e.startsWith(".hangar-tmp-"))).toEqual([]);
    expect((await guest(ready.body.computerServerUrl, "/inc")).counter).toBe(2);
    expect((await api("GET", "/svc/vms/full")).body.status).toBe("running");
    expect((await api("DELETE", "/svc/vms/full")).status).toBe(200);
  }, 200_000);
});

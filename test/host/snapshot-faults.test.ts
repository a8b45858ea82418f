/**
 * `kill -9` of the host service in the middle of a snapshot, a restore and a fork (at the moments
 * the files show: the VM paused, the state half written, a QEMU waiting for its state), then a
 * restart: no half snapshot is listed, no temporary directory is left, every QEMU under the test's
 * root belongs to a VM that reads as running and runs (none waits for a state), and the VM can be
 * restored again. A full disk while snapshotting is a clear 400 and the VM keeps running.
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

const root = mkdtempSync(join(tmpdir(), "hangar-snapfault-"));
const home = join(root, "home");
let service: ChildProcess | undefined;
let url = "";

async function startService() {
  const started = await spawnServiceProcess(root);
  service = started.child;
  url = started.url;
}

async function killService() {
  await killProcess(service);
}

const api = (method: string, path: string, body?: unknown, ms = 120_000) =>
  boundedRequest(url, method, path, body, ms);

/** Resolves when `check` holds (looked at every 2 ms: the moments to catch last a fraction of a second). */
async function when(check: () => boolean, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("the moment never came");
    await new Promise((r) => setTimeout(r, 2));
  }
}

const session = (vm: string) => {
  try {
    return JSON.parse(readFileSync(join(home, vm, "session.json"), "utf8"));
  } catch {
    return undefined;
  }
};

/** QEMU processes under the test's root, by the VM directory in their command line. */
async function qemus(): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.includes("process=hangar-vm") || !cmdline.includes(root)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    if (/\) Z /.test(stat)) continue;
    found.push(/-name\0([^,\0]+)/.exec(cmdline)?.[1] ?? "?");
  }
  return found.sort();
}

/** After a restart: the invariants the issue asks for. */
async function checkInvariants() {
  const snapshots = readdirSync(join(home, "tiny", "snapshots"));
  expect(
    snapshots.filter((e) => e.startsWith(".")),
    "temporary snapshot directories",
  ).toEqual([]);
  const listed = (await api("GET", "/svc/vms/tiny/snapshots")).body as { name: string; memory: boolean }[];
  for (const snap of listed) {
    const dir = join(home, "tiny", "snapshots", snap.name);
    for (const file of [
      "snapshot.json",
      "disk.img",
      "nvram.bin",
      ...(snap.memory ? ["state.bin", "memory.ram"] : []),
    ]) {
      expect(existsSync(join(dir, file)), `${snap.name}/${file}`).toBe(true);
    }
  }
  const vms = (await api("GET", "/svc/vms")).body as { name: string; status: string }[];
  const running = vms
    .filter((v) => v.status === "running")
    .map((v) => v.name)
    .sort();
  expect(await qemus()).toEqual(running);
  for (const name of running) {
    const qmp = await QmpClient.connect(session(name).qmpSocket);
    const status = await qmp.execute<{ status: string }>("query-status");
    qmp.close();
    expect(status.status, `${name} runs (not paused, not waiting for a state)`).toBe("running");
  }
  for (const entry of readdirSync(home)) {
    expect(entry.startsWith(".hangar-tmp-"), `temporary VM directory ${entry}`).toBe(false);
    expect(existsSync(join(home, entry, ".hangar-restore.json")), `restore journal of ${entry}`).toBe(false);
    // Nor a temporary name inside a VM (the disk a restore replaced, kept until the VM ran).
    const inside = existsSync(join(home, entry, "config.json")) ? readdirSync(join(home, entry)) : [];
    expect(
      inside.filter((name) => name.startsWith(".hangar-tmp-")),
      `temporary files of ${entry}`,
    ).toEqual([]);
  }
}

beforeAll(async () => {
  const guestDir = tinyGuest();
  await startService();
  expect((await api("POST", "/svc/vms", { name: "tiny", ...TINY_VM })).status).toBe(200);
  bootTinyGuest(join(home, "tiny"), guestDir);
  expect((await api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  expect((await api("GET", "/svc/vms/tiny?wait=ready&timeout=170", undefined, 180_000)).status).toBe(200);
  const base = await api("POST", "/svc/vms/tiny/snapshots", { name: "base" });
  expect(base.status, JSON.stringify(base.body)).toBe(200);
}, 200_000);

afterAll(async () => {
  await killService();
  await killQemusUnder(root);
  // Lazily: a QEMU just sent SIGKILL may still hold its files there for a moment (EBUSY once).
  execFileSync("sh", ["-c", `umount -l ${join(root, "small")} 2>/dev/null || true`]);
  rmSync(root, { recursive: true, force: true });
});

describe("kill -9 of the host service", () => {
  const snapDir = join(home, "tiny", "snapshots");
  const cases: [string, () => Promise<unknown>, () => boolean][] = [
    [
      "while a snapshot has the VM paused",
      () => api("POST", "/svc/vms/tiny/snapshots", { name: "k1" }),
      () => existsSync(join(home, "tiny", ".hangar-snapshotting")),
    ],
    [
      "while a snapshot's RAM is being copied",
      () => api("POST", "/svc/vms/tiny/snapshots", { name: "k2" }),
      () => readdirSync(snapDir).some((e) => e.startsWith(".") && existsSync(join(snapDir, e, "state.bin"))),
    ],
    [
      "while a restore replaces the disk",
      () => api("POST", "/svc/vms/tiny/restore", { snapshot: "base" }),
      () => existsSync(join(home, "tiny", ".hangar-restore.json")),
    ],
    [
      "while a restore keeps the disk it replaced",
      () => api("POST", "/svc/vms/tiny/restore", { snapshot: "base" }),
      () => readdirSync(join(home, "tiny")).some((name) => name.includes("replaced-disk")),
    ],
    [
      "while a restored QEMU waits for its state",
      () => api("POST", "/svc/vms/tiny/restore", { snapshot: "base" }),
      () =>
        existsSync(join(home, "tiny", ".hangar-restore.json")) && session("tiny")?.restoredFrom !== undefined,
    ],
    [
      "while forks are being made",
      () => api("POST", "/svc/vms/tiny/fork", { snapshot: "base", names: ["k3", "k4"] }),
      () => existsSync(join(home, "k3")),
    ],
    [
      "while forks' QEMUs wait for their state",
      () => api("POST", "/svc/vms/tiny/fork", { snapshot: "base", names: ["k5", "k6"] }),
      () => session("k5")?.restoredFrom !== undefined && existsSync(join(home, "k5", ".hangar-restore.json")),
    ],
  ];

  for (const [label, operation, moment] of cases) {
    it(`${label}: the restart leaves no half state and no stray QEMU`, async () => {
      const pending = operation().catch(() => undefined);
      await when(moment);
      await killService();
      await pending;
      await startService();
      await checkInvariants();
      // The VM can be reset again.
      const restored = await api("POST", "/svc/vms/tiny/restore?wait=ready&timeout=60", { snapshot: "base" });
      expect(restored.status, JSON.stringify(restored.body)).toBe(200);
      expect((await guest(restored.body.computerServerUrl, "/status")).status).toBe("ok");
    }, 180_000);
  }
});

describe("a full disk", () => {
  it("is a clear 400 when snapshotting, and the VM keeps running", async () => {
    const small = join(root, "small");
    mkdirSync(small);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=40m", "tmpfs", small]);
    expect((await api("POST", "/svc/config/locations", { name: "small", path: small })).status).toBe(200);
    const created = await api("POST", "/svc/vms", { name: "full", ...TINY_VM, storage: "small" });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const full = join(small, "full");
    bootTinyGuest(full, tinyGuest());
    expect((await api("POST", "/svc/vms/full/run", {})).status).toBe(202);
    const ready = await api("GET", "/svc/vms/full?wait=ready&timeout=170", undefined, 180_000);
    expect(ready.status).toBe(200);
    const res = await api("POST", "/svc/vms/full/snapshots", { name: "big" });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(
      /^Not enough disk space for snapshot big of full: about .* is needed, .* is free/,
    );
    expect(readdirSync(join(full, "snapshots")).length).toBe(0);
    const after = await guest(ready.body.computerServerUrl, "/inc");
    expect(after.status).toBe("ok");
    expect((await api("GET", "/svc/vms/full")).body.status).toBe("running");
    expect((await api("DELETE", "/svc/vms/full")).status).toBe(200);
  }, 200_000);
});

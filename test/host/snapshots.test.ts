/**
 * Snapshots, restore and fork of QEMU VMs, proven on the tiny guest (tiny-guest.ts): a real kernel
 * under real QEMU whose counter lives in RAM and whose disk is a raw block device. After a restore
 * the counter, the disk and the clock are the snapshot's (the clock: the host's); forks count and
 * write independently and answer with their own boot ids.
 */
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/main.js";
import { startTestHost, type TestHost } from "./support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "./tiny-guest.js";

let host: TestHost;
let guestDir: string;

beforeAll(async () => {
  guestDir = tinyGuest();
  host = await startTestHost();
  expect((await host.api("POST", "/svc/vms", { name: "tiny", ...TINY_VM })).status).toBe(200);
  bootTinyGuest(join(host.home, "tiny"), guestDir);
  expect((await host.api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  const ready = await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=170");
  expect(ready.status, ready.text).toBe(200);
}, 180_000);
afterAll(async () => {
  await host?.cleanup();
});

const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;
const urlOf = async (name: string) => (await record(name)).computerServerUrl as string;
const qemuCount = async () => {
  let count = 0;
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await import("node:fs/promises")
      .then((fs) => fs.readFile(`/proc/${pid}/cmdline`, "utf8"))
      .catch(() => "");
    if (cmdline.includes(host.root) && cmdline.includes("process=hangar-vm")) count++;
  }
  return count;
};
/** The word at the start of a raw disk file. */
const diskWord = (path: string) => readFileSync(path).subarray(0, 64).toString("latin1").replace(/\0+$/, "");

describe("snapshot and restore", () => {
  it("restore brings back the counter, the disk and the host's clock; the VM answers as a new boot", async () => {
    const url = await urlOf("tiny");
    for (let i = 0; i < 3; i++) await guest(url, "/inc");
    await guest(url, "/disk/snapdisk");
    // A clock far in the past: after the restore the guest must show the host's time, not this.
    await guest(url, "/settime/978307200");

    const taken = await host.api("POST", "/svc/vms/tiny/snapshots", { name: "s1" });
    expect(taken.status, taken.text).toBe(200);
    expect(taken.body).toMatchObject({ name: "s1", vm: "tiny", memory: true });
    expect(taken.body.bytes).toBeGreaterThan(0);
    expect(Date.parse(taken.body.createdAt)).toBeGreaterThan(Date.now() - 120_000);

    // The VM ran on after the snapshot: its RAM and disk move on.
    expect((await guest(url, "/inc")).counter).toBe(4);
    await guest(url, "/disk/after");
    expect(await guest(url, "/disk")).toBe("after");
    const before = await record("tiny");
    const oldDisk = statSync(join(host.home, "tiny", "disk.img")).ino;

    const restored = await host.api("POST", "/svc/vms/tiny/restore?wait=ready&timeout=60", {
      snapshot: "s1",
    });
    expect(restored.status, restored.text).toBe(200);
    // The disk the VM had is freed once the restored VM runs: no name of it is left.
    expect(statSync(join(host.home, "tiny", "disk.img")).ino).not.toBe(oldDisk);
    await expect
      .poll(async () => (await readdir(join(host.home, "tiny"))).filter((f) => f.includes("replaced-disk")))
      .toEqual([]);
    expect(restored.body).toMatchObject({
      status: "running",
      ready: true,
      restoredFrom: { vm: "tiny", snapshot: "s1" },
    });
    expect(restored.body.bootId).not.toBe(before.bootId);
    const now = await guest(restored.body.computerServerUrl, "/status");
    expect(now.counter).toBe(3);
    expect(await guest(restored.body.computerServerUrl, "/disk")).toBe("snapdisk");
    // The guest learns its new boot id from the host within 0.2 s of running, which may be after its
    // server first answered (CI run 33 read the snapshot's).
    await expect
      .poll(async () => (await guest(restored.body.computerServerUrl, "/status")).bootId)
      .toBe(restored.body.bootId);
    // The guest sets its clock from the host's when it sees a new boot id (every 0.2 s).
    await expect
      .poll(
        async () =>
          Math.abs((await guest(restored.body.computerServerUrl, "/status")).time - Date.now() / 1000),
        {
          timeout: 10_000,
        },
      )
      .toBeLessThan(5);

    const list = await host.api("GET", "/svc/vms/tiny/snapshots");
    expect(list.body.map((s: { name: string }) => s.name)).toEqual(["s1"]);
    // The snapshot's own disk never changed.
    expect(diskWord(join(host.home, "tiny", "snapshots", "s1", "disk.img"))).toBe("snapdisk");
  });

  it("two restores of one VM at once run one after the other and leave one QEMU", async () => {
    const url = await urlOf("tiny");
    await guest(url, "/inc");
    const [a, b] = await Promise.all([
      host.api("POST", "/svc/vms/tiny/restore", { snapshot: "s1" }),
      host.api("POST", "/svc/vms/tiny/restore", { snapshot: "s1" }),
    ]);
    expect([a.status, b.status], a.text + b.text).toEqual([200, 200]);
    expect(a.body.bootId).not.toBe(b.body.bootId);
    expect(await qemuCount()).toBe(1);
    const ready = await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=60");
    expect((await guest(ready.body.computerServerUrl, "/status")).counter).toBe(3);
  });
});

describe("fork", () => {
  it("forks answer as themselves, count on their own and keep their disk writes to themselves", async () => {
    const res = await host.api("POST", "/svc/vms/tiny/fork?wait=ready&timeout=90", {
      snapshot: "s1",
      names: ["f1", "f2"],
    });
    expect(res.status, res.text).toBe(200);
    const [f1, f2] = res.body.forks;
    expect([f1.name, f2.name]).toEqual(["f1", "f2"]);
    expect(f1.ready && f2.ready).toBe(true);
    expect(f1.computerServerUrl).not.toBe(f2.computerServerUrl);
    const s1 = await guest(f1.computerServerUrl, "/status");
    const s2 = await guest(f2.computerServerUrl, "/status");
    expect([s1.counter, s2.counter]).toEqual([3, 3]);
    // Each learns its own boot id within 0.2 s of running (see the restore above).
    await expect
      .poll(async () => [
        (await guest(f1.computerServerUrl, "/status")).bootId,
        (await guest(f2.computerServerUrl, "/status")).bootId,
      ])
      .toEqual([f1.bootId, f2.bootId]);
    expect(f1.bootId).not.toBe(f2.bootId);

    await guest(f1.computerServerUrl, "/inc");
    await guest(f1.computerServerUrl, "/inc");
    await guest(f2.computerServerUrl, "/inc");
    expect((await guest(f1.computerServerUrl, "/status")).counter).toBe(5);
    expect((await guest(f2.computerServerUrl, "/status")).counter).toBe(4);

    await guest(f1.computerServerUrl, "/disk/forkone");
    expect(await guest(f1.computerServerUrl, "/disk")).toBe("forkone");
    expect(await guest(f2.computerServerUrl, "/disk")).toBe("snapdisk");
    expect(diskWord(join(host.home, "tiny", "snapshots", "s1", "disk.img"))).toBe("snapdisk");

    // A snapshot that disks are built on is not deleted; the answer names them.
    const refused = await host.api("DELETE", "/svc/vms/tiny/snapshots/s1");
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/^Snapshot tiny\/s1 is in use: the disks of .*f1, f2/);
    expect((await host.api("DELETE", "/svc/vms/tiny")).body.message).toMatch(
      /f1, f2 are built on its snapshots/,
    );

    for (const name of ["f1", "f2"]) expect((await host.api("DELETE", `/svc/vms/${name}`)).status).toBe(200);
  });

  it("count and prefix name the forks", async () => {
    const res = await host.api("POST", "/svc/vms/tiny/fork", { snapshot: "s1", count: 2, prefix: "run" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.forks.map((f: { name: string }) => f.name)).toEqual(["run-1", "run-2"]);
    for (const name of ["run-1", "run-2"])
      expect((await host.api("DELETE", `/svc/vms/${name}`)).status).toBe(200);
  });
});

describe("the accelerator", () => {
  it("is said in /svc/host/status, with the reason when guests get TCG", async () => {
    const status = (await host.api("GET", "/svc/host/status")).body;
    expect(["kvm", "tcg"]).toContain(status.accelerator);
    if (status.accelerator === "tcg") expect(status.reason).toMatch(/\S/);
    else expect(status.reason).toBeNull();
  });
});

describe("bad input", () => {
  it("answers a clear 400 and makes nothing", async () => {
    const vmsBefore = (await host.api("GET", "/svc/vms")).body.map((v: { name: string }) => v.name);
    const cases: [string, string, unknown, RegExp][] = [
      ["POST", "/svc/vms/nope/snapshots", { name: "x" }, /^Virtual machine not found: nope/],
      [
        "POST",
        "/svc/vms/tiny/snapshots",
        { name: "a/b" },
        /^Invalid snapshot name 'a\/b': it contains a path separator/,
      ],
      [
        "POST",
        "/svc/vms/tiny/snapshots",
        { name: ".." },
        /^Invalid snapshot name '\.\.': it contains '\.\.'/,
      ],
      ["POST", "/svc/vms/tiny/snapshots", {}, /^Invalid request body: name is required/],
      ["POST", "/svc/vms/tiny/snapshots", { name: "s1" }, /^Snapshot already exists: tiny\/s1/],
      ["POST", "/svc/vms/tiny/restore", { snapshot: "nope" }, /^Snapshot not found: tiny\/nope/],
      ["POST", "/svc/vms/tiny/restore", { snapshot: "../s1" }, /^Invalid snapshot name/],
      ["DELETE", "/svc/vms/tiny/snapshots/nope", undefined, /^Snapshot not found: tiny\/nope/],
      ["POST", "/svc/vms/tiny/fork", { snapshot: "nope", names: ["g1"] }, /^Snapshot not found: tiny\/nope/],
      [
        "POST",
        "/svc/vms/tiny/fork",
        { snapshot: "s1", names: ["tiny"] },
        /^Virtual machine already exists with name: tiny/,
      ],
      [
        "POST",
        "/svc/vms/tiny/fork",
        { snapshot: "s1", names: ["g1", "g1"] },
        /^The fork name g1 is given twice/,
      ],
      ["POST", "/svc/vms/tiny/fork", { snapshot: "s1", names: ["g1", "x/y"] }, /^Invalid VM name 'x\/y'/],
      ["POST", "/svc/vms/tiny/fork", { snapshot: "s1", count: 0 }, /count: at least 1/],
      ["POST", "/svc/vms/tiny/fork", { snapshot: "s1", count: 10_000 }, /count: at most 32 forks at once/],
      [
        "POST",
        "/svc/vms/tiny/fork",
        { snapshot: "s1", count: 1, names: ["g1"] },
        /Give either names or count/,
      ],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await host.api(method, path, body);
      expect([res.status, res.body?.message], `${method} ${path} ${JSON.stringify(body)}`).toEqual([
        400,
        expect.stringMatching(message),
      ]);
    }
    // A web page of another origin is refused on the new routes as on every other.
    for (const [method, path] of [
      ["POST", "/svc/vms/tiny/snapshots"],
      ["POST", "/svc/vms/tiny/restore"],
      ["POST", "/svc/vms/tiny/fork"],
      ["DELETE", "/svc/vms/tiny/snapshots/s1"],
    ]) {
      const res = await fetch(`${host.url}${path}`, {
        method,
        headers: { origin: "http://evil.example", "content-type": "application/json" },
        body: method === "POST" ? JSON.stringify({ name: "x", snapshot: "s1", count: 1 }) : undefined,
      });
      expect([method, path, res.status]).toEqual([method, path, 403]);
    }
    expect((await host.api("GET", "/svc/vms")).body.map((v: { name: string }) => v.name)).toEqual(vmsBefore);
    expect(
      (await host.api("GET", "/svc/vms/tiny/snapshots")).body.map((s: { name: string }) => s.name),
    ).toEqual(["s1"]);
    expect((await readdir(join(host.home, "tiny", "snapshots"))).filter((e) => e.startsWith("."))).toEqual(
      [],
    );
  });
});

/** Runs the CLI in-process and returns what it printed. */
async function hangar(...args: string[]) {
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  const writeErr = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((chunk: string) => {
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    const program = buildProgram();
    program.exitOverride();
    await program.parseAsync(["node", "hangar", ...args, "--url", host.url]);
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
  }
  return out;
}

describe("the CLI", () => {
  it("hangar vm snapshot|snapshots|restore|fork", async () => {
    expect(await hangar("vm", "snapshot", "tiny", "cli")).toMatch(
      /^Snapshot cli of tiny: whole state, .+\.\n$/,
    );
    expect(await hangar("vm", "snapshots", "tiny")).toMatch(
      /^NAME\s+HOLDS\s+SIZE\s+CREATED\n(.|\n)*cli\s+whole state/,
    );
    expect(await hangar("vm", "restore", "tiny", "cli", "--wait", "--timeout", "60")).toMatch(
      /^tiny restored to cli: http:\/\/127\.\d+\.\d+\.\d+:\d+ \(ready after \d+\.\d s\)\n$/,
    );
    expect(await hangar("vm", "fork", "tiny", "cli", "--count", "1", "--prefix", "clifork")).toMatch(
      /^clifork-1: running http:/,
    );
    await expect(hangar("vm", "snapshot", "tiny", "cli", "--delete")).rejects.toThrow(
      /is in use: the disks of clifork-1/,
    );
    expect((await host.api("DELETE", "/svc/vms/clifork-1")).status).toBe(200);
    // tiny itself runs on the snapshot's disk: restored to s1 first, the snapshot can go.
    expect((await host.api("POST", "/svc/vms/tiny/restore", { snapshot: "s1" })).status).toBe(200);
    expect(await hangar("vm", "snapshot", "tiny", "cli", "--delete")).toBe("Deleted snapshot cli.\n");
  });
});

describe("a restore that fails", () => {
  it("says why, and frees the disk it replaced all the same", async () => {
    expect((await host.api("POST", "/svc/vms/tiny/snapshots", { name: "bad" })).status).toBe(200);
    // A saved state QEMU cannot load: the restore fails once the disk has been replaced.
    const state = join(host.home, "tiny", "snapshots", "bad", "state.bin");
    writeFileSync(state, Buffer.alloc(statSync(state).size, 0x5a));
    const failed = await host.api("POST", "/svc/vms/tiny/restore", { snapshot: "bad" });
    expect(failed.status, failed.text).toBe(400);
    expect(failed.body.message).toMatch(/^Cannot start tiny from snapshot tiny\/bad: /);
    await expect
      .poll(async () => (await readdir(join(host.home, "tiny"))).filter((f) => f.includes("replaced-disk")))
      .toEqual([]);
    expect(
      (await host.api("POST", "/svc/vms/tiny/restore?wait=ready&timeout=60", { snapshot: "s1" })).status,
    ).toBe(200);
    expect((await host.api("DELETE", "/svc/vms/tiny/snapshots/bad")).status).toBe(200);
  });
});

describe("a stopped VM", () => {
  it("snapshots its disk only; restoring that gives the disk back and leaves the VM stopped", async () => {
    expect((await host.api("POST", "/svc/vms/tiny/stop", {})).status).toBe(200);
    const disk = await host.api("POST", "/svc/vms/tiny/snapshots", { name: "cold" });
    expect(disk.body).toMatchObject({ name: "cold", memory: false });
    const restored = await host.api("POST", "/svc/vms/tiny/restore", { snapshot: "cold" });
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body.status).toBe("stopped");
    expect(diskWord(join(host.home, "tiny", "snapshots", "cold", "disk.img"))).toBe("snapdisk");
    // A clone of a VM whose disk is built on a snapshot gets a whole disk of its own.
    expect((await host.api("POST", "/svc/vms/clone", { name: "tiny", newName: "copy" })).status).toBe(200);
    const copy = JSON.parse(readFileSync(join(host.home, "copy", "config.json"), "utf8"));
    expect(copy.diskFormat).toBeUndefined();
    expect(diskWord(join(host.home, "copy", "disk.img"))).toBe("snapdisk");
    expect(await readdir(join(host.home, "copy"))).not.toContain("snapshots");
    expect((await host.api("DELETE", "/svc/vms/copy")).status).toBe(200);
  });
});

/**
 * Hibernate and resume of a QEMU VM, on the tiny guest (tiny-guest.ts): its counter lives in RAM,
 * so a counter that survives says the RAM did. While asleep its QEMU is gone (the host holds none
 * of its memory), its record keeps its address, ports and VNC, and a request to its address wakes
 * it. Bad requests are 409s or 400s that change nothing; two resumes at once are one after the
 * other; a restarted service resumes what the last one put to sleep.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { INTENT_FILE } from "../../src/host/qemu/hibernation.js";
import { ramPathIn } from "../../src/host/qemu/session.js";
import { startTestHost, type TestHost } from "./support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "./tiny-guest.js";

let host: TestHost;

beforeAll(async () => {
  const guestDir = tinyGuest();
  host = await startTestHost();
  for (const name of ["tiny", "idle"]) {
    expect((await host.api("POST", "/svc/vms", { name, ...TINY_VM })).status).toBe(200);
    bootTinyGuest(join(host.home, name), guestDir);
  }
  expect((await host.api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  const ready = await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=170");
  expect(ready.status, ready.text).toBe(200);
}, 180_000);
afterAll(async () => {
  await host?.cleanup();
});

const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;

/** The pids of the QEMUs of this test's VMs. */
async function qemuPids(): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    if (cmdline.includes(host.root) && cmdline.includes("process=hangar-vm") && !/\) Z /.test(stat)) {
      pids.push(Number(pid));
    }
  }
  return pids;
}

/** Kilobytes of resident memory of a process (VmRSS). */
async function rssKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

describe("hibernate and resume", () => {
  it("keeps the RAM, the address, the ports and the VNC; the QEMU is gone while it sleeps", async () => {
    const awake = await record("tiny");
    const url = awake.computerServerUrl as string;
    for (let i = 0; i < 3; i++) await guest(url, "/inc");
    // A clock far in the past: after the resume the guest must show the host's time.
    await guest(url, "/settime/978307200");
    const [pid] = await qemuPids();
    expect(await rssKb(pid)).toBeGreaterThan(10_000);

    const slept = await host.api("POST", "/svc/vms/tiny/hibernate", {});
    expect(slept.status, slept.text).toBe(200);
    expect(slept.body).toMatchObject({
      status: "hibernated",
      hibernation: "memory",
      ready: false,
      startedAt: null,
      computerServerUrl: url,
      vncUrl: awake.vncUrl,
      ipAddress: awake.ipAddress,
      forwardedPorts: awake.forwardedPorts,
    });
    expect(slept.body.hibernationBytes).toBeGreaterThan(0);
    expect(Date.parse(slept.body.hibernatedAt)).toBeGreaterThan(Date.now() - 60_000);
    // The process is gone: no host memory is held for it, and its RAM file left /dev/shm.
    expect(await qemuPids()).toEqual([]);
    expect(existsSync(ramPathIn(join(host.home, "tiny"), true))).toBe(false);
    expect(existsSync(join(host.home, "tiny", "hibernation", "memory.ram"))).toBe(true);
    expect(
      (await host.api("GET", "/svc/vms")).body.find((v: { name: string }) => v.name === "tiny").status,
    ).toBe("hibernated");

    const resumed = await host.api("POST", "/svc/vms/tiny/resume?wait=ready&timeout=60", {});
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body).toMatchObject({
      status: "running",
      ready: true,
      computerServerUrl: url,
      vncUrl: awake.vncUrl,
      forwardedPorts: awake.forwardedPorts,
    });
    expect(resumed.body.hibernation).toBeUndefined();
    expect(resumed.body.bootId).not.toBe(awake.bootId);
    expect((await guest(url, "/status")).counter).toBe(3);
    // The guest sets its clock from the host's when it sees a new boot id (every 0.2 s).
    await expect
      .poll(async () => Math.abs((await guest(url, "/status")).time - Date.now() / 1000), { timeout: 10_000 })
      .toBeLessThan(5);
    // The saved state is spent: the record and state went, the RAM file stays while mapped.
    expect(existsSync(join(host.home, "tiny", "hibernation", "hibernation.json"))).toBe(false);
    expect(await qemuPids()).toHaveLength(1);
  });

  it("a resumed VM hibernates again (its RAM from the stream into a file of its own) and comes back as it was", async () => {
    const url = (await record("tiny")).computerServerUrl as string;
    expect((await guest(url, "/inc")).counter).toBe(4);
    const slept = await host.api("POST", "/svc/vms/tiny/hibernate", {});
    expect(slept.status, slept.text).toBe(200);
    // The RAM went into the migration stream, then into a RAM file that the resume maps.
    expect(
      existsSync(join(host.home, "tiny", "hibernation", "memory.ram")),
      (await host.api("GET", "/svc/logs?type=error")).text,
    ).toBe(true);
    expect(
      readdirSync(join(host.home, "tiny")).filter((e) => e.startsWith(".hangar-tmp-")),
      "no build left",
    ).toEqual([]);
    expect((await host.api("GET", "/svc/logs?type=info")).body.info).toContain(
      "Hibernation given a RAM file",
    );
    expect(await qemuPids()).toEqual([]);
    const resumed = await host.api("POST", "/svc/vms/tiny/resume?wait=ready&timeout=60", {});
    expect(resumed.status, resumed.text).toBe(200);
    expect((await guest(url, "/status")).counter).toBe(4);
  });

  it("two resumes at once: one resumes, the other finds it running (409), one QEMU", async () => {
    const url = (await record("tiny")).computerServerUrl as string;
    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    const [a, b] = await Promise.all([
      host.api("POST", "/svc/vms/tiny/resume", {}),
      host.api("POST", "/svc/vms/tiny/resume", {}),
    ]);
    expect([a.status, b.status].sort(), a.text + b.text).toEqual([200, 409]);
    const refused = a.status === 409 ? a : b;
    expect(refused.body.message).toBe("Virtual machine already running: tiny (nothing to resume)");
    expect(await qemuPids()).toHaveLength(1);
    await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=60");
    expect((await guest(url, "/status")).counter).toBe(4);
  });
});

describe("wake on the first request", () => {
  it("a request to a sleeping VM's address wakes it and is answered, marked, and logged", async () => {
    const url = (await record("tiny")).computerServerUrl as string;
    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    expect(await qemuPids()).toEqual([]);

    const res = await fetch(new URL("/inc", url), { signal: AbortSignal.timeout(60_000) });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-hangar-woke")).toBe("1");
    expect(((await res.json()) as { counter: number }).counter).toBe(5);
    expect((await record("tiny")).status).toBe("running");
    // The next request goes straight to the guest: no mark.
    const next = await fetch(new URL("/status", url), { signal: AbortSignal.timeout(10_000) });
    expect(next.headers.get("x-hangar-woke")).toBeNull();
    await next.text();
    const log = readFileSync(join(host.home, ".logs", "info.log"), "utf8");
    expect(log).toMatch(/Desktop woke on a request.*tiny/);
  });

  it("its address is held from the moment QEMU ends: a request while the RAM file is written wakes it after", async () => {
    const url = (await record("tiny")).computerServerUrl as string;
    const vmDir = join(host.home, "tiny");
    const hibernating = host.api("POST", "/svc/vms/tiny/hibernate", {});
    // Resumed above, its RAM goes into the stream and then into a file: the moment of the latter,
    // when the hibernate's intent names a directory that a RAM file is written in. (The resumed
    // VM's own RAM file is moved aside into a temporary directory too, before its QEMU ends.)
    const writingRamFile = () => {
      try {
        const intent = JSON.parse(readFileSync(join(vmDir, INTENT_FILE), "utf8")) as { temp?: string };
        return intent.temp !== undefined && existsSync(join(intent.temp, "memory.ram"));
      } catch {
        return false;
      }
    };
    await expect.poll(writingRamFile, { timeout: 60_000, interval: 2 }).toBe(true);
    const res = await fetch(new URL("/status", url), { signal: AbortSignal.timeout(60_000) });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-hangar-woke")).toBe("1");
    expect(((await res.json()) as { counter: number }).counter).toBe(5);
    expect((await hibernating).status).toBe(200);
    expect((await record("tiny")).status).toBe("running");
    expect(await qemuPids()).toHaveLength(1);
  });
});

describe("bad requests change nothing", () => {
  it("hibernating a stopped VM, resuming a running one, an unknown mode, a second hibernate", async () => {
    const stopped = await host.api("POST", "/svc/vms/idle/hibernate", {});
    expect(stopped.status).toBe(409);
    expect(stopped.body.message).toBe("Cannot hibernate idle: it is not running");
    expect((await record("idle")).status).toBe("stopped");
    expect(existsSync(join(host.home, "idle", "hibernation"))).toBe(false);

    const notAsleep = await host.api("POST", "/svc/vms/idle/resume", {});
    expect(notAsleep.status).toBe(409);
    expect(notAsleep.body.message).toBe("Cannot resume idle: it is not hibernated (run it instead)");

    const running = await host.api("POST", "/svc/vms/tiny/resume", {});
    expect(running.status).toBe(409);
    expect(running.body.message).toBe("Virtual machine already running: tiny (nothing to resume)");

    const unknown = await host.api("POST", "/svc/vms/tiny/hibernate", { mode: "deep" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe(
      "Invalid hibernate request body: mode: Unknown hibernation mode 'deep' (expected memory, paused, disk)",
    );
    const wrong = await host.api("POST", "/svc/vms/tiny/hibernate", { mode: "paused" });
    expect(wrong.status).toBe(400);
    expect(wrong.body.message).toBe("A qemu desktop hibernates with 'memory', not 'paused'");
    expect((await record("tiny")).status).toBe("running");
    expect(await qemuPids()).toHaveLength(1);

    const missing = await host.api("POST", "/svc/vms/nope/hibernate", {});
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe("Virtual machine not found: nope");

    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    const twice = await host.api("POST", "/svc/vms/tiny/hibernate", {});
    expect(twice.status).toBe(409);
    expect(twice.body.message).toBe("tiny is already hibernated");
    const patch = await host.api("PATCH", "/svc/vms/tiny", { memory: "256MB" });
    expect(patch.status).toBe(409);
    expect(patch.body.message).toMatch(/^tiny is hibernated and cannot be modified/);
    expect((await record("tiny")).memorySize).toBe(128 * 1024 ** 2);
  });
});

describe("after a restart of the host service", () => {
  it("the VM is still asleep, a request to it wakes it, and resume works", async () => {
    expect((await record("tiny")).status).toBe("hibernated");
    await host.restart();
    const after = await record("tiny");
    expect(after.status).toBe("hibernated");
    const res = await fetch(new URL("/status", after.computerServerUrl), {
      signal: AbortSignal.timeout(60_000),
    });
    expect(res.headers.get("x-hangar-woke")).toBe("1");
    expect(((await res.json()) as { counter: number }).counter).toBe(5);

    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    await host.restart();
    const resumed = await host.api("POST", "/svc/vms/tiny/resume?wait=ready&timeout=60", {});
    expect(resumed.status, resumed.text).toBe(200);
    expect((await guest(resumed.body.computerServerUrl, "/status")).counter).toBe(5);
  });

  it("run resumes a hibernated VM; stop gives up its saved state", async () => {
    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
    const url = (await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=60")).body.computerServerUrl;
    expect((await guest(url, "/status")).counter).toBe(5);

    expect((await host.api("POST", "/svc/vms/tiny/hibernate", {})).status).toBe(200);
    const stopped = await host.api("POST", "/svc/vms/tiny/stop", {});
    expect(stopped.status, stopped.text).toBe(200);
    expect((await record("tiny")).status).toBe("stopped");
    expect(existsSync(join(host.home, "tiny", "hibernation"))).toBe(false);
    // Nothing listens at its address any more.
    await expect(fetch(new URL("/status", url), { signal: AbortSignal.timeout(5000) })).rejects.toThrow();
  });
});

/**
 * Each of the host service's failures found by driving it as a demanding user would: deadlocks,
 * hangs, states that did not tell the truth, and what a `kill -9` left behind. A request that would
 * hang is aborted after a few seconds, so a regression fails fast instead of timing out the suite.
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processRunning } from "../../src/os/pid.js";
import { startRegistry } from "../support/registry.js";
import { boundedRequest, eventually, LINUX_VM, startTestHost, type TestHost } from "./support.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost({ stopGraceMs: 10_000 });
});
afterAll(async () => {
  await host.cleanup();
});

/** A request that must answer within `ms`. */
const api = (method: string, path: string, body?: unknown, ms = 5000) =>
  boundedRequest(host.url, method, path, body, ms);

const create = (name: string, extra: Record<string, unknown> = {}) =>
  api("POST", "/svc/vms", { name, ...LINUX_VM, ...extra });

async function runAndWait(name: string, body: unknown = {}) {
  expect((await api("POST", `/svc/vms/${name}/run`, body)).status).toBe(202);
  return eventually(async () => {
    const vm = (await api("GET", `/svc/vms/${name}`)).body;
    return vm.status === "running" && vm.ipAddress ? vm : undefined;
  });
}

const sessionOf = (name: string) => JSON.parse(readFileSync(join(host.home, name, "session.json"), "utf8"));

/** Every operation on `name` still answers: no lock was left held. */
async function answers(name: string) {
  expect((await api("PATCH", `/svc/vms/${name}`, { cpu: 2 })).status).toBe(200);
  expect((await api("GET", `/svc/vms/${name}`)).status).toBe(200);
}

describe("locks", () => {
  it("a clone onto its own name is a 400 at once, and the VM stays usable", async () => {
    expect((await create("r1")).status).toBe(200);
    const self = await api("POST", "/svc/vms/clone", { name: "r1", newName: "r1" });
    expect(self).toEqual({
      status: 400,
      body: { message: "Cannot clone r1 onto itself: choose another newName" },
    });
    expect((await create("self:x")).body.name).toBe("self_x");
    const normalized = await api("POST", "/svc/vms/clone", { name: "self:x", newName: "self_x" });
    expect(normalized.status).toBe(400);
    await answers("r1");
    await answers("self_x");
  });

  it("two crossed clones both answer 400 and leave both VMs usable", async () => {
    expect((await create("a")).status).toBe(200);
    expect((await create("b")).status).toBe(200);
    const [ab, ba] = await Promise.all([
      api("POST", "/svc/vms/clone", { name: "a", newName: "b" }),
      api("POST", "/svc/vms/clone", { name: "b", newName: "a" }),
    ]);
    expect([ab.status, ba.status]).toEqual([400, 400]);
    expect(ab.body.message).toMatch(/^Directory already exists at path: .*\/b$/);
    await answers("a");
    await answers("b");
  });
});

describe("directories", () => {
  it("a directory that cannot be created under /proc is a 400, not a hang", async () => {
    const home = await api("POST", "/svc/config", { homeDirectory: "/proc/nope" });
    expect(home.status).toBe(400);
    expect(home.body.message).toMatch(/^Failed to create directory at \/proc\/nope: /);
    const location = await api("POST", "/svc/config/locations", { name: "p", path: "/proc/x/y" });
    expect(location.status).toBe(400);
    expect(location.body.message).toMatch(/^Failed to create directory at \/proc\/x\/y: /);
  });

  it("relative storage paths are refused, and nothing is created in the service's directory", async () => {
    const add = await api("POST", "/svc/config/locations", { name: "rel", path: "relative/dir" });
    expect(add.status).toBe(400);
    expect(add.body.message).toMatch(/^Invalid path 'relative\/dir': use an absolute path/);
    expect((await api("POST", "/svc/config", { cacheDirectory: "cache/here" })).status).toBe(400);
    const made = await create("rel-vm", { storage: "relative/dir" });
    expect(made.status).toBe(400);
    expect(made.body.message).toMatch(/^Invalid path 'relative\/dir'/);
    expect(existsSync(join(process.cwd(), "relative"))).toBe(false);
    expect(existsSync(join(process.cwd(), "cache"))).toBe(false);
  });
});

describe("sizes", () => {
  it.each([
    [{ memory: "0" }, /^Invalid memory '0': at least 128 MiB is needed$/],
    [{ memory: "16MB" }, /^Invalid memory '16MB': at least 128 MiB/],
    [{ diskSize: "0" }, /^Invalid diskSize '0': at least 64 MiB is needed$/],
    [{ diskSize: "1B" }, /^Invalid diskSize '1B'/],
  ])("refuses %j with a clear 400", async (sizes, message) => {
    const res = await create("tiny", sizes);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect((await api("PATCH", "/svc/vms/r1", sizes)).status).toBe(400);
  });
});

describe("pull failures", () => {
  it("a failed pull into a name is forgotten once a VM of that name was created", async () => {
    const registry = await startRegistry();
    try {
      const pull = await api("POST", "/svc/pull", {
        image: "nothing:here",
        name: "stk",
        registry: registry.host,
        organization: "hangar",
      });
      expect(pull.body.message).toMatch(/was not found/);
    } finally {
      await registry.stop();
    }
    expect((await api("GET", "/svc/vms/stk")).body.message).toMatch(/^Pull failed for 'stk'/);
    expect((await create("stk")).status).toBe(200);
    expect((await api("DELETE", "/svc/vms/stk")).status).toBe(200);
    expect(await api("GET", "/svc/vms/stk")).toEqual({
      status: 400,
      body: { message: "Virtual machine not found: stk" },
    });
  });
});

describe("running VMs", () => {
  it("stop answers once QEMU has ended; a blank disk stops without waiting out the grace", async () => {
    expect((await create("blank", { memory: "1GB" })).status).toBe(200);
    await runAndWait("blank");
    const { pid } = sessionOf("blank");
    const started = Date.now();
    const stop = await api("POST", "/svc/vms/blank/stop", {});
    expect(stop).toEqual({ status: 200, body: { message: "VM stopped successfully", outcome: "quit" } });
    expect(processRunning(pid)).toBe(false);
    expect(Date.now() - started).toBeLessThan(4000); // the service's grace is 10 s
  });

  it("force skips the grace of a guest with a system; delete of a running VM does too", async () => {
    expect((await create("written")).status).toBe(200);
    writeFileSync(join(host.home, "written", "disk.img"), Buffer.alloc(4096, 1), { flag: "r+" });
    await runAndWait("written");
    let started = Date.now();
    const stop = await api("POST", "/svc/vms/written/stop", { force: true });
    expect(stop.body).toEqual({ message: "VM stopped successfully", outcome: "quit" });
    expect(Date.now() - started).toBeLessThan(4000);
    expect((await api("POST", "/svc/vms/written/stop", { force: "yes" })).status).toBe(400);

    await runAndWait("written");
    const { pid } = sessionOf("written");
    started = Date.now();
    expect((await api("DELETE", "/svc/vms/written")).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(processRunning(pid)).toBe(false);
  });

  it("reads of a running VM do not wait for its guest (SSH is probed in the background)", async () => {
    expect((await create("quick")).status).toBe(200);
    await runAndWait("quick", { noDisplay: true });
    const timed = async (path: string) => {
      const start = performance.now();
      expect((await api("GET", path)).status).toBe(200);
      return performance.now() - start;
    };
    for (const path of ["/svc/vms/quick", "/svc/vms", "/svc/host/status"]) {
      // The old probe cost 400 ms on every read; the fastest of three shows it is gone.
      const fastest = Math.min(await timed(path), await timed(path), await timed(path));
      expect(fastest, path).toBeLessThan(250);
    }
    expect((await api("GET", "/svc/vms/quick")).body.sshAvailable).not.toBe(true);
    expect((await api("DELETE", "/svc/vms/quick")).status).toBe(200);
  });
});

describe("after kill -9", () => {
  it("a start whose session was never completed is completed by the next service", async () => {
    expect((await create("half-run")).status).toBe(200);
    const before = await runAndWait("half-run");
    const file = join(host.home, "half-run", "session.json");
    // What a service killed right after QEMU started leaves: the session written ahead, no pid, no port.
    const session = JSON.parse(readFileSync(file, "utf8"));
    writeFileSync(file, JSON.stringify({ ...session, pid: null, vnc: { ...session.vnc, port: null } }));
    await host.restart();
    const after = (await api("GET", "/svc/vms/half-run")).body;
    expect(after).toMatchObject({ status: "running", ipAddress: before.ipAddress });
    expect(after.vncUrl).toBe(before.vncUrl);
    expect((await api("DELETE", "/svc/vms/half-run")).status).toBe(200);
  });

  it("config.json is the record of intent: the disk follows it, and a grown disk is recorded", async () => {
    expect((await create("grow")).status).toBe(200);
    expect((await create("grown")).status).toBe(200);
    const config = (name: string) => JSON.parse(readFileSync(join(host.home, name, "config.json"), "utf8"));
    writeFileSync(
      join(host.home, "grow", "config.json"),
      JSON.stringify({ ...config("grow"), diskSize: 2 * 1024 ** 3 }),
    );
    truncateSync(join(host.home, "grown", "disk.img"), 3 * 1024 ** 3);
    await host.restart();
    expect(statSync(join(host.home, "grow", "disk.img")).size).toBe(2 * 1024 ** 3);
    expect(config("grown").diskSize).toBe(3 * 1024 ** 3);
    expect((await api("GET", "/svc/vms/grown")).body.diskSize.total).toBe(3 * 1024 ** 3);
  });

  it("an interrupted push reads failed and leaves no work directory", async () => {
    expect((await create("pushed")).status).toBe(200);
    const dir = join(host.home, "pushed");
    mkdirSync(join(dir, ".hangar-push"));
    writeFileSync(join(dir, ".hangar-push", "part-0.gz"), "x");
    const state = {
      status: "pushing",
      imageName: "img",
      tags: ["t"],
      registry: "127.0.0.1:1",
      organization: "org",
      progress: 40,
      uploadedBytes: 10,
      startedAt: new Date().toISOString(),
      finishedAt: null,
      manifestDigest: null,
      error: null,
    };
    writeFileSync(join(dir, ".hangar-push.json"), JSON.stringify(state));
    await host.restart();
    const vm = (await api("GET", "/svc/vms/pushed")).body;
    expect(vm.push).toMatchObject({
      status: "failed",
      imageName: "img",
      error: expect.stringMatching(/^Interrupted/),
    });
    expect(existsSync(join(dir, ".hangar-push"))).toBe(false);
    expect((await api("PATCH", "/svc/vms/pushed", { cpu: 2 })).status).toBe(200);
  });

  it("sweeps the temporary directory of a killed service even while its process is a zombie", async () => {
    // A parent that never reaps: the killed holder stays a zombie, whose pid still answers signals.
    const parent = spawn(
      "python3",
      [
        "-c",
        "import subprocess,sys,time; p=subprocess.Popen(sys.argv[1:]); print(p.pid, flush=True); time.sleep(120)",
        process.execPath,
        "--import",
        "tsx",
        join(import.meta.dirname, "fixtures", "hold-temp.ts"),
        host.home,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      let out = "";
      parent.stdout.setEncoding("utf8").on("data", (c: string) => {
        out += c;
      });
      const [pidLine, temp] = await eventually(async () => {
        const lines = out.split("\n").filter(Boolean);
        return lines.length >= 2 ? lines : undefined;
      });
      const pid = Number(pidLine);
      expect(existsSync(temp)).toBe(true);
      await host.restart();
      expect(existsSync(temp)).toBe(true); // its holder is alive: kept
      process.kill(pid, "SIGKILL");
      // A zombie whose threads have all ended (until then they may still hold its files).
      await eventually(
        async () =>
          /\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8")) &&
          readdirSync(`/proc/${pid}/task`).length === 1,
      );
      await host.restart();
      expect(existsSync(temp)).toBe(false);
    } finally {
      parent.kill("SIGKILL");
    }
  });
});

describe("shutdown", () => {
  it("waits for a push in progress, so the next service finds it finished", async () => {
    expect((await create("ship")).status).toBe(200);
    writeFileSync(join(host.home, "ship", "disk.img"), Buffer.alloc(1024 * 1024, 7), { flag: "r+" });
    const registry = await startRegistry();
    try {
      const push = {
        name: "ship",
        imageName: "ship",
        tags: ["t"],
        registry: registry.host,
        organization: "hangar",
        chunkSizeMb: 8,
      };
      expect((await api("POST", "/svc/vms/push", push)).status).toBe(202);
      await host.restart();
      const record = JSON.parse(readFileSync(join(host.home, "ship", ".hangar-push.json"), "utf8"));
      expect(record).toMatchObject({ status: "pushed", error: null });
      const manifest = await fetch(`${registry.url}/v2/hangar/ship/manifests/t`, {
        method: "HEAD",
        headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
      });
      expect(manifest.status).toBe(200);
      expect((await api("GET", "/svc/vms/ship")).body.push).toBeUndefined();
    } finally {
      await registry.stop();
    }
  });
});

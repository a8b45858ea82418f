/**
 * A container desktop starts with its CPU limit lifted and gets it back (start-boost.ts), through a
 * real engine (podman.ts), read from the container's cgroup as the kernel applies it: back once the
 * desktop answers, after the longest lift when it never does, and after a restart of a service that
 * was stopped while a desktop ran lifted. The container's own configuration keeps the limit asked for.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeLightImage, startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

/** The longest lift in these tests. */
const MAX_MS = 6000;

let engine: TestEngine;
let host: TestHost;
/** An image whose computer server answers at once, and one whose never does. */
let light: string;
let mute: string;

beforeAll(async () => {
  engine = await startPodman();
  light = await makeLightImage(engine);
  const name = `mute-${process.pid}`;
  await engine.podman("create", "--name", name, TEST_IMAGE);
  mute = "localhost/hangar-mute:test";
  await engine.podman("commit", "--change", 'ENTRYPOINT ["sleep", "600"]', "--change", "CMD []", name, mute);
  await engine.podman("rm", name);
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: light,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
    containerStartBoostMaxMs: MAX_MS,
  });
}, 120_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
});

/** The CFS quota of desktop `name`'s container in µs per 100 ms (cgroup v1 or v2), -1 for none. */
async function quota(name: string): Promise<number> {
  const pid = (await engine.podman("inspect", "--format", "{{.State.Pid}}", `hangar-${name}`)).trim();
  const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
  const v1 = lines.find((line) => line.split(":")[1]?.split(",").includes("cpu"));
  if (v1) {
    const path = v1.split(":").slice(2).join(":");
    const dir = ["cpu,cpuacct", "cpu"].map((c) => `/sys/fs/cgroup/${c}${path}`).find((d) => exists(d));
    return Number(readFileSync(`${dir}/cpu.cfs_quota_us`, "utf8"));
  }
  const path = (lines.find((line) => line.startsWith("0::")) ?? "").slice(3);
  const [max] = readFileSync(`/sys/fs/cgroup${path}/cpu.max`, "utf8").trim().split(" ");
  return max === "max" ? -1 : Number(max);
}
const exists = (dir: string) => {
  try {
    readFileSync(`${dir}/cpu.cfs_quota_us`);
    return true;
  } catch {
    return false;
  }
};
const configuredCpus = async (name: string) =>
  Number((await engine.podman("inspect", "--format", "{{.HostConfig.NanoCpus}}", `hangar-${name}`)).trim()) /
  1e9;

describe("a container desktop's start", () => {
  it("runs without its limit until it answers, then with it", async () => {
    expect((await host.api("POST", "/svc/vms", { ...LINUX_VM, name: "quick", cpu: 1 })).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/quick/run", {})).status).toBe(202);
    const ready = await host.api("GET", "/svc/vms/quick?wait=ready&timeout=60");
    expect(ready.body.ready, ready.text).toBe(true);
    // Back well before the longest lift would end it.
    const answered = Date.now();
    await expect.poll(() => quota("quick"), { timeout: MAX_MS / 2 }).toBe(100_000);
    expect(Date.now() - answered).toBeLessThan(MAX_MS / 2);
    expect(await configuredCpus("quick")).toBe(1);
  });

  it("gets its limit back after the longest lift when it never answers", async () => {
    expect(
      (await host.api("POST", "/svc/vms", { ...LINUX_VM, name: "silent", cpu: 2, image: mute })).status,
    ).toBe(200);
    const started = Date.now();
    expect((await host.api("POST", "/svc/vms/silent/run", {})).status).toBe(202);
    await expect.poll(() => quota("silent").catch(() => 0)).toBe(-1);
    await expect.poll(() => quota("silent"), { timeout: MAX_MS + 10_000 }).toBe(200_000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(MAX_MS - 500);
    expect(await configuredCpus("silent")).toBe(2);
  }, 60_000);

  it("a desktop left without its limit by a stopped service gets it back when the service starts", async () => {
    expect(
      (await host.api("POST", "/svc/vms", { ...LINUX_VM, name: "left", cpu: 2, image: mute })).status,
    ).toBe(200);
    expect((await host.api("POST", "/svc/vms/left/run", {})).status).toBe(202);
    await expect.poll(() => quota("left").catch(() => 0)).toBe(-1);
    // Its timer goes with the service, as a killed service's would.
    await host.close();
    await expect.poll(() => quota("left")).toBe(-1);
    await host.restart();
    await expect.poll(() => quota("left"), { timeout: MAX_MS / 2 }).toBe(200_000);
  }, 60_000);
});

/**
 * The image routes of a real host service against a real registry on loopback: push in the
 * background with its progress on the VM's record and in the log, pull at once and in the
 * background, the cache listed and pruned, and the clear 400s.
 */

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { eventually, LINUX_VM, startTestHost, type TestHost } from "./support.js";

const MiB = 1024 * 1024;
let host: TestHost;
let registry: TestRegistry;
const data = randomBytes(3 * MiB);

beforeAll(async () => {
  registry = await startRegistry();
  host = await startTestHost();
  const created = await host.api("POST", "/svc/vms", { name: "src", ...LINUX_VM, diskSize: "64MB" });
  expect(created.status).toBe(200);
  const disk = await open(join(host.home, "src", "disk.img"), "r+");
  await disk.write(data, 0, data.length, 10 * MiB);
  await disk.close();
});

afterAll(async () => {
  await host?.cleanup();
  await registry?.stop();
});

const target = () => ({ registry: registry.host, organization: "hangar" });

describe("image routes", () => {
  it("pushes in the background, with progress and outcome on the VM record and in the log", async () => {
    const res = await host.api("POST", "/svc/vms/push", {
      name: "src",
      imageName: "web",
      tags: ["a", "b"],
      chunkSizeMb: 8,
      ...target(),
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      message: "Push initiated in background",
      name: "src",
      imageName: "web",
      tags: ["a", "b"],
    });
    const vm = await eventually(async () => {
      const got = (await host.api("GET", "/svc/vms/src")).body;
      return got.push?.status !== "pushing" && got;
    });
    expect(vm.push).toMatchObject({
      status: "pushed",
      progress: 100,
      imageName: "web",
      tags: ["a", "b"],
      error: null,
    });
    expect(vm.push.manifestDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(vm.status).toBe("stopped");
    const listed = (await host.api("GET", "/svc/vms")).body.find((v: { name: string }) => v.name === "src");
    expect(listed.push.status).toBe("pushed");
    const logs = (await host.api("GET", "/svc/logs?type=info")).body.info as string;
    expect(logs).toMatch(/Image push started .*vm=src/);
    expect(logs).toMatch(/Image pushed .*digest=sha256:/);
  });

  it("keeps a VM's disk still while it is pushed: no run, update or delete", async () => {
    expect(
      (await host.api("POST", "/svc/vms", { name: "busy", ...LINUX_VM, diskSize: "256MB" })).status,
    ).toBe(200);
    const disk = await open(join(host.home, "busy", "disk.img"), "r+");
    for (let i = 0; i < 6; i++) await disk.write(randomBytes(8 * MiB), 0, 8 * MiB, i * 40 * MiB);
    await disk.close();
    const push = await host.api("POST", "/svc/vms/push", {
      name: "busy",
      imageName: "busy",
      tags: ["t"],
      ...target(),
    });
    expect(push.status).toBe(202);
    for (const [method, path, body, action] of [
      ["POST", "/svc/vms/busy/run", {}, "run"],
      ["PATCH", "/svc/vms/busy", { cpu: 2 }, "modify"],
      ["DELETE", "/svc/vms/busy", undefined, "delete"],
    ] as const) {
      const res = await host.api(method, path, body);
      expect(res).toMatchObject({
        status: 400,
        body: { message: `Cannot ${action} busy: an image push of it is in progress` },
      });
    }
    await eventually(
      async () => (await host.api("GET", "/svc/vms/busy")).body.push?.status === "pushed",
      60_000,
    );
    expect((await host.api("PATCH", "/svc/vms/busy", { cpu: 2 })).status).toBe(200);
  });

  it("refuses to push a missing VM or a bad request with a clear 400", async () => {
    const missing = await host.api("POST", "/svc/vms/push", {
      name: "ghost",
      imageName: "x",
      tags: ["t"],
      ...target(),
    });
    expect(missing).toMatchObject({ status: 400, body: { message: "Virtual machine not found: ghost" } });
    const noTags = await host.api("POST", "/svc/vms/push", {
      name: "src",
      imageName: "x",
      tags: [],
      ...target(),
    });
    expect(noTags).toMatchObject({ status: 400, body: { message: "At least one tag is required in tags" } });
    const badName = await host.api("POST", "/svc/vms/push", {
      name: "src",
      imageName: "Bad Name",
      tags: ["t"],
    });
    expect(badName.status).toBe(400);
    expect(badName.body.message).toMatch(/^Invalid image name "Bad Name"/);
  });

  it("refuses to push a running VM", async () => {
    expect((await host.api("POST", "/svc/vms", { name: "live", ...LINUX_VM, diskSize: "64MB" })).status).toBe(
      200,
    );
    expect((await host.api("POST", "/svc/vms/live/run", { noDisplay: true, vnc: "disabled" })).status).toBe(
      202,
    );
    await eventually(async () => (await host.api("GET", "/svc/vms/live")).body.status === "running");
    const res = await host.api("POST", "/svc/vms/push", {
      name: "live",
      imageName: "x",
      tags: ["t"],
      ...target(),
    });
    expect(res).toMatchObject({
      status: 400,
      body: { message: "Cannot push live: the VM is running. Stop it first." },
    });
    expect((await host.api("POST", "/svc/vms/live/stop")).status).toBe(200);
  });

  it("pulls into a new VM at once, caches it when caching is on, lists and prunes the cache", async () => {
    expect((await host.api("POST", "/svc/config", { cachingEnabled: true })).status).toBe(200);
    const res = await host.api("POST", "/svc/pull", { image: "web:a", name: "copy", ...target() });
    expect(res).toMatchObject({
      status: 200,
      body: { message: "Image pulled successfully", image: "web:a", name: "copy", vmName: "copy" },
    });
    const vm = (await host.api("GET", "/svc/vms/copy")).body;
    expect(vm).toMatchObject({ name: "copy", status: "stopped", cpuCount: 1, memorySize: 256 * MiB });
    expect(vm.diskSize.total).toBe(64 * MiB);
    expect(vm.diskSize.allocated).toBeLessThan(4 * MiB);
    const disk = await readFile(join(host.home, "copy", "disk.img"));
    expect(disk.subarray(10 * MiB, 13 * MiB).equals(data)).toBe(true);

    const again = await host.api("POST", "/svc/pull", { image: "web:a", name: "copy", ...target() });
    expect(again).toMatchObject({
      status: 400,
      body: { message: "Virtual machine already exists with name: copy" },
    });

    const images = await host.api("GET", "/svc/images?organization=hangar");
    expect(images.body).toEqual([
      { repository: "web", imageId: expect.stringMatching(/^sha256_[0-9a-f]{5}$/), kind: "vm" },
    ]);
    const pruned = await host.api("POST", "/svc/prune");
    expect(pruned.body).toMatchObject({ message: "Successfully removed cached images", removedImages: 1 });
    expect(pruned.body.freedBytes).toBeGreaterThan(MiB);
    expect((await host.api("GET", "/svc/images?organization=hangar")).body).toEqual([]);
  });

  it("pulls in the background, showing lume's pulling record, and keeps a failure on the record", async () => {
    const started = await host.api("POST", "/svc/pull/start", { image: "web:b", name: "bg", ...target() });
    expect(started).toMatchObject({
      status: 202,
      body: { message: "Pull started", name: "bg", image: "web:b" },
    });
    const done = await eventually(async () => {
      const got = await host.api("GET", "/svc/vms/bg");
      if (got.status === 200 && got.body.status === "pulling") {
        expect(got.body.downloadProgress).toBeGreaterThanOrEqual(0);
        return undefined;
      }
      return got;
    });
    expect(done).toMatchObject({ status: 200, body: { name: "bg", status: "stopped" } });

    // Into a VM that exists: a 400 at once, and the VM's record stays as it was.
    const clash = await host.api("POST", "/svc/pull/start", { image: "web:b", name: "src", ...target() });
    expect(clash).toMatchObject({
      status: 400,
      body: { message: "Virtual machine already exists with name: src" },
    });
    expect((await host.api("GET", "/svc/vms/src")).body.name).toBe("src");

    await host.api("POST", "/svc/pull/start", { image: "nothing:here", name: "nope", ...target() });
    const failed = await eventually(async () => {
      const got = await host.api("GET", "/svc/vms/nope");
      return got.status === 400 && got;
    });
    expect(failed.body.message).toBe(
      `Pull failed for 'nope': Image hangar/nothing:here was not found on ${registry.host}`,
    );
  });

  it("answers a clear 400 for bad pull requests and wrong credentials", async () => {
    const badRegistry = await host.api("POST", "/svc/pull/start", { image: "a:b", registry: "http://x/y" });
    expect(badRegistry.status).toBe(400);
    expect(badRegistry.body.message).toMatch(/^Invalid registry "http:\/\/x\/y"/);
    const badOrg = await host.api("GET", "/svc/images?organization=..%2Fetc");
    expect(badOrg.status).toBe(400);
    const bad = await host.api("POST", "/svc/pull", { image: "no-tag", ...target() });
    expect(bad).toMatchObject({
      status: 400,
      body: { message: expect.stringMatching(/^Invalid image format/) },
    });
    const locked = await startRegistry({ auth: { username: "ci", password: "right" } });
    const saved = { user: process.env.HANGAR_REGISTRY_USERNAME, pass: process.env.HANGAR_REGISTRY_PASSWORD };
    process.env.HANGAR_REGISTRY_USERNAME = "ci";
    process.env.HANGAR_REGISTRY_PASSWORD = "wrong";
    try {
      const res = await host.api("POST", "/svc/pull", {
        image: "web:a",
        registry: locked.host,
        organization: "x",
      });
      expect(res).toMatchObject({
        status: 400,
        body: { message: `${locked.host} rejected the credentials of ci for x/web` },
      });
      expect((await host.api("GET", "/svc/vms/web_a")).status).toBe(400);
    } finally {
      restore("HANGAR_REGISTRY_USERNAME", saved.user);
      restore("HANGAR_REGISTRY_PASSWORD", saved.pass);
      await locked.stop();
    }
  });
});

/** Runs the `hangar` CLI (from the sources) against the test host; resolves with its output and exit code. */
function hangar(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        'import("./src/cli/main.ts").then((m) => m.main())',
        "hangar",
        ...args,
        "--url",
        host.url,
      ],
      { encoding: "utf8", timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("hangar vm push|pull|images|prune", () => {
  it("pushes, pulls, lists and prunes through the service", async () => {
    const push = await hangar(
      "vm",
      "push",
      "src",
      "cli:v1",
      "--additional-tags",
      "v2",
      "--chunk-size-mb",
      "16",
      "--registry",
      registry.host,
      "--organization",
      "hangar",
    );
    expect(push.stderr).toBe("");
    expect(push).toMatchObject({ code: 0 });
    expect(push.stdout).toMatch(/^Pushed src as cli:v1, v2 \(sha256:[0-9a-f]{64}\)\.$/m);
    const pull = await hangar(
      "vm",
      "pull",
      "cli:v2",
      "--registry",
      registry.host,
      "--organization",
      "hangar",
    );
    expect(pull).toMatchObject({ code: 0, stdout: "Pulled cli:v2 into cli_v2.\n" });
    const disk = await readFile(join(host.home, "cli_v2", "disk.img"));
    expect(disk.subarray(10 * MiB, 13 * MiB).equals(data)).toBe(true);
    const images = await hangar("vm", "images", "--organization", "hangar", "--json");
    // Caching is on since an earlier test; the background pull of web:b is cached too.
    expect(JSON.parse(images.stdout).map((i: { repository: string }) => i.repository)).toEqual([
      "cli",
      "web",
    ]);
    const prune = await hangar("vm", "prune");
    expect(prune.stdout).toMatch(/^Removed 2 cached image\(s\), freed [\d.]+ [KM]iB\.$/m);
    const missing = await hangar(
      "vm",
      "pull",
      "absent:v1",
      "--registry",
      registry.host,
      "--organization",
      "hangar",
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/Pull failed for 'absent_v1': Image hangar\/absent:v1 was not found/);
  });
});

function restore(key: string, value: string | undefined) {
  if (value === undefined) delete process.env[key];
  else process.env[key] = value;
}

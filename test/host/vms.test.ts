/** The VM routes without running QEMU: create, list, get, update, clone, delete, and every 400. */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { get } from "node:http";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findFirmware } from "../../src/host/qemu/firmware.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host.cleanup();
});

const create = (name: string, extra: Record<string, unknown> = {}) =>
  host.api("POST", "/svc/vms", { name, ...LINUX_VM, ...extra });

describe("create", () => {
  it("writes config.json with lume's fields, a sparse raw disk and UEFI variables", async () => {
    const res = await create("web-1", { cpu: 2, memory: "512MB", diskSize: "64GB", display: "1280x800" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      message: "VM created successfully",
      name: "web-1",
      status: "stopped",
      runtime: "qemu",
    });
    const dir = join(host.home, "web-1");
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    expect(config).toMatchObject({
      os: "linux",
      cpuCount: 2,
      memorySize: 512 * 1024 ** 2,
      diskSize: 64 * 1024 ** 3,
      display: "1280x800",
      networkMode: "nat",
    });
    expect(config.macAddress).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    const disk = statSync(join(dir, "disk.img"));
    expect(disk.size).toBe(64 * 1024 ** 3);
    expect(disk.blocks * 512).toBeLessThan(1024 * 1024);
    const firmware = findFirmware();
    if (firmware) expect(statSync(join(dir, "nvram.bin")).size).toBe(statSync(firmware.vars).size);
    expect(readdirSync(host.home).filter((e) => e.startsWith(".hangar-tmp"))).toEqual([]);
  });

  it("is listed and read back with all of lume's keys", async () => {
    const list = await host.api("GET", "/svc/vms");
    expect(list.status).toBe(200);
    const vm = list.body.find((v: any) => v.name === "web-1");
    for (const key of [
      "name",
      "os",
      "cpuCount",
      "memorySize",
      "diskSize",
      "display",
      "status",
      "provisioningOperation",
      "vncUrl",
      "ipAddress",
      "sshAvailable",
      "locationName",
      "sharedDirectories",
      "networkMode",
      "downloadProgress",
    ]) {
      expect(vm).toHaveProperty(key);
    }
    expect(vm).toMatchObject({
      status: "stopped",
      vncUrl: null,
      ipAddress: null,
      locationName: "home",
      diskSize: { total: 64 * 1024 ** 3 },
    });
    const one = await host.api("GET", "/svc/vms/web-1?storage=home");
    expect(one.body).toEqual(vm);
  });

  it("normalizes name:tag to name_tag, as lume does", async () => {
    expect((await create("ubuntu:24.04")).body.name).toBe("ubuntu_24.04");
    expect((await host.api("GET", "/svc/vms/ubuntu:24.04")).body.name).toBe("ubuntu_24.04");
    expect((await host.api("GET", "/svc/vms/ubuntu_24.04")).status).toBe(200);
  });

  it("sorts names as a person would", async () => {
    await create("vm10");
    await create("vm2");
    const names = (await host.api("GET", "/svc/vms")).body.map((v: any) => v.name);
    expect(names.indexOf("vm2")).toBeLessThan(names.indexOf("vm10"));
  });

  it("lets exactly one of many concurrent creates of one name win", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => create("racer")));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) {
      expect(r.status).toBe(400);
      expect(r.body.message).toBe("Virtual machine already exists with name: racer");
    }
    const names = (await host.api("GET", "/svc/vms")).body.map((v: any) => v.name);
    expect(names.filter((n: string) => n === "racer")).toHaveLength(1);
    expect(readdirSync(host.home).filter((e) => e.startsWith(".hangar-tmp"))).toEqual([]);
  });

  it("creates in a path given as storage and reports that path as the location", async () => {
    const path = join(host.root, "elsewhere");
    expect((await create("far", { storage: path })).status).toBe(200);
    expect(existsSync(join(path, "far", "disk.img"))).toBe(true);
    const list = await host.api("GET", `/svc/vms?storage=${encodeURIComponent(path)}`);
    expect(list.body.map((v: any) => [v.name, v.locationName])).toEqual([["far", path]]);
  });
});

describe("validation (every 400 says what is wrong)", () => {
  const cases: [string, Record<string, unknown>, RegExp][] = [
    [
      "missing field",
      { name: "x", os: "linux", cpu: 1, memory: "1GB", diskSize: "1GB" },
      /^Invalid request body: display is required/,
    ],
    ["wrong type", { ...LINUX_VM, name: "x", cpu: "4" }, /^Invalid request body: cpu: /],
    ["null required", { ...LINUX_VM, name: null }, /^Invalid request body: name is required/],
    [
      "bad size 8G",
      { ...LINUX_VM, name: "x", memory: "8G" },
      /^Malformed size input: 8G\. Could not parse numeric value/,
    ],
    ["bad size GiB", { ...LINUX_VM, name: "x", diskSize: "8GiB" }, /^Malformed size input: 8GiB/],
    [
      "negative size",
      { ...LINUX_VM, name: "x", diskSize: "-1GB" },
      /^Calculated size out of bounds for UInt64: -1GB/,
    ],
    [
      "bad display",
      { ...LINUX_VM, name: "x", display: "big" },
      /^Invalid display resolution format: big\. Expected format: WIDTHxHEIGHT/,
    ],
    [
      "zero display",
      { ...LINUX_VM, name: "x", display: "0x600" },
      /^Invalid display resolution format: 0x600/,
    ],
    ["bad os", { ...LINUX_VM, name: "x", os: "windows" }, /^Unsupported OS type: windows/],
    ["macOS", { ...LINUX_VM, name: "x", os: "macOS" }, /needs a macOS host/],
    ["ipsw on linux", { ...LINUX_VM, name: "x", ipsw: "latest" }, /IPSW.*needs a macOS host/],
    [
      "bad network",
      { ...LINUX_VM, name: "x", network: "wifi" },
      /^Invalid network mode 'wifi'\. Expected 'nat', 'bridged', or 'bridged:<interface>'\./,
    ],
    [
      "bridged",
      { ...LINUX_VM, name: "x", network: "bridged" },
      /'bridged' is not supported by the QEMU backend/,
    ],
    ["zero cpu", { ...LINUX_VM, name: "x", cpu: 0 }, /^Invalid cpu count: 0/],
    ["unknown location", { ...LINUX_VM, name: "x", storage: "nowhere" }, /^VM location not found: nowhere$/],
  ];
  it.each(cases)("create: %s", async (_label, body, message) => {
    const res = await host.api("POST", "/svc/vms", body);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect(existsSync(join(host.home, "x"))).toBe(false);
  });

  it("create: a body that is not JSON, or none", async () => {
    expect((await host.api("POST", "/svc/vms", "{not json")).body.message).toMatch(
      /^Invalid request body: it is not valid JSON/,
    );
    expect((await host.api("POST", "/svc/vms")).body.message).toMatch(
      /^Invalid request body: a JSON object is required/,
    );
    expect((await host.api("POST", "/svc/vms", "[1]")).body.message).toMatch(
      /^Invalid request body: expected a JSON object/,
    );
  });

  const traversal = [
    "..",
    "../escape",
    "a/b",
    "a\\b",
    ".hidden",
    "",
    "x".repeat(200),
    "a..b",
    "nul\u0000byte",
    "a:b:c",
  ];
  it.each(traversal)("create refuses the name %j", async (name) => {
    const res = await create(name);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^Invalid VM name/);
    expect(existsSync(join(host.root, "escape"))).toBe(false);
  });

  it("refuses traversal through the URL and through clone's new name", async () => {
    // `%2e%2e` is `..` to the URL parser, which resolves it before routing: no VM route is reached.
    const dots = await rawGet(host.url, "/svc/vms/%2e%2e");
    expect(dots).toEqual({ status: 404, body: { message: "Not found: GET /svc" } });
    for (const path of ["/svc/vms/..%2F..%2Fetc", "/svc/vms/.hidden", "/svc/vms/a%5Cb", "/svc/vms/x%00y"]) {
      const res = await rawGet(host.url, path);
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.message).toMatch(/^Invalid VM name/);
    }
    const clone = await host.api("POST", "/svc/vms/clone", { name: "web-1", newName: "../../stolen" });
    expect(clone.status).toBe(400);
    expect(clone.body.message).toMatch(/^Invalid VM name/);
    expect(existsSync(join(host.root, "stolen"))).toBe(false);
    const del = await host.api("DELETE", "/svc/vms/..%2Fconfig");
    expect(del.status).toBe(400);
    expect(existsSync(join(host.root, "config"))).toBe(true);
  });

  it("answers 'not found' for a missing VM on every VM route", async () => {
    const message = "Virtual machine not found: ghost";
    for (const [method, path, body] of [
      ["GET", "/svc/vms/ghost"],
      ["DELETE", "/svc/vms/ghost"],
      ["PATCH", "/svc/vms/ghost", { cpu: 2 }],
      ["POST", "/svc/vms/ghost/run", {}],
      ["POST", "/svc/vms/ghost/stop", {}],
      ["POST", "/svc/vms/clone", { name: "ghost", newName: "ghost2" }],
    ] as [string, string, unknown?][]) {
      const res = await host.api(method, path, body);
      expect([method, path, res.status, res.body.message]).toEqual([method, path, 400, message]);
    }
  });

  it("stop of a stopped VM is a 400", async () => {
    const res = await host.api("POST", "/svc/vms/web-1/stop");
    expect(res.status).toBe(400);
    expect(res.body.message).toBe("Virtual machine not running: web-1");
  });

  it("run refuses what a Linux host cannot do, and bad run bodies", async () => {
    const cases: [unknown, RegExp][] = [
      [{ recoveryMode: true }, /Recovery mode.*needs a macOS host/],
      [{ noDisplay: "true" }, /^Invalid run request body: noDisplay: /],
      [{ vnc: "off", noDisplay: true }, /Invalid vnc policy 'off'\. Expected 'enabled' or 'disabled'\./],
      [{ vnc: "disabled" }, /^VNC is disabled for this run, so '--display vnc' cannot be used\./],
      [
        { sharedDirectories: [{ hostPath: join(host.root, "missing") }] },
        /^Host path does not exist or is not a directory: /,
      ],
      [
        { sharedDirectories: [{ hostPath: join(host.home, "web-1", "config.json") }] },
        /^Host path does not exist or is not a directory: /,
      ],
      [{ network: "bridged:eth0" }, /not supported by the QEMU backend/],
    ];
    for (const [body, message] of cases) {
      const res = await host.api("POST", "/svc/vms/web-1/run", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect((await host.api("GET", "/svc/vms/web-1")).body.status).toBe("stopped");
  });

  it("unattended setup (macOS only) is a 400 saying so", async () => {
    const res = await host.api("POST", "/svc/vms/web-1/setup", { configYaml: "x: 1" });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^Unattended setup \(macOS VMs only\) needs a macOS host/);
  });

  it("a macOS VM on disk cannot be run on this host", async () => {
    await create("mac");
    const configPath = join(host.home, "mac", "config.json");
    writeFileSync(
      configPath,
      JSON.stringify({ ...JSON.parse(readFileSync(configPath, "utf8")), os: "macOS" }),
    );
    const res = await host.api("POST", "/svc/vms/mac/run", {});
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/needs a macOS host/);
  });

  it("a directory that is not a VM, addressed by path, is 'not initialized'", async () => {
    const path = join(host.root, "loose");
    mkdirSync(join(path, "junk"), { recursive: true });
    const res = await host.api("GET", `/svc/vms/junk?storage=${encodeURIComponent(path)}`);
    expect(res.body.message).toBe("Virtual machine not initialized: junk");
    expect((await host.api("GET", `/svc/vms?storage=${encodeURIComponent(path)}`)).body).toEqual([]);
  });
});

describe("update", () => {
  it("changes cpu, memory, display and grows the disk sparsely", async () => {
    await create("tune", { diskSize: "2GB" });
    const res = await host.api("PATCH", "/svc/vms/tune", {
      cpu: 3,
      memory: "1GB",
      display: "1920x1080",
      diskSize: "10GB",
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "VM settings updated successfully" });
    const vm = (await host.api("GET", "/svc/vms/tune")).body;
    expect(vm).toMatchObject({
      cpuCount: 3,
      memorySize: 1024 ** 3,
      display: "1920x1080",
      diskSize: { total: 10 * 1024 ** 3 },
    });
    expect(vm.diskSize.allocated).toBeLessThan(1024 * 1024);
  });

  it("refuses to shrink the disk and applies nothing of a request that fails", async () => {
    const res = await host.api("PATCH", "/svc/vms/tune", { cpu: 8, diskSize: "1GB" });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^Disk size can only grow: tune has 10737418240 bytes/);
    expect((await host.api("GET", "/svc/vms/tune")).body.cpuCount).toBe(3);
  });

  it("validates every field", async () => {
    for (const [body, message] of [
      [{ display: "1920*1080" }, /^Invalid display resolution format: 1920\*1080/],
      [{ memory: "lots" }, /^Malformed size input: lots/],
      [{ cpu: 1.5 }, /^Invalid request body: cpu: /],
      [{ storage: "nowhere" }, /^VM location not found: nowhere/],
    ] as [unknown, RegExp][]) {
      const res = await host.api("PATCH", "/svc/vms/tune", body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect((await host.api("PATCH", "/svc/vms/tune")).body.message).toMatch(/^Invalid request body/);
    expect((await host.api("PATCH", "/svc/vms/tune", {})).status).toBe(200);
  });

  it("moves the VM to another storage location, and the old client's /update alias works", async () => {
    const path = join(host.root, "fast");
    expect((await host.api("POST", "/svc/config/locations", { name: "fast", path })).status).toBe(200);
    expect((await host.api("PATCH", "/svc/vms/tune", { storage: "fast" })).status).toBe(200);
    expect(existsSync(join(path, "tune", "disk.img"))).toBe(true);
    expect(existsSync(join(host.home, "tune"))).toBe(false);
    expect((await host.api("GET", "/svc/vms/tune")).body.locationName).toBe("fast");
    expect((await host.api("POST", "/svc/vms/tune/update", { cpu: 2, storage: "fast" })).status).toBe(200);
    expect((await host.api("GET", "/svc/vms/tune?storage=fast")).body.cpuCount).toBe(2);
  });
});

describe("clone and delete", () => {
  it("refuses an existing destination", async () => {
    const res = await host.api("POST", "/svc/vms/clone", { name: "web-1", newName: "vm2" });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe(`Directory already exists at path: ${join(host.home, "vm2")}`);
    const missing = await host.api("POST", "/svc/vms/clone", { name: "web-1" });
    expect(missing.body.message).toBe("Invalid request body: newName is required");
  });

  it("deletes a VM: 200 with an empty JSON body, files gone", async () => {
    const res = await host.api("DELETE", "/svc/vms/vm10");
    expect(res.status).toBe(200);
    expect(res.text).toBe("");
    expect(res.headers.get("content-type")).toMatch(/application\/json/);
    expect(existsSync(join(host.home, "vm10"))).toBe(false);
    expect((await host.api("GET", "/svc/vms/vm10")).status).toBe(400);
  });
});

describe("crash safety", () => {
  it("never lists a half-created VM and sweeps what a killed service left", async () => {
    const leftover = join(host.home, ".hangar-tmp-999999999-deadbeef");
    mkdirSync(leftover);
    writeFileSync(join(leftover, "config.json"), "{");
    mkdirSync(join(host.home, "half"));
    writeFileSync(join(host.home, "half", "config.json"), JSON.stringify({ os: "linux", display: "1x1" }));
    const names = (await host.api("GET", "/svc/vms")).body.map((v: any) => v.name);
    expect(names).not.toContain("half");
    expect(names.some((n: string) => n.startsWith("."))).toBe(false);
    await host.restart();
    expect(existsSync(leftover)).toBe(false);
  });
});

/** GET with the path sent exactly as written (fetch would resolve `%2e%2e` before sending). */
function rawGet(url: string, path: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url);
    get({ hostname, port, path }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    }).on("error", reject);
  });
}

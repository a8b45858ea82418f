/** Settings, storage locations, logs, the ipsw catalog and unknown routes. */
import { writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

let host: TestHost;
let catalog: Server;
let catalogUrl: string;

const CATALOG = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
  <key>MobileDeviceSoftwareVersionsByVersion</key><dict><key>1</key><dict>
    <key>MobileDeviceSoftwareVersions</key><dict>
      <key>VirtualMac2,1</key><dict>
        <key>22A380</key><dict><key>Restore</key><dict>
          <key>BuildVersion</key><string>22A380</string>
          <key>FirmwareURL</key><string>https://updates.example.test/13.0/UniversalMac_13.0_22A380_Restore.ipsw</string>
          <key>ProductVersion</key><string>13.0</string>
        </dict></dict>
        <key>24A335</key><dict><key>Restore</key><dict>
          <key>BuildVersion</key><string>24A335</string>
          <key>FirmwareURL</key><string>https://updates.example.test/15.0/UniversalMac_15.0_24A335_Restore.ipsw</string>
          <key>ProductVersion</key><string>15.0</string>
        </dict></dict>
        <key>23A344</key><dict><key>Restore</key><dict>
          <key>BuildVersion</key><string>23A344</string>
          <key>FirmwareURL</key><string>https://updates.example.test/14.0/UniversalMac_14.0_23A344_Restore.ipsw</string>
          <key>ProductVersion</key><string>14.0</string>
        </dict></dict>
      </dict>
    </dict>
  </dict></dict>
</dict></plist>`;

beforeAll(async () => {
  catalog = createServer((req, res) => {
    if (req.url === "/catalog.xml") res.writeHead(200, { "content-type": "application/xml" }).end(CATALOG);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => catalog.listen(0, "127.0.0.1", r));
  catalogUrl = `http://127.0.0.1:${(catalog.address() as AddressInfo).port}/catalog.xml`;
  host = await startTestHost({ ipswCatalogUrl: catalogUrl });
});
afterAll(async () => {
  await host.cleanup();
  await new Promise((r) => catalog.close(r));
});

describe("settings", () => {
  it("are one YAML file under the config directory, with a home location", async () => {
    const res = await host.api("GET", "/svc/config");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      vmLocations: [{ name: "home", path: host.home }],
      defaultLocationName: "home",
      homeDirectory: host.home,
      cachingEnabled: false,
      registry: { type: "ghcr", ghcr: { registry: "ghcr.io", organization: "trycua" } },
      settingsFile: join(host.root, "config", "hangar", "config.yaml"),
    });
    const file = parse(await readFile(res.body.settingsFile, "utf8"));
    expect(file.vmLocations).toEqual([{ name: "home", path: host.home }]);
  });

  it("POST /svc/config changes the cache directory and caching, and validates", async () => {
    const cache = join(host.root, "cache");
    expect(
      (await host.api("POST", "/svc/config", { cacheDirectory: cache, cachingEnabled: true })).body,
    ).toEqual({
      message: "Configuration updated successfully",
    });
    expect((await host.api("GET", "/svc/config")).body).toMatchObject({
      cacheDirectory: cache,
      cachingEnabled: true,
    });
    const file = join(host.root, "a-file");
    writeFileSync(file, "x");
    for (const [body, message] of [
      [{ cacheDirectory: file }, `Path is not a directory: ${file}`],
      [{ cachingEnabled: "yes" }, /^Invalid request body: cachingEnabled: /],
      [{ ipswCatalogUrl: "ftp://x" }, /^Invalid request body: ipswCatalogUrl: /],
      [undefined, /^Invalid request body: a JSON object is required/],
    ] as [unknown, string | RegExp][]) {
      const res = await host.api("POST", "/svc/config", body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
    }
  });

  it("homeDirectory moves the home location (and the logs with it)", async () => {
    const newHome = join(host.root, "home2");
    expect((await host.api("POST", "/svc/config", { homeDirectory: newHome })).status).toBe(200);
    expect((await host.api("GET", "/svc/config/locations")).body).toContainEqual({
      name: "home",
      path: newHome,
      isDefault: true,
    });
    expect((await host.api("POST", "/svc/vms", { name: "in-new-home", ...LINUX_VM })).status).toBe(200);
    expect((await host.api("GET", "/svc/logs?type=info")).body.info).toMatch(/VM created vm=in-new-home/);
    expect((await host.api("POST", "/svc/config", { homeDirectory: host.home })).status).toBe(200);
  });
});

describe("storage locations", () => {
  it("adds, lists sorted, sets the default, removes", async () => {
    const path = join(host.root, "ssd");
    const add = await host.api("POST", "/svc/config/locations", { name: "ssd", path });
    expect(add.body).toEqual({ message: "Location added successfully", name: "ssd", path });
    expect((await host.api("GET", "/svc/config/locations")).body.map((l: any) => l.name)).toEqual([
      "home",
      "ssd",
    ]);
    expect((await host.api("POST", "/svc/config/locations/default/ssd")).body).toEqual({
      message: "Default location set successfully",
    });
    await host.api("POST", "/svc/vms", { name: "on-ssd", ...LINUX_VM });
    expect((await host.api("GET", "/svc/vms/on-ssd")).body.locationName).toBe("ssd");
    const refuse = await host.api("DELETE", "/svc/config/locations/ssd");
    expect(refuse.status).toBe(400);
    expect(refuse.body.message).toBe(
      "Cannot remove the default location 'ssd'. Set a new default location first.",
    );
    await host.api("POST", "/svc/config/locations/default/home");
    expect((await host.api("DELETE", "/svc/config/locations/ssd")).body).toEqual({
      message: "Location removed successfully",
    });
    expect((await host.api("GET", "/svc/vms/on-ssd")).status).toBe(400);
  });

  it("answers lume's 400s", async () => {
    const file = join(host.root, "plain-file");
    writeFileSync(file, "x");
    const cases: [string, string, unknown, string | RegExp][] = [
      [
        "POST",
        "/svc/config/locations",
        { name: "bad name!", path: "/tmp/x" },
        "Invalid location name: bad name!. Names should be alphanumeric with underscores or dashes.",
      ],
      [
        "POST",
        "/svc/config/locations",
        { name: "home", path: join(host.root, "h") },
        "VM location with name 'home' already exists",
      ],
      ["POST", "/svc/config/locations", { name: "filey", path: file }, `Path is not a directory: ${file}`],
      ["POST", "/svc/config/locations", { name: "nopath" }, "Invalid request body: path is required"],
      ["DELETE", "/svc/config/locations/ghost", undefined, "VM location not found: ghost"],
      ["POST", "/svc/config/locations/default/ghost", undefined, "VM location not found: ghost"],
      ["GET", "/svc/vms?storage=ghost", undefined, "VM location not found: ghost"],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await host.api(method, path, body);
      expect([path, res.status]).toEqual([path, 400]);
      expect(res.body.message).toMatch(message);
    }
  });
});

describe("logs", () => {
  it("returns info and error logs, the last N lines, with query strings", async () => {
    await host.api("POST", "/svc/vms", { name: "logged", ...LINUX_VM });
    const all = await host.api("GET", "/svc/logs");
    expect(Object.keys(all.body).sort()).toEqual(["error", "info"]);
    expect(all.body.info).toMatch(/^\[\d{4}-\d\d-\d\dT[^\]]+\] INFO: Host service started/m);
    const two = await host.api("GET", "/svc/logs?type=info&lines=2");
    expect(Object.keys(two.body)).toEqual(["info"]);
    expect(two.body.info.split("\n")).toHaveLength(2);
    expect(two.body.info).toMatch(/VM created vm=logged/);
    const errors = await host.api("GET", "/svc/logs?type=ERROR");
    expect(Object.keys(errors.body)).toEqual(["error"]);
    expect((await host.api("GET", "/svc/logs?type=debug")).body.message).toMatch(
      /^Invalid query parameter type: /,
    );
    expect((await host.api("GET", "/svc/logs?lines=ten")).body.message).toMatch(
      /^Invalid query parameter lines: /,
    );
  });
});

describe("ipsw", () => {
  it("reads the latest restore image from the catalog", async () => {
    const res = await host.api("GET", "/svc/ipsw");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      url: "https://updates.example.test/15.0/UniversalMac_15.0_24A335_Restore.ipsw",
      version: "15.0",
      build: "24A335",
    });
  });

  it("answers a clear 400 when the catalog cannot be reached or is not a catalog", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const dead = `http://127.0.0.1:${deadPort}/catalog.xml`;
    await host.api("POST", "/svc/config", { ipswCatalogUrl: dead });
    const res = await host.api("GET", "/svc/ipsw");
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(`Cannot reach the macOS restore-image catalog at ${dead}: `);
    expect(res.body.message).toMatch(/ECONNREFUSED/);
    await host.api("POST", "/svc/config", { ipswCatalogUrl: catalogUrl.replace("catalog.xml", "missing") });
    expect((await host.api("GET", "/svc/ipsw")).body.message).toMatch(/HTTP 404/);
    await host.api("POST", "/svc/config", { ipswCatalogUrl: catalogUrl });
  });
});

describe("routing", () => {
  it("answers unknown routes and methods with a JSON 404", async () => {
    for (const [method, path] of [
      ["GET", "/svc/nothing"],
      ["PUT", "/svc/vms"],
      ["GET", "/lume/vms"],
    ]) {
      const res = await host.api(method, path);
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toMatch(/application\/json/);
      expect(res.body.message).toBe(`Not found: ${method} ${path}`);
    }
  });

  it("ignores trailing slashes and accepts query strings everywhere", async () => {
    expect((await host.api("GET", "/svc/vms/")).status).toBe(200);
    expect((await host.api("GET", "/svc/vms?storage=home")).status).toBe(200);
    expect((await host.api("GET", "/svc/config?x=1")).status).toBe(200);
    expect((await host.api("GET", "/svc/config/locations/?x=1")).status).toBe(200);
  });

  it("reports host status in lume's snake_case shape", async () => {
    const res = await host.api("GET", "/svc/host/status");
    expect(res.body).toMatchObject({ status: "healthy", vm_count: 0, max_vms: 253, available_slots: 253 });
  });
});

/** Clone copies sparsely: a 64 GB disk with 1 GB written costs about 1 GB, and gets a new MAC. */
import { open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fillSparse, startTestHost, type TestHost } from "./support.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host.cleanup();
});

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

it("clones a 64 GB VM with 1 GB allocated sparsely, with a new MAC address", async () => {
  const created = await host.api("POST", "/svc/vms", {
    name: "big",
    os: "linux",
    cpu: 2,
    memory: "1GB",
    diskSize: "64GB",
    display: "1024x768",
  });
  expect(created.status).toBe(200);
  const sourceDisk = join(host.home, "big", "disk.img");
  await fillSparse(sourceDisk, 64 * GiB, 16);
  const source = await stat(sourceDisk);
  expect(source.blocks * 512).toBeGreaterThanOrEqual(GiB);

  const res = await host.api("POST", "/svc/vms/clone", { name: "big", newName: "big-copy" });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ message: "VM cloned successfully", source: "big", destination: "big-copy" });

  const copyDisk = join(host.home, "big-copy", "disk.img");
  const copy = await stat(copyDisk);
  expect(copy.size).toBe(64 * GiB);
  expect(copy.blocks * 512).toBeGreaterThanOrEqual(GiB);
  expect(copy.blocks * 512).toBeLessThan(GiB + 64 * MiB);

  // The data is the same where it was written.
  const offset = 5 * Math.floor((64 * GiB) / 16 / MiB) * MiB;
  const read = async (path: string) => {
    const file = await open(path, "r");
    const buffer = Buffer.alloc(4096);
    await file.read(buffer, 0, 4096, offset + 8192);
    await file.close();
    return buffer;
  };
  expect((await read(copyDisk)).equals(await read(sourceDisk))).toBe(true);

  const [a, b] = await Promise.all(
    ["big", "big-copy"].map(async (n) =>
      JSON.parse(await readFile(join(host.home, n, "config.json"), "utf8")),
    ),
  );
  expect(b.macAddress).not.toBe(a.macAddress);
  expect({ ...b, macAddress: undefined }).toEqual({ ...a, macAddress: undefined });
  const listed = (await host.api("GET", "/svc/vms/big-copy")).body;
  expect(listed.diskSize.total).toBe(64 * GiB);
  // What is allocated, as the file says (the file system may add a block of its extent tree when it
  // writes the copy back, after the stat above: CI saw 4 KiB more there than in the record).
  expect(Math.abs(listed.diskSize.allocated - copy.blocks * 512)).toBeLessThanOrEqual(64 * 1024);
  expect(listed.macAddress).toBe(b.macAddress);
});

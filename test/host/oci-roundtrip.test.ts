/**
 * Push a VM to a real registry on loopback and pull it back: disk contents, sparseness, config
 * and nvram survive; blobs the registry has are skipped; the cache lists and prunes images.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageCache, pullImage, pushVm } from "../../src/host/images/oci/index.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { allocated, makeVmDir, readJson } from "../support/vm-dir.js";

const MiB = 1024 * 1024;
let registry: TestRegistry;
let work: string;

beforeAll(async () => {
  registry = await startRegistry();
  work = await mkdtemp(join(tmpdir(), "hangar-oci-"));
});

afterAll(async () => {
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("push then pull", () => {
  const diskSize = 48 * MiB;
  const writes = [
    { offset: 0, data: randomBytes(MiB) },
    { offset: 5 * MiB + 123, data: randomBytes(300 * 1024) },
    { offset: 7 * MiB + MiB / 2, data: randomBytes(MiB) }, // spans the 8 MiB chunk boundary
    { offset: 20 * MiB, data: Buffer.alloc(2 * MiB, 0x5a) },
    { offset: diskSize - 4096, data: randomBytes(4096) },
  ];

  it("round-trips a sparse VM through several tags", async () => {
    const source = join(work, "source");
    // A key of Hangar's own (not one of lume's) rides along in the config blob.
    const config = await makeVmDir(source, { diskSize, writes, config: { firmware: { secureBoot: false } } });
    const phases = new Set<string>();
    const pushed = await pushVm({
      vmDir: source,
      imageName: "roundtrip",
      tags: ["v1", "latest", "stable"],
      registry: registry.host,
      organization: "hangar",
      chunkSizeMb: 4,
      credentials: null,
      // Blobs above 256 KiB go up in 300 KiB PATCHes: the chunked upload path.
      upload: { monolithicLimitBytes: 256 * 1024, chunkBytes: 300 * 1024 },
      onProgress: (p) => phases.add(p.phase),
    });
    expect(pushed.parts).toBe(12);
    expect(pushed.diskSize).toBe(diskSize);
    expect([...phases]).toEqual(["compressing", "manifest", "done"]);
    const original = await readFile(join(source, "disk.img"));

    for (const tag of ["v1", "latest", "stable"]) {
      const dest = join(work, `pulled-${tag}`);
      const result = await pullImage({
        image: `roundtrip:${tag}`,
        registry: registry.host,
        organization: "hangar",
        destDir: dest,
        cacheDirectory: join(work, "cache"),
        credentials: null,
      });
      expect(result.manifestDigest).toBe(pushed.manifestDigest);
      expect(result.diskSize).toBe(diskSize);
      const disk = await readFile(join(dest, "disk.img"));
      expect(disk.length).toBe(diskSize);
      expect(disk.equals(original)).toBe(true);
      // Still sparse: about the data written (rounded to write grains), far below 48 MiB.
      expect(await allocated(join(dest, "disk.img"))).toBeLessThan(6 * MiB);
      const nvram = await readFile(join(dest, "nvram.bin"));
      expect(nvram.equals(await readFile(join(source, "nvram.bin")))).toBe(true);
      const pulled = await readJson(join(dest, "config.json"));
      expect({ ...pulled, macAddress: undefined }).toEqual({ ...config, macAddress: undefined });
      expect(pulled.macAddress).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
      expect(pulled.macAddress).not.toBe(config.macAddress);
      expect(await readFile(join(dest, ".manifest-digest"), "utf8")).toBe(pushed.manifestDigest);
    }
    // Nothing left behind: no temp dirs beside the VMs, no uncached blobs.
    expect((await readdir(work)).filter((name) => name.startsWith("."))).toEqual([]);
    expect(await new ImageCache(join(work, "cache")).list("hangar")).toEqual([]);

    // The all-zero pieces share one blob: 12 parts, fewer distinct disk blobs.
    const manifest = await (
      await fetch(`${registry.url}/v2/hangar/roundtrip/manifests/v1`, {
        headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
      })
    ).json();
    const diskDigests = manifest.layers.slice(1).map((l: { digest: string }) => l.digest);
    expect(diskDigests.length).toBe(12);
    expect(new Set(diskDigests).size).toBeLessThan(12);
    const distinct = new Map<string, number>(
      manifest.layers
        .concat(manifest.config)
        .map((l: { digest: string; size: number }) => [l.digest, l.size]),
    );
    expect(pushed.uploadedBytes).toBe([...distinct.values()].reduce((a, b) => a + b, 0));
    expect(pushed.uploadedBlobs).toBe(distinct.size);
    expect(registry.requests().filter((r) => r.method === "PATCH").length).toBeGreaterThan(3);
    expect(manifest.layers[3].annotations).toMatchObject({
      "org.opencontainers.image.title": "disk.img.part.2",
      "org.trycua.lume.part.number": "2",
      "org.trycua.lume.part.total": "12",
      "org.trycua.lume.part.offset": String(8 * MiB),
      "org.trycua.lume.content.uncompressed-size": String(4 * MiB),
    });
    expect(manifest.annotations).toMatchObject({
      "org.trycua.lume.os": "linux",
      "org.trycua.lume.cpu-count": "2",
      "org.trycua.lume.display": "1280x800",
      "org.trycua.lume.total-uncompressed-size": String(diskSize),
    });

    // Pushing the same VM again uploads nothing: the registry has every blob.
    const again = await pushVm({
      vmDir: source,
      imageName: "roundtrip",
      tags: ["again"],
      registry: registry.host,
      organization: "hangar",
      chunkSizeMb: 4,
      credentials: null,
    });
    expect(again.uploadedBlobs).toBe(0);
    expect(again.skippedBlobs).toBe(new Set(diskDigests).size + 2);
    expect((await readdir(source)).sort()).toEqual(["config.json", "disk.img", "nvram.bin"]);
  });

  it("pulls one image into two VMs at once", async () => {
    const pull = (dest: string, extra: Partial<Parameters<typeof pullImage>[0]> = {}) =>
      pullImage({
        image: "roundtrip:v1",
        registry: registry.host,
        organization: "hangar",
        destDir: join(work, dest),
        cacheDirectory: join(work, "cache-twins"),
        credentials: null,
        ...extra,
      });
    // The slow one fetches a blob at a time; the quick one starts after its first blob and ends first.
    let quick: Promise<unknown> | undefined;
    const slow = pull("twin-a", {
      concurrency: 1,
      onProgress: (p) => {
        if (p.blob && !quick) quick = pull("twin-b");
      },
    });
    const [a] = await Promise.all([
      slow,
      new Promise((resolve) => setTimeout(resolve, 10)).then(() => quick),
    ]);
    expect(a.manifestDigest).toMatch(/^sha256:/);
    const disk = await readFile(join(work, "twin-a", "disk.img"));
    expect(disk.equals(await readFile(join(work, "twin-b", "disk.img")))).toBe(true);
    // Caching is off: the blobs went when the last of the two pulls ended.
    expect(await readdir(join(work, "cache-twins", "ghcr", "hangar"))).toEqual([]);
  });

  it("pushes a single-layer image as lume's --single-layer does, and pulls it back", async () => {
    const source = join(work, "single-src");
    await makeVmDir(source, { diskSize: 6 * MiB, writes: [{ offset: 2 * MiB + 5, data: randomBytes(MiB) }] });
    await pushVm({
      vmDir: source,
      imageName: "single",
      tags: ["one"],
      registry: registry.host,
      organization: "hangar",
      singleLayer: true,
      credentials: null,
    });
    const manifest = await (
      await fetch(`${registry.url}/v2/hangar/single/manifests/one`, {
        headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
      })
    ).json();
    expect(manifest.layers).toHaveLength(2);
    expect(Object.keys(manifest.layers[1].annotations).sort()).toEqual([
      "org.opencontainers.image.title",
      "org.trycua.lume.content.uncompressed-digest",
      "org.trycua.lume.content.uncompressed-size",
    ]);
    expect(manifest.layers[1].annotations["org.opencontainers.image.title"]).toBe("disk.img");
    expect(manifest.annotations["org.trycua.lume.total-uncompressed-size"]).toBeUndefined();
    await pullImage({
      image: "single:one",
      registry: registry.host,
      organization: "hangar",
      destDir: join(work, "single-dst"),
      cacheDirectory: join(work, "cache"),
      credentials: null,
    });
    const pulled = await readFile(join(work, "single-dst", "disk.img"));
    expect(pulled.equals(await readFile(join(source, "disk.img")))).toBe(true);
  });

  it("keeps one cached version per image, serves pulls from it, and prunes it", async () => {
    const source = join(work, "cached-src");
    await makeVmDir(source, { diskSize: 8 * MiB, writes: [{ offset: MiB, data: randomBytes(MiB) }] });
    const cacheDirectory = join(work, "cache2");
    const push = (tag: string) =>
      pushVm({
        vmDir: source,
        imageName: "cached",
        tags: [tag],
        registry: registry.host,
        organization: "hangar",
        chunkSizeMb: 2,
        credentials: null,
      });
    const pull = (tag: string, dest: string) =>
      pullImage({
        image: `cached:${tag}`,
        registry: registry.host,
        organization: "hangar",
        destDir: join(work, dest),
        cacheDirectory,
        cachingEnabled: true,
        credentials: null,
      });
    const first = await push("one");
    await pull("one", "c1");
    const cache = new ImageCache(cacheDirectory);
    expect(await cache.list("hangar")).toEqual([
      { repository: "cached", imageId: first.manifestDigest.replace(":", "_").slice(0, 12) },
    ]);
    const gets = await registry.settledBlobGets();
    const second = await pull("one", "c2");
    expect(second.cachedBlobs).toBeGreaterThan(0);
    expect(second.downloadedBlobs).toBe(0);
    expect(await registry.settledBlobGets()).toBe(gets);

    // A new version of the image replaces the old one in the cache.
    await makeVmDir(source, { diskSize: 8 * MiB, writes: [{ offset: 0, data: randomBytes(MiB) }] });
    const newer = await push("two");
    await pull("two", "c3");
    expect(await cache.list("hangar")).toEqual([
      { repository: "cached", imageId: newer.manifestDigest.replace(":", "_").slice(0, 12) },
    ]);
    const pruned = await cache.prune();
    expect(pruned.images).toBe(1);
    expect(pruned.bytes).toBeGreaterThan(MiB);
    expect(await cache.list("hangar")).toEqual([]);
  });
});

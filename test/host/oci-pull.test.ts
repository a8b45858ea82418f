/**
 * Pulls of images written the way lume writes them (built here by hand, uploaded with plain
 * HTTP), and what a pull does when a blob is corrupt or the pull is interrupted.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pullImage, pushVm } from "../../src/host/images/oci/index.js";
import { blobDataPath, startRegistry, type TestRegistry } from "../support/registry.js";
import { allocated, makeVmDir, readJson } from "../support/vm-dir.js";

const MiB = 1024 * 1024;
const sha = (data: Buffer) => `sha256:${createHash("sha256").update(data).digest("hex")}`;
let registry: TestRegistry;
let work: string;

beforeAll(async () => {
  registry = await startRegistry();
  work = await mkdtemp(join(tmpdir(), "hangar-oci-pull-"));
});

afterAll(async () => {
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

async function putBlob(repo: string, data: Buffer) {
  const start = await fetch(`${registry.url}/v2/${repo}/blobs/uploads/`, { method: "POST" });
  expect(start.status).toBe(202);
  const location = new URL(start.headers.get("location")!, registry.url);
  location.searchParams.set("digest", sha(data));
  const put = await fetch(location, { method: "PUT", body: new Uint8Array(data) });
  expect(put.status).toBe(201);
  return sha(data);
}

async function putManifest(repo: string, tag: string, manifest: object) {
  const res = await fetch(`${registry.url}/v2/${repo}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
    body: JSON.stringify(manifest),
  });
  expect(res.status, await res.text()).toBe(201);
}

/** lume's config blob: sorted keys, lowercase `mediatype`. */
function lumeConfig(os: string) {
  return Buffer.from(
    JSON.stringify(
      {
        hardwareModel: "",
        machineIdentifier: "",
        mediatype: "application/vnd.trycua.lume.config.v1+json",
        os,
        storage: [
          { file: "nvram.bin", mediatype: "application/vnd.trycua.lume.nvram.v1" },
          { file: "disk.img", mediatype: "application/vnd.trycua.lume.disk.v1" },
        ],
      },
      null,
      2,
    ),
  );
}

async function lumeBase(repo: string, os: string) {
  const config = lumeConfig(os);
  const nvram = randomBytes(64 * 1024);
  return {
    nvram,
    config: {
      mediaType: "application/vnd.trycua.lume.config.v1+json",
      digest: await putBlob(repo, config),
      size: config.length,
      annotations: { "org.opencontainers.image.title": "config.json" },
    },
    nvramLayer: {
      mediaType: "application/vnd.trycua.lume.nvram.v1",
      digest: await putBlob(repo, nvram),
      size: nvram.length,
      annotations: { "org.opencontainers.image.title": "nvram.bin" },
    },
  };
}

const pull = (image: string, dest: string, extra: Partial<Parameters<typeof pullImage>[0]> = {}) =>
  pullImage({
    image,
    registry: registry.host,
    organization: "lume",
    destDir: join(work, dest),
    cacheDirectory: join(work, "cache"),
    credentials: null,
    ...extra,
  });

describe("images written by lume", () => {
  it("pulls a chunked image, a chunk reused at two offsets, into a sparse disk", async () => {
    const repo = "lume/chunked";
    const chunk = 4 * MiB;
    const parts = [
      Buffer.concat([randomBytes(MiB), Buffer.alloc(3 * MiB)]),
      Buffer.alloc(chunk), // all zeros
      Buffer.concat([Buffer.alloc(2 * MiB), Buffer.alloc(2 * MiB, 7)]),
      Buffer.concat([Buffer.alloc(2 * MiB), Buffer.alloc(2 * MiB, 7)]), // same as part 2
      randomBytes(MiB), // a short last part
    ];
    const total = parts.reduce((sum, p) => sum + p.length, 0);
    const base = await lumeBase(repo, "linux");
    const layers = [];
    for (let i = 0; i < parts.length; i++) {
      const packed = gzipSync(parts[i]);
      layers.push({
        mediaType: "application/vnd.trycua.lume.disk.v1",
        digest: await putBlob(repo, packed),
        size: packed.length,
        annotations: {
          "org.opencontainers.image.title": `disk.img.part.${i}`,
          "org.trycua.lume.content.uncompressed-size": String(parts[i].length),
          "org.trycua.lume.content.uncompressed-digest": sha(parts[i]),
          "org.trycua.lume.part.number": String(i),
          "org.trycua.lume.part.total": String(parts.length),
          "org.trycua.lume.part.offset": String(i * chunk),
          "org.trycua.lume.chunk.size": String(parts[i].length),
        },
      });
    }
    await putManifest(repo, "latest", {
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: base.config,
      // lume lists layers in part order; shuffle them to check the pull sorts by part number.
      layers: [base.nvramLayer, layers[3], layers[0], layers[4], layers[1], layers[2]],
      annotations: {
        "org.trycua.lume.upload-time": "2026-01-02T03:04:05Z",
        "org.trycua.lume.total-uncompressed-size": String(total),
        "org.trycua.lume.os": "linux",
        "org.trycua.lume.cpu-count": "4",
        "org.trycua.lume.memory-size": String(8 * 1024 ** 3),
        "org.trycua.lume.disk-size": String(total),
        "org.trycua.lume.display": "1024x768",
        "org.trycua.lume.network-mode": "nat",
      },
    });

    const result = await pull("chunked:latest", "chunked");
    const dir = join(work, "chunked");
    expect(result.diskSize).toBe(total);
    expect((await readFile(join(dir, "disk.img"))).equals(Buffer.concat(parts))).toBe(true);
    expect(await allocated(join(dir, "disk.img"))).toBeLessThanOrEqual(6 * MiB + 64 * 1024); // 1 + 2×2 + 1 MiB of data, of 17 MiB
    expect((await readFile(join(dir, "nvram.bin"))).equals(base.nvram)).toBe(true);
    const config = await readJson(join(dir, "config.json"));
    expect(config).toMatchObject({
      os: "linux",
      cpuCount: 4,
      memorySize: 8 * 1024 ** 3,
      diskSize: total,
      display: "1024x768",
      networkMode: "nat",
    });
    // The blob shared by parts 2 and 3 was fetched once.
    expect(await registry.settledBlobGets(layers[2].digest)).toBe(1);
  });

  it("pulls a single-layer image with lume's defaults for what the manifest leaves out", async () => {
    const repo = "lume/single";
    const disk = Buffer.concat([Buffer.alloc(3 * MiB), randomBytes(512 * 1024), Buffer.alloc(MiB)]);
    const packed = gzipSync(disk);
    const base = await lumeBase(repo, "darwin");
    await putManifest(repo, "v2", {
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: base.config,
      layers: [
        base.nvramLayer,
        {
          mediaType: "application/vnd.trycua.lume.disk.v1",
          digest: await putBlob(repo, packed),
          size: packed.length,
          annotations: {
            "org.opencontainers.image.title": "disk.img",
            "org.trycua.lume.content.uncompressed-size": String(disk.length),
            "org.trycua.lume.content.uncompressed-digest": sha(disk),
          },
        },
      ],
      annotations: { "org.trycua.lume.upload-time": "2026-01-02T03:04:05Z" },
    });
    await pull("single:v2", "single");
    const dir = join(work, "single");
    expect((await readFile(join(dir, "disk.img"))).equals(disk)).toBe(true);
    expect(await allocated(join(dir, "disk.img"))).toBeLessThanOrEqual(MiB);
    const config = await readJson(join(dir, "config.json"));
    expect(config).toMatchObject({
      os: "macOS",
      display: "1920x1080",
      networkMode: "nat",
      diskSize: disk.length,
    });
  });

  it("refuses a name:tag that is not one", async () => {
    await expect(pull("no-tag", "x")).rejects.toThrow(/Invalid image format\. Expected format: name:tag/);
    await expect(pull("missing:latest", "x")).rejects.toThrow(/Image lume\/missing:latest was not found/);
  });
});

describe("failures", () => {
  async function pushSample(name: string, parts: number) {
    const source = join(work, `${name}-src`);
    await makeVmDir(source, {
      diskSize: parts * MiB,
      writes: Array.from({ length: parts }, (_, i) => ({ offset: i * MiB, data: randomBytes(256 * 1024) })),
    });
    return pushVm({
      vmDir: source,
      imageName: name,
      tags: ["latest"],
      registry: registry.host,
      organization: "lume",
      chunkSizeMb: 1,
      credentials: null,
    });
  }

  it("rejects a corrupted blob with a clear error and leaves no VM", async () => {
    const pushed = await pushSample("corrupt", 3);
    const manifest = await (
      await fetch(`${registry.url}/v2/lume/corrupt/manifests/latest`, {
        headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
      })
    ).json();
    const victim = manifest.layers[2].digest as string;
    const path = blobDataPath(registry.storageDir, victim);
    const bytes = await readFile(path);
    bytes[bytes.length >> 1] ^= 0xff;
    await writeFile(path, bytes);

    await expect(pull("corrupt:latest", "corrupt")).rejects.toThrow(
      new RegExp(`blob ${victim} failed verification`),
    );
    await expect(stat(join(work, "corrupt"))).rejects.toThrow();
    expect((await readdir(work)).filter((name) => name.startsWith("."))).toEqual([]);
    expect(pushed.parts).toBe(3);
  });

  it("resumes an interrupted pull without fetching finished blobs again", async () => {
    const pushed = await pushSample("resume", 8);
    const distinct = pushed.parts + 2; // config + nvram + 8 distinct disk parts
    const controller = new AbortController();
    let finished = 0;
    const before = await registry.settledBlobGets();
    await expect(
      pull("resume:latest", "resume", {
        concurrency: 2,
        signal: controller.signal,
        onProgress: (p) => {
          if (p.blob) finished++;
          if (finished === 4) controller.abort();
        },
      }),
    ).rejects.toThrow(/cancelled/);
    await expect(stat(join(work, "resume"))).rejects.toThrow();
    const firstGets = (await registry.settledBlobGets()) - before;
    expect(firstGets).toBeLessThan(distinct);

    const result = await pull("resume:latest", "resume");
    expect(result.cachedBlobs).toBeGreaterThanOrEqual(4);
    expect(result.cachedBlobs + result.downloadedBlobs).toBe(distinct);
    expect((await registry.settledBlobGets()) - before - firstGets).toBe(result.downloadedBlobs);
    const disk = await readFile(join(work, "resume", "disk.img"));
    expect(disk.equals(await readFile(join(work, "resume-src", "disk.img")))).toBe(true);
  });
});

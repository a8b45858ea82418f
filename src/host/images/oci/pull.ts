/**
 * Pulls a lume-format image into a new VM directory.
 *
 * The manifest names a config blob, an nvram layer and gzip disk layers. Blobs are fetched in
 * parallel (bounded), each verified by streaming sha256 as it arrives, and kept by digest in the
 * image cache so that an interrupted pull resumes without fetching finished blobs again. Disk
 * layers are gunzipped on the way in (zlib runs in libuv's thread pool) and written at their
 * offsets with positional writes that skip zero runs, so disk.img stays sparse. Everything is
 * built in a temporary directory beside the destination and renamed into place only when
 * complete: a failed pull leaves no VM.
 */
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import {
  copyFile,
  type FileHandle,
  mkdir,
  open,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable, type Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { createGunzip } from "node:zlib";
import { makeDirectory } from "../../../os/make-directory.js";
import { HostError } from "../../errors.js";
import { DISK_FILE, MANIFEST_DIGEST_FILE, NVRAM_FILE, writeVmConfig } from "../../qemu/vm-config.js";
import { tempPath } from "../../qemu/vm-store.js";
import type { Credentials } from "./auth.js";
import { ImageCache } from "./cache.js";
import { type RegistryClient, transferClient } from "./client.js";
import { type DiskPart, diskPlan, isLumeManifest, type Manifest, MEDIA_TYPE } from "./format.js";
import { allOrFirstError, limiter } from "./limit.js";
import {
  checkOrganization,
  DEFAULT_ORGANIZATION,
  DEFAULT_REGISTRY,
  parseImageReference,
} from "./reference.js";
import { cancelled, type RetryOptions, withRetry } from "./retry.js";
import { SparseWriter } from "./sparse-writer.js";
import { DigestStream } from "./streams.js";
import { configFromImage } from "./vm-config.js";

export interface PullProgress {
  /** Compressed bytes of the image's distinct blobs fetched or found in the cache. */
  doneBytes: number;
  totalBytes: number;
  doneBlobs: number;
  totalBlobs: number;
  /** Set when a blob has just finished. */
  blob?: { digest: string; fromCache: boolean };
}

export interface PullOptions {
  /** `name:tag`. */
  image: string;
  registry?: string;
  organization?: string;
  /** The VM directory to create; it must not exist. */
  destDir: string;
  /** The cache root (settings' cacheDirectory). */
  cacheDirectory: string;
  /** Keep the image in the cache after the pull (settings' cachingEnabled). */
  cachingEnabled?: boolean;
  /** Undefined: from the environment; null: anonymous. */
  credentials?: Credentials | null;
  /** Blobs fetched at once (default 4). */
  concurrency?: number;
  signal?: AbortSignal;
  retry?: RetryOptions;
  onProgress?: (progress: PullProgress) => void;
}

export interface PullResult {
  vmDir: string;
  manifestDigest: string;
  /** Logical size of disk.img. */
  diskSize: number;
  downloadedBlobs: number;
  cachedBlobs: number;
  downloadedBytes: number;
}

/** The largest config blob accepted (lume's is a few hundred bytes). */
const CONFIG_LIMIT = 1024 * 1024;

interface BlobJob {
  digest: string;
  size: number;
  /** Disk parts this blob fills (empty for config and nvram). */
  parts: DiskPart[];
}

export async function pullImage(options: PullOptions): Promise<PullResult> {
  const ref = parseImageReference(options.image);
  const organization = checkOrganization(options.organization ?? DEFAULT_ORGANIZATION);
  const registry = options.registry ?? DEFAULT_REGISTRY;
  // The first blob that fails stops the others.
  const { client, stop, signal } = transferClient({
    registry,
    repository: `${organization}/${ref.name}`,
    credentials: options.credentials,
    signal: options.signal,
    retry: options.retry,
  });
  const destDir = options.destDir;
  if (await exists(destDir)) {
    throw new HostError("failed", `Virtual machine already exists with name: ${basename(destDir)}`);
  }

  const { manifest, digest: manifestDigest, raw } = await client.getManifest(ref.tag);
  if (!isLumeManifest(manifest)) {
    throw new HostError(
      "failed",
      `${options.image} is not in lume's current image format (media type ${MEDIA_TYPE.disk}); Hangar does not read lume's legacy format`,
    );
  }
  const plan = (() => {
    try {
      return diskPlan(manifest);
    } catch (error) {
      throw new HostError(
        "failed",
        `The manifest of ${options.image} is malformed: ${(error as Error).message}`,
      );
    }
  })();

  if (manifest.config.size > CONFIG_LIMIT) {
    throw new HostError(
      "failed",
      `The config blob of ${options.image} is ${manifest.config.size} bytes, more than a VM config can be`,
    );
  }
  const cache = new ImageCache(options.cacheDirectory);
  const blobDir = cache.manifestDir(organization, manifestDigest);
  const jobs = blobJobs(manifest, plan.parts);
  const progress: PullProgress = {
    doneBytes: 0,
    totalBytes: jobs.reduce((sum, job) => sum + job.size, 0),
    doneBlobs: 0,
    totalBlobs: jobs.length,
  };
  const report = (blob?: PullProgress["blob"]) => options.onProgress?.({ ...progress, blob });
  report();

  const temp = await tempPath(dirname(destDir), "pull-");
  let disk: FileHandle | undefined;
  const stats = { downloadedBlobs: 0, cachedBlobs: 0, downloadedBytes: 0 };
  pullsUsing.set(blobDir, (pullsUsing.get(blobDir) ?? 0) + 1);
  try {
    await makeDirectory(blobDir);
    await writeFile(join(blobDir, "manifest.json"), raw);
    await mkdir(temp);
    disk = await open(join(temp, DISK_FILE), "w+");
    if (plan.totalSize !== undefined) await disk.truncate(plan.totalSize);
    const fetcher = new BlobFetcher(client, cache, blobDir, options.retry, signal);
    const run = limiter(options.concurrency ?? 4);
    let extent = 0;
    await allOrFirstError(
      jobs.map((job) =>
        run(async () => {
          if (stop.signal.aborted) return;
          const onBytes = (n: number) => {
            progress.doneBytes += n;
            report();
          };
          const outcome = await fetcher.fetch(job, job.parts.length > 0 ? disk : undefined, onBytes);
          if (outcome.fromCache) {
            stats.cachedBlobs++;
            progress.doneBytes += job.size;
          } else {
            stats.downloadedBlobs++;
            stats.downloadedBytes += job.size;
          }
          extent = Math.max(extent, outcome.extent);
          progress.doneBlobs++;
          report({ digest: job.digest, fromCache: outcome.fromCache });
        }),
      ),
      stop,
    );
    const diskSize = plan.totalSize ?? extent;
    if (plan.totalSize === undefined) await disk.truncate(diskSize);
    await disk.sync();
    await disk.close();
    disk = undefined;

    const nvram = manifest.layers.find((layer) => layer.mediaType === MEDIA_TYPE.nvram);
    if (nvram) await copyFile(cache.blobPath(blobDir, nvram.digest), join(temp, NVRAM_FILE));
    else await writeFile(join(temp, NVRAM_FILE), ""); // a VM directory always has one
    const configBlob = await readFile(cache.blobPath(blobDir, manifest.config.digest), "utf8");
    let parsedConfig: unknown;
    try {
      parsedConfig = JSON.parse(configBlob);
    } catch {
      throw new HostError("failed", `The config blob of ${options.image} is not JSON`);
    }
    const config = configFromImage(parsedConfig, manifest, diskSize);
    await writeVmConfig(temp, config);
    await writeFile(join(temp, MANIFEST_DIGEST_FILE), manifestDigest);

    if (await exists(destDir)) {
      throw new HostError("failed", `Virtual machine already exists with name: ${basename(destDir)}`);
    }
    await rename(temp, destDir);
    if (options.cachingEnabled) await cache.markComplete(organization, ref.name, manifestDigest);
    else if (pullsUsing.get(blobDir) === 1) await rm(blobDir, { recursive: true, force: true });
    return { vmDir: destDir, manifestDigest, diskSize, ...stats };
  } catch (error) {
    await disk?.close().catch(() => undefined);
    await rm(temp, { recursive: true, force: true });
    if (options.signal?.aborted) throw cancelled(options.signal);
    throw error;
  } finally {
    const users = (pullsUsing.get(blobDir) ?? 1) - 1;
    if (users > 0) pullsUsing.set(blobDir, users);
    else pullsUsing.delete(blobDir);
  }
}

/** Pulls in progress per blob directory: an uncached image's blobs go when its last pull ends. */
const pullsUsing = new Map<string, number>();

/** The distinct blobs of a manifest; a disk blob lists every part (offset) it fills. */
function blobJobs(manifest: Manifest, parts: DiskPart[]): BlobJob[] {
  const jobs = new Map<string, BlobJob>();
  jobs.set(manifest.config.digest, { digest: manifest.config.digest, size: manifest.config.size, parts: [] });
  for (const layer of manifest.layers) {
    if (layer.mediaType !== MEDIA_TYPE.nvram) continue;
    if (!jobs.has(layer.digest))
      jobs.set(layer.digest, { digest: layer.digest, size: layer.size, parts: [] });
  }
  for (const part of parts) {
    const job = jobs.get(part.digest);
    if (job) job.parts.push(part);
    else jobs.set(part.digest, { digest: part.digest, size: part.compressedSize, parts: [part] });
  }
  return [...jobs.values()];
}

/** Fetches one blob into the cache (or finds it there), unpacking disk blobs into disk.img on the way. */
class BlobFetcher {
  constructor(
    private readonly client: RegistryClient,
    private readonly cache: ImageCache,
    private readonly dir: string,
    private readonly retry: RetryOptions | undefined,
    private readonly signal: AbortSignal | undefined,
  ) {}

  async fetch(
    job: BlobJob,
    disk: FileHandle | undefined,
    onBytes: (n: number) => void,
  ): Promise<{ fromCache: boolean; extent: number }> {
    const path = this.cache.blobPath(this.dir, job.digest);
    if (await exists(path)) {
      const extent = disk ? await this.unpack(job, disk, createReadStream(path)) : 0;
      return { fromCache: true, extent };
    }
    return withRetry(
      async () => {
        const partial = `${path}.partial-${randomBytes(4).toString("hex")}`;
        let counted = 0;
        const count = (n: number) => {
          counted += n;
          onBytes(n);
        };
        try {
          const res = await this.client.getBlob(job.digest, { retry: false });
          if (!res.body) throw new HostError("failed", `Blob ${job.digest} came without a body`);
          const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
          const hasher = new DigestStream(count);
          const saving = pipeline(body, hasher, createWriteStream(partial), { signal: this.signal });
          const unpacking = disk ? this.unpack(job, disk, hasher) : Promise.resolve(0);
          const [saved, unpacked] = await Promise.allSettled([saving, unpacking]);
          if (unpacked.status === "rejected" && unpacked.reason instanceof CorruptLayerError) {
            throw new HostError(
              "failed",
              `Downloaded blob ${job.digest} failed verification: ${unpacked.reason.message} (the registry holds damaged data)`,
            );
          }
          if (saved.status === "rejected") throw saved.reason;
          if (unpacked.status === "rejected") throw unpacked.reason;
          const extent = unpacked.value;
          const got = hasher.digest();
          if (got !== job.digest || hasher.bytes !== job.size) {
            throw new HostError(
              "failed",
              `Downloaded blob ${job.digest} failed verification: got ${hasher.bytes} bytes hashing to ${got}, expected ${job.size} bytes`,
            );
          }
          await rename(partial, path);
          return { fromCache: false, extent };
        } catch (error) {
          onBytes(-counted);
          await rm(partial, { force: true });
          throw error;
        }
      },
      { ...this.retry, signal: this.signal },
    );
  }

  /** Gunzips a disk blob into disk.img at every offset it fills; returns the furthest byte written. */
  private async unpack(job: BlobJob, disk: FileHandle, source: Readable): Promise<number> {
    const raw = new DigestStream();
    const writer = new SparseWriter(
      disk,
      job.parts.map((part) => part.offset),
    );
    try {
      await pipeline(source, createGunzip({ chunkSize: 256 * 1024 }), raw, writer as Writable, {
        signal: this.signal,
      });
    } catch (error) {
      if ((error as { code?: string }).code?.startsWith("Z_")) {
        throw new CorruptLayerError(
          `disk layer ${job.digest} is not valid gzip data (${(error as Error).message})`,
        );
      }
      throw error;
    }
    const part = job.parts[0];
    if (part.size !== undefined && raw.bytes !== part.size) {
      throw new HostError(
        "failed",
        `Disk layer ${job.digest} unpacked to ${raw.bytes} bytes, its annotation says ${part.size}`,
      );
    }
    if (part.uncompressedDigest !== undefined) {
      const got = raw.digest();
      if (got !== part.uncompressedDigest) {
        throw new HostError(
          "failed",
          `Disk layer ${job.digest} unpacked to content hashing to ${got}, its annotation says ${part.uncompressedDigest}`,
        );
      }
    }
    return Math.max(...job.parts.map((p) => p.offset + raw.bytes));
  }
}

/** A disk layer whose bytes do not unpack; a HostError so that it is never retried. */
class CorruptLayerError extends HostError {
  constructor(message: string) {
    super("failed", message);
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

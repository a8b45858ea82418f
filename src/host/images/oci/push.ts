/**
 * Pushes a VM directory (config.json, disk.img, nvram.bin) as a lume-format image, in three steps:
 * plan (check the request, read the VM), upload (blobs), publish (manifests).
 *
 * disk.img is cut into `chunkSizeMb` pieces. Each piece is gzipped (gzip-piece.ts: zlib in libuv's
 * thread pool, several pieces at once) into a spool file in the VM's push work directory while
 * both digests are computed on the way; memory holds a few 1 MiB blocks, never a piece.
 * All-zero pieces are recognised by reading and share one compressed blob.
 * Blobs the registry already has are skipped (HEAD); large ones go up in chunked PATCHes.
 * Then one manifest per tag, with lume's annotations.
 */

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, readFile, rm, stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { makeDirectory } from "../../../os/make-directory.js";
import { HostError } from "../../errors.js";
import { CONFIG_FILE, DISK_FILE, NVRAM_FILE, PUSH_WORK_DIR, readVmConfig } from "../../qemu/vm-config.js";
import type { Credentials } from "./auth.js";
import { type RegistryClient, transferClient } from "./client.js";
import { ANNOTATION, type Descriptor, type Manifest, MEDIA_TYPE } from "./format.js";
import { gzipPiece, isZeroRange, type PackedPiece } from "./gzip-piece.js";
import { allOrFirstError, limiter } from "./limit.js";
import {
  checkImageName,
  checkOrganization,
  checkTag,
  DEFAULT_ORGANIZATION,
  DEFAULT_REGISTRY,
} from "./reference.js";
import { cancelled, type RetryOptions } from "./retry.js";
import { counted } from "./streams.js";
import { configAnnotations, configBlob } from "./vm-config.js";

export interface PushProgress {
  phase: "compressing" | "uploading" | "manifest" | "done";
  /** Logical disk bytes compressed so far. */
  processedBytes: number;
  /** The disk's logical size. */
  totalBytes: number;
  /** Compressed bytes sent to the registry. */
  uploadedBytes: number;
  uploadedBlobs: number;
  skippedBlobs: number;
}

export interface PushOptions {
  vmDir: string;
  imageName: string;
  tags: string[];
  registry?: string;
  organization?: string;
  /** Disk piece size in MiB (default 512). */
  chunkSizeMb?: number;
  /** The whole disk as one layer titled `disk.img`, without part annotations (lume's `--single-layer`). */
  singleLayer?: boolean;
  /** Undefined: from the environment; null: anonymous. */
  credentials?: Credentials | null;
  /** Pieces compressed at once (default: the CPU count, 2 to 4). */
  concurrency?: number;
  /** Blobs uploaded at once (default 2). */
  uploadConcurrency?: number;
  signal?: AbortSignal;
  retry?: RetryOptions;
  /** Blob upload sizes (see RegistryClientOptions): one PUT up to the limit, PATCHes above. */
  upload?: { monolithicLimitBytes?: number; chunkBytes?: number };
  onProgress?: (progress: PushProgress) => void;
}

export interface PushResult {
  manifestDigest: string;
  tags: string[];
  diskSize: number;
  parts: number;
  uploadedBlobs: number;
  skippedBlobs: number;
  uploadedBytes: number;
}

/**
 * Pushes a VM: plan (check the request, read the VM), upload (config and UEFI variables, then the
 * disk piece by piece), publish (one manifest per tag). The work directory goes in every case.
 */
export async function pushVm(options: PushOptions): Promise<PushResult> {
  const plan = await planPush(options);
  // The first piece that fails stops the others.
  const { client, stop, signal } = transferClient({
    registry: options.registry ?? DEFAULT_REGISTRY,
    repository: `${plan.organization}/${plan.imageName}`,
    credentials: options.credentials,
    push: true,
    signal: options.signal,
    retry: options.retry,
    monolithicLimitBytes: options.upload?.monolithicLimitBytes,
    uploadChunkBytes: options.upload?.chunkBytes,
  });
  const progress: PushProgress = {
    phase: "compressing",
    processedBytes: 0,
    totalBytes: plan.diskSize,
    uploadedBytes: 0,
    uploadedBlobs: 0,
    skippedBlobs: 0,
  };
  const report = () => options.onProgress?.({ ...progress });
  report();
  const run: PushRun = {
    plan,
    options,
    signal,
    stop,
    progress,
    report,
    upload: blobUploader(client, progress, report),
    workDir: join(options.vmDir, PUSH_WORK_DIR),
  };
  await rm(run.workDir, { recursive: true, force: true });
  await makeDirectory(run.workDir);
  try {
    const [config, nvram] = await uploadSmallBlobs(run);
    const layers = await uploadDisk(run);
    progress.phase = "manifest";
    report();
    const manifestDigest = await publish(client, plan, config, [nvram, ...layers]);
    progress.phase = "done";
    report();
    return {
      manifestDigest,
      tags: plan.tags,
      diskSize: plan.diskSize,
      parts: plan.parts,
      uploadedBlobs: progress.uploadedBlobs,
      skippedBlobs: progress.skippedBlobs,
      uploadedBytes: progress.uploadedBytes,
    };
  } catch (error) {
    if (options.signal?.aborted) throw cancelled(options.signal);
    throw error;
  } finally {
    await rm(run.workDir, { recursive: true, force: true });
  }
}

type PushPlan = Awaited<ReturnType<typeof planPush>>;

/** Checks the request and reads what is pushed: the config, the disk's size and the UEFI variables. */
async function planPush(options: PushOptions) {
  const imageName = checkImageName(options.imageName);
  if (options.tags.length === 0) throw new HostError("invalid_params", "At least one tag is required");
  const tags = [...new Set(options.tags.map(checkTag))];
  const organization = checkOrganization(options.organization ?? DEFAULT_ORGANIZATION);
  const chunkSizeMb = options.chunkSizeMb ?? 512;
  if (!Number.isInteger(chunkSizeMb) || chunkSizeMb < 1 || chunkSizeMb > 16384) {
    throw new HostError(
      "invalid_params",
      `chunkSizeMb must be a whole number from 1 to 16384 (got ${chunkSizeMb})`,
    );
  }
  const singleLayer = options.singleLayer ?? false;
  const config = await readVmConfig(options.vmDir);
  const diskPath = join(options.vmDir, DISK_FILE);
  const diskSize = (await stat(diskPath).catch(() => missing(diskPath))).size;
  if (diskSize === 0) throw new HostError("failed", `${diskPath} is empty`);
  const chunkBytes = singleLayer ? diskSize : chunkSizeMb * 1024 * 1024;
  const nvram = await readFile(join(options.vmDir, NVRAM_FILE)).catch(() =>
    missing(join(options.vmDir, NVRAM_FILE)),
  );
  const parts = Math.ceil(diskSize / chunkBytes);
  return { imageName, tags, organization, singleLayer, config, diskPath, diskSize, chunkBytes, parts, nvram };
}

/** What the steps of one push share. */
interface PushRun {
  plan: PushPlan;
  options: PushOptions;
  signal: AbortSignal;
  stop: AbortController;
  progress: PushProgress;
  report(): void;
  upload: BlobUpload;
  workDir: string;
}

type BlobUpload = (
  digest: string,
  size: number,
  open: (start: number, end: number) => Readable,
) => Promise<void>;

/** Uploads blobs, each distinct digest once however many layers share it, counting what is sent. */
function blobUploader(client: RegistryClient, progress: PushProgress, report: () => void): BlobUpload {
  const uploads = new Map<string, Promise<void>>();
  return (digest, size, open) => {
    let pending = uploads.get(digest);
    if (!pending) {
      let sent = 0;
      pending = client
        .uploadBlob({
          digest,
          size,
          open: (start, end) => {
            if (start === 0) {
              // A new attempt starts over: take back what the failed one counted.
              progress.uploadedBytes -= sent;
              sent = 0;
            }
            return counted(open(start, end), (n) => {
              sent += n;
              progress.uploadedBytes += n;
              report();
            });
          },
        })
        .then((outcome) => {
          if (outcome === "skipped") progress.skippedBlobs++;
          else progress.uploadedBlobs++;
          report();
        });
      uploads.set(digest, pending);
    }
    return pending;
  };
}

/** The config and the UEFI variables, from memory; returns their descriptors. */
async function uploadSmallBlobs({ plan, upload }: PushRun): Promise<[Descriptor, Descriptor]> {
  const bufferBlob = (data: Buffer, mediaType: string, title: string) => {
    const descriptor: Descriptor = {
      mediaType,
      digest: `sha256:${createHash("sha256").update(data).digest("hex")}`,
      size: data.length,
      annotations: { [ANNOTATION.title]: title },
    };
    const sent = upload(descriptor.digest, data.length, (s, e) => Readable.from([data.subarray(s, e)]));
    return sent.then(() => descriptor);
  };
  return Promise.all([
    bufferBlob(configBlob(plan.config), MEDIA_TYPE.config, CONFIG_FILE),
    bufferBlob(plan.nvram, MEDIA_TYPE.nvram, NVRAM_FILE),
  ]);
}

/**
 * The disk, cut into pieces: each gzipped into a spool file of the work directory (all-zero pieces
 * of one length share one blob), uploaded, and described as a layer with lume's annotations.
 */
async function uploadDisk(run: PushRun): Promise<Descriptor[]> {
  const { plan, options, signal, progress, report, upload, workDir } = run;
  const disk = await open(plan.diskPath, "r");
  try {
    const compressConcurrency = options.concurrency ?? Math.min(4, Math.max(2, availableParallelism()));
    const compress = limiter(compressConcurrency);
    const inFlight = limiter(compressConcurrency + (options.uploadConcurrency ?? 2));
    const zeroPieces = new Map<number, Promise<PackedPiece>>();
    const spoolOf = (piece: PackedPiece) => (s: number, e: number) =>
      createReadStream(piece.path, { start: s, end: e - 1, highWaterMark: 1024 * 1024 });
    const onBytes = (n: number) => {
      progress.processedBytes += n;
      report();
    };
    const pack = async (part: number, offset: number, length: number) => {
      if (!(await isZeroRange(disk, offset, length, signal))) {
        return gzipPiece(disk, offset, length, join(workDir, `part-${part}.gz`), { signal, onBytes });
      }
      let shared = zeroPieces.get(length);
      if (!shared) {
        shared = gzipPiece(null, 0, length, join(workDir, `zero-${length}.gz`), { signal });
        zeroPieces.set(length, shared);
      }
      const packed = await shared;
      onBytes(length);
      return packed;
    };
    return await allOrFirstError(
      Array.from({ length: plan.parts }, (_, part) =>
        inFlight(async (): Promise<Descriptor> => {
          const offset = part * plan.chunkBytes;
          const length = Math.min(plan.chunkBytes, plan.diskSize - offset);
          const piece = await compress(() => pack(part, offset, length));
          await upload(piece.digest, piece.size, spoolOf(piece));
          if (!piece.path.includes("zero-")) await rm(piece.path, { force: true });
          return diskLayer(plan, piece, part, offset);
        }),
      ),
      run.stop,
    );
  } finally {
    await disk.close().catch(() => undefined);
  }
}

function diskLayer(plan: PushPlan, piece: PackedPiece, part: number, offset: number): Descriptor {
  return {
    mediaType: MEDIA_TYPE.disk,
    digest: piece.digest,
    size: piece.size,
    annotations: {
      [ANNOTATION.title]: plan.singleLayer ? DISK_FILE : `${DISK_FILE}.part.${part}`,
      [ANNOTATION.uncompressedSize]: String(piece.uncompressedSize),
      [ANNOTATION.uncompressedDigest]: piece.uncompressedDigest,
      ...(!plan.singleLayer && {
        [ANNOTATION.partNumber]: String(part),
        [ANNOTATION.partTotal]: String(plan.parts),
        [ANNOTATION.partOffset]: String(offset),
        [ANNOTATION.chunkSize]: String(piece.uncompressedSize),
      }),
    },
  };
}

/** One manifest per tag, with lume's annotations; returns the manifest's digest. */
async function publish(
  client: RegistryClient,
  plan: PushPlan,
  config: Descriptor,
  layers: Descriptor[],
): Promise<string> {
  const manifest: Manifest = {
    schemaVersion: 2,
    mediaType: MEDIA_TYPE.manifest,
    config,
    layers,
    annotations: {
      [ANNOTATION.uploadTime]: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
      ...(!plan.singleLayer && { [ANNOTATION.totalUncompressedSize]: String(plan.diskSize) }),
      ...configAnnotations(plan.config),
    },
  };
  const body = Buffer.from(JSON.stringify(manifest));
  let manifestDigest = "";
  for (const tag of plan.tags) manifestDigest = await client.putManifest(tag, body);
  return manifestDigest;
}

function missing(path: string): never {
  throw new HostError("not_found", `The VM has no ${path.split("/").pop()} (${path})`);
}

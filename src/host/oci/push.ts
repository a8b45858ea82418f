/**
 * Pushes a VM directory (config.json, disk.img, nvram.bin) as a lume-format image.
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
import { type FileHandle, open, readFile, rm, stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { makeDirectory } from "../../os/make-directory.js";
import { HostError } from "../errors.js";
import { CONFIG_FILE, DISK_FILE, NVRAM_FILE, PUSH_WORK_DIR, readVmConfig } from "../vm-config.js";
import { type Credentials, credentialsFromEnv } from "./auth.js";
import { RegistryClient } from "./client.js";
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

export async function pushVm(options: PushOptions): Promise<PushResult> {
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

  const credentials =
    options.credentials === null ? undefined : (options.credentials ?? credentialsFromEnv());
  // The first piece that fails stops the others.
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const client = new RegistryClient({
    registry: options.registry ?? DEFAULT_REGISTRY,
    repository: `${organization}/${imageName}`,
    credentials,
    push: true,
    signal,
    retry: options.retry,
    monolithicLimitBytes: options.upload?.monolithicLimitBytes,
    uploadChunkBytes: options.upload?.chunkBytes,
  });

  const progress: PushProgress = {
    phase: "compressing",
    processedBytes: 0,
    totalBytes: diskSize,
    uploadedBytes: 0,
    uploadedBlobs: 0,
    skippedBlobs: 0,
  };
  const report = () => options.onProgress?.({ ...progress });
  report();

  // One upload per distinct digest, however many layers share it.
  const uploads = new Map<string, Promise<void>>();
  const upload = (digest: string, size: number, open: (start: number, end: number) => Readable) => {
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
  const bufferBlob = (data: Buffer, mediaType: string, title: string): Descriptor => ({
    mediaType,
    digest: `sha256:${createHash("sha256").update(data).digest("hex")}`,
    size: data.length,
    annotations: { [ANNOTATION.title]: title },
  });

  const configBytes = configBlob(config);
  const configDescriptor = bufferBlob(configBytes, MEDIA_TYPE.config, CONFIG_FILE);
  const nvramDescriptor = bufferBlob(nvram, MEDIA_TYPE.nvram, NVRAM_FILE);
  const workDir = join(options.vmDir, PUSH_WORK_DIR);
  await rm(workDir, { recursive: true, force: true });
  await makeDirectory(workDir);
  let disk: FileHandle | undefined;
  try {
    await Promise.all([
      upload(configDescriptor.digest, configBytes.length, (s, e) =>
        Readable.from([configBytes.subarray(s, e)]),
      ),
      upload(nvramDescriptor.digest, nvram.length, (s, e) => Readable.from([nvram.subarray(s, e)])),
    ]);

    disk = await open(diskPath, "r");
    const count = Math.ceil(diskSize / chunkBytes);
    const compressConcurrency = options.concurrency ?? Math.min(4, Math.max(2, availableParallelism()));
    const uploadConcurrency = options.uploadConcurrency ?? 2;
    const compress = limiter(compressConcurrency);
    const inFlight = limiter(compressConcurrency + uploadConcurrency);
    const zeroPieces = new Map<number, Promise<PackedPiece>>();
    const spoolOf = (piece: PackedPiece) => (s: number, e: number) =>
      createReadStream(piece.path, { start: s, end: e - 1, highWaterMark: 1024 * 1024 });
    const openDisk = disk;

    const layers = await allOrFirstError(
      Array.from({ length: count }, (_, part) =>
        inFlight(async (): Promise<Descriptor> => {
          const offset = part * chunkBytes;
          const length = Math.min(chunkBytes, diskSize - offset);
          const onBytes = (n: number) => {
            progress.processedBytes += n;
            report();
          };
          const piece = await compress(async () => {
            if (await isZeroRange(openDisk, offset, length, signal)) {
              let shared = zeroPieces.get(length);
              if (!shared) {
                shared = gzipPiece(null, 0, length, join(workDir, `zero-${length}.gz`), {
                  signal,
                });
                zeroPieces.set(length, shared);
              }
              const packed = await shared;
              onBytes(length);
              return packed;
            }
            return gzipPiece(openDisk, offset, length, join(workDir, `part-${part}.gz`), {
              signal,
              onBytes,
            });
          });
          await upload(piece.digest, piece.size, spoolOf(piece));
          if (!piece.path.includes("zero-")) await rm(piece.path, { force: true });
          return {
            mediaType: MEDIA_TYPE.disk,
            digest: piece.digest,
            size: piece.size,
            annotations: {
              [ANNOTATION.title]: singleLayer ? "disk.img" : `disk.img.part.${part}`,
              [ANNOTATION.uncompressedSize]: String(piece.uncompressedSize),
              [ANNOTATION.uncompressedDigest]: piece.uncompressedDigest,
              ...(!singleLayer && {
                [ANNOTATION.partNumber]: String(part),
                [ANNOTATION.partTotal]: String(count),
                [ANNOTATION.partOffset]: String(offset),
                [ANNOTATION.chunkSize]: String(piece.uncompressedSize),
              }),
            },
          };
        }),
      ),
      stop,
    );

    progress.phase = "manifest";
    report();
    const manifest: Manifest = {
      schemaVersion: 2,
      mediaType: MEDIA_TYPE.manifest,
      config: configDescriptor,
      layers: [nvramDescriptor, ...layers],
      annotations: {
        [ANNOTATION.uploadTime]: new Date().toISOString().replace(/\.\d{3}Z$/, "Z"),
        ...(!singleLayer && { [ANNOTATION.totalUncompressedSize]: String(diskSize) }),
        ...configAnnotations(config),
      },
    };
    const body = Buffer.from(JSON.stringify(manifest));
    let manifestDigest = "";
    for (const tag of tags) manifestDigest = await client.putManifest(tag, body);
    progress.phase = "done";
    report();
    return {
      manifestDigest,
      tags,
      diskSize,
      parts: count,
      uploadedBlobs: progress.uploadedBlobs,
      skippedBlobs: progress.skippedBlobs,
      uploadedBytes: progress.uploadedBytes,
    };
  } catch (error) {
    if (options.signal?.aborted) throw cancelled(options.signal);
    throw error;
  } finally {
    await disk?.close().catch(() => undefined);
    await rm(workDir, { recursive: true, force: true });
  }
}

function missing(path: string): never {
  throw new HostError("not_found", `The VM has no ${path.split("/").pop()} (${path})`);
}

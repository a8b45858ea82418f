/**
 * Gzips one piece of a disk into a spool file, computing the digests of both sides on the way.
 *
 * The piece is read 1 MiB at a time into two reused buffers (so memory holds two blocks, never
 * the piece). zlib does the compression in libuv's thread pool. Runs of zero blocks, which make
 * up most of a sparse disk, are deflated with zlib's run-length strategy, which is several times
 * faster than the default one on zeros and just as small; data goes through the default
 * strategy and level, except runs that do not compress, which are stored (see DeflateMode).
 * The output is ordinary gzip that any gunzip reads.
 */
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { constants, createGzip, type Gzip, type ZlibParams } from "node:zlib";
import { HostError } from "../../errors.js";
import { cancelled } from "./retry.js";
import { DigestStream, isAllZero } from "./streams.js";

const BLOCK = 1024 * 1024;

export interface PackedPiece {
  path: string;
  digest: string;
  size: number;
  uncompressedDigest: string;
  uncompressedSize: number;
}

/**
 * Compresses bytes [offset, offset+length) of `disk` (or, with `disk` null, that many zeros)
 * into `path`.
 */
export async function gzipPiece(
  disk: FileHandle | null,
  offset: number,
  length: number,
  path: string,
  options: { signal?: AbortSignal; onBytes?: (n: number) => void } = {},
): Promise<PackedPiece> {
  const gzip = createGzip({ chunkSize: 256 * 1024 });
  const packed = new DigestStream();
  const writing = pipeline(gzip, packed, createWriteStream(path));
  const raw = createHash("sha256");
  const buffers = [Buffer.allocUnsafe(BLOCK), Buffer.allocUnsafe(BLOCK)];
  const inFlight: Promise<void>[] = [Promise.resolve(), Promise.resolve()];
  const mode = new DeflateMode(() => packed.bytes);
  let current = [constants.Z_DEFAULT_COMPRESSION, constants.Z_DEFAULT_STRATEGY];
  try {
    for (let at = 0, turn = 0; at < length; turn ^= 1) {
      if (options.signal?.aborted) throw cancelled(options.signal);
      await inFlight[turn]; // this buffer is free once zlib has taken it in
      const buffer = buffers[turn];
      const want = Math.min(BLOCK, length - at);
      let got = want;
      if (disk) got = (await disk.read(buffer, 0, want, offset + at)).bytesRead;
      else buffer.fill(0, 0, want);
      if (got === 0) throw new HostError("failed", `disk.img ended at byte ${offset + at}, before its size`);
      const block = buffer.subarray(0, got);
      raw.update(block);
      const zero = isAllZero(block);
      const wanted = mode.next(zero);
      if (wanted[0] !== current[0] || wanted[1] !== current[1]) {
        await setParams(gzip, wanted[0], wanted[1]);
        current = wanted;
      }
      if (!zero) mode.sawData(got);
      const taken = new Promise<void>((resolve, reject) => {
        gzip.write(block, (error) => (error ? reject(error) : resolve()));
      });
      taken.catch(() => undefined); // awaited later; never an unhandled rejection meanwhile
      inFlight[turn] = taken;
      at += got;
      options.onBytes?.(got);
    }
    await Promise.all(inFlight);
    gzip.end();
    await writing;
  } catch (error) {
    gzip.destroy(error as Error);
    await writing.catch(() => undefined);
    throw error;
  }
  return {
    path,
    digest: packed.digest(),
    size: packed.bytes,
    uncompressedDigest: `sha256:${raw.digest("hex")}`,
    uncompressedSize: length,
  };
}

/** Data bytes looked at before judging whether data compresses. */
const WINDOW = 8 * BLOCK;
/** Output/input ratio above which data counts as incompressible. */
const INCOMPRESSIBLE = 0.97;
/** Incompressible data stored before deflate is tried again. */
const REPROBE = 64 * BLOCK;

/**
 * Chooses zlib's level and strategy block by block: run-length for zero blocks; the default
 * level for data, or level 0 (stored) while the data does not compress (already compressed or
 * encrypted content), trying deflate again every 64 MiB.
 */
class DeflateMode {
  private dataLevel = constants.Z_DEFAULT_COMPRESSION;
  private windowIn = 0;
  private windowOutStart = 0;
  private storedIn = 0;

  /** @param outputBytes compressed bytes out so far (a little behind the input: it is measured over windows) */
  constructor(private readonly outputBytes: () => number) {}

  next(zero: boolean): [level: number, strategy: number] {
    return zero
      ? [constants.Z_DEFAULT_COMPRESSION, constants.Z_RLE]
      : [this.dataLevel, constants.Z_DEFAULT_STRATEGY];
  }

  sawData(bytes: number) {
    if (this.dataLevel === 0) {
      this.storedIn += bytes;
      if (this.storedIn >= REPROBE) this.dataLevel = constants.Z_DEFAULT_COMPRESSION;
      return;
    }
    if (this.windowIn === 0) this.windowOutStart = this.outputBytes();
    this.windowIn += bytes;
    if (this.windowIn < WINDOW) return;
    const ratio = (this.outputBytes() - this.windowOutStart) / this.windowIn;
    this.windowIn = 0;
    if (ratio > INCOMPRESSIBLE) {
      this.dataLevel = 0;
      this.storedIn = 0;
    }
  }
}

function setParams(gzip: Gzip, level: number, strategy: number): Promise<void> {
  return new Promise((resolve, reject) => {
    gzip.once("error", reject);
    // zlib streams have params() (Node's docs); the Gzip type does not declare it.
    (gzip as unknown as ZlibParams).params(level, strategy, () => {
      gzip.off("error", reject);
      resolve();
    });
  });
}

/** Reads a range until the first non-zero byte; true when there is none. */
export async function isZeroRange(disk: FileHandle, offset: number, length: number, signal?: AbortSignal) {
  const buffer = Buffer.allocUnsafe(4 * BLOCK);
  for (let at = 0; at < length; ) {
    if (signal?.aborted) throw cancelled(signal);
    const want = Math.min(buffer.length, length - at);
    const { bytesRead } = await disk.read(buffer, 0, want, offset + at);
    if (bytesRead === 0) return false;
    if (!isAllZero(buffer.subarray(0, bytesRead))) return false;
    at += bytesRead;
  }
  return true;
}

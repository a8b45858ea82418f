/** Stream pieces the image transfers share: hashing on the way through, and zero detection. */
import { createHash, type Hash } from "node:crypto";
import { type Readable, Transform, type TransformCallback } from "node:stream";

/** Passes bytes through unchanged while hashing and counting them. */
export class DigestStream extends Transform {
  private readonly hash: Hash = createHash("sha256");
  bytes = 0;

  constructor(private readonly onBytes?: (bytes: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onBytes?.(chunk.length);
    callback(null, chunk);
  }

  /** `sha256:<hex>`; call once, after the stream ended. */
  digest(): string {
    return `sha256:${this.hash.digest("hex")}`;
  }
}

const ZEROS = Buffer.alloc(1024 * 1024);

/** True when every byte of `buf` is zero (memcmp against a zero page, 1 MiB at a time). */
export function isAllZero(buf: Uint8Array): boolean {
  for (let at = 0; at < buf.length; at += ZEROS.length) {
    const end = Math.min(buf.length, at + ZEROS.length);
    if (Buffer.compare(buf.subarray(at, end), ZEROS.subarray(0, end - at)) !== 0) return false;
  }
  return true;
}

/** Passes bytes through, reporting how many went by. */
export class CountingStream extends Transform {
  constructor(private readonly onBytes: (bytes: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
    this.onBytes(chunk.length);
    callback(null, chunk);
  }
}

/** `source` seen through a CountingStream; errors of the source carry over. */
export function counted(source: Readable, onBytes: (bytes: number) => void): Readable {
  const counter = new CountingStream(onBytes);
  source.on("error", (error) => counter.destroy(error));
  return source.pipe(counter);
}

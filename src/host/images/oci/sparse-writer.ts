/**
 * Writes a stream of bytes into a file at one or more offsets with positional writes, skipping
 * runs of zeros so that the file stays sparse (the caller ftruncates it to its full size first).
 */
import type { FileHandle } from "node:fs/promises";
import { Writable } from "node:stream";
import { isAllZero } from "./streams.js";

/** Bytes gathered before looking for zeros and writing. */
const BLOCK = 1024 * 1024;
/** The smallest zero run left unwritten. */
const GRAIN = 64 * 1024;

export class SparseWriter extends Writable {
  private readonly block = Buffer.allocUnsafe(BLOCK);
  private filled = 0;
  /** Bytes of the stream flushed so far (the position of `block` in the stream). */
  private flushed = 0;
  /** Bytes actually written to the file (per target). */
  writtenBytes = 0;

  constructor(
    private readonly file: FileHandle,
    private readonly offsets: number[],
  ) {
    super({ highWaterMark: BLOCK });
  }

  /** Bytes received so far. */
  get receivedBytes(): number {
    return this.flushed + this.filled;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void) {
    this.take(chunk).then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void) {
    this.flush().then(() => callback(), callback);
  }

  private async take(chunk: Buffer) {
    let at = 0;
    while (at < chunk.length) {
      const n = Math.min(chunk.length - at, BLOCK - this.filled);
      chunk.copy(this.block, this.filled, at, at + n);
      this.filled += n;
      at += n;
      if (this.filled === BLOCK) await this.flush();
    }
  }

  private async flush() {
    const length = this.filled;
    if (length === 0) return;
    let run = -1;
    for (let grain = 0; grain <= length; grain += GRAIN) {
      const end = Math.min(length, grain + GRAIN);
      const zero = grain === length || isAllZero(this.block.subarray(grain, end));
      if (!zero && run < 0) run = grain;
      if (zero && run >= 0) {
        await this.writeRun(run, grain);
        run = -1;
      }
    }
    if (run >= 0) await this.writeRun(run, length);
    this.flushed += length;
    this.filled = 0;
  }

  private async writeRun(start: number, end: number) {
    for (const offset of this.offsets) {
      let done = 0;
      while (done < end - start) {
        const { bytesWritten } = await this.file.write(
          this.block,
          start + done,
          end - start - done,
          offset + this.flushed + start + done,
        );
        done += bytesWritten;
      }
    }
    this.writtenBytes += end - start;
  }
}

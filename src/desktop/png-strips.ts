/**
 * PNG screenshots encoded in horizontal strips, so that a screen where little changed costs little,
 * and a screen that changed everywhere is compressed on every core: each strip's rows are deflated on
 * their own (Node's zlib, in its thread pool) and only the strips whose pixels changed since the last
 * encoding are deflated again.
 *
 * The PNG is 8-bit RGB with filter type 0 (none) on every row, as sharp writes it with
 * `adaptiveFiltering: false`. Its one zlib stream is the strips' deflate data joined as pigz joins
 * its blocks: each strip's ends with a sync flush (an empty stored block: byte-aligned, not final),
 * an empty final block closes the stream, and the Adler-32 of the whole is combined from the
 * strips'. Each strip's compressed data and Adler-32 come from one zlib stream of its own, flushed
 * before it is finished (pngStream checks the bytes it cuts); anything unexpected gives `null`, and
 * the caller encodes the image whole.
 */
import zlib from "node:zlib";
import type { Rows } from "./backend.js";
import { overlaps } from "./jpeg-strips.js";

/** Rows per strip: 13 strips for a 1280x800 image, 17 for 1920x1080. */
export const PNG_STRIP_ROWS = 64;

interface Strip {
  /** Raw deflate data ending with a sync flush. */
  deflated: Buffer;
  adler: number;
  /** Its uncompressed length (filter bytes and pixels). */
  length: number;
}

/** What the last encoding left: its rows (with their filter bytes), to compare with, and its strips. */
export interface PngStripCache {
  /** Size and level; emptied once the cache is used (it then belongs to the next one). */
  key: string;
  filtered: Buffer;
  strips: Strip[];
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** The zlib header: deflate, 32 KiB window, no dictionary (a multiple of 31 as a 16-bit number). */
const ZLIB_HEADER = Buffer.from([0x78, 0x01]);
/** An empty final block with the fixed codes: BFINAL 1, BTYPE 01, end of block. */
const FINAL_BLOCK = Buffer.from([0x03, 0x00]);
const SYNC_MARKER = Buffer.from([0x00, 0x00, 0xff, 0xff]);
const IEND = Buffer.concat(chunk("IEND", []));

/**
 * The image (`rgb`: packed R,G,B rows) as a PNG, deflating only the strips that differ from
 * `previous` (same size and level); returns it with the cache for the next image, or null. When the
 * caller knows that the image differs from `previous`'s only in rows `changed`, only the strips that
 * meet them are compared.
 */
export async function encodePngInStrips(
  rgb: Buffer,
  width: number,
  height: number,
  level: number,
  previous: PngStripCache | null,
  changed?: Rows,
): Promise<{ data: Buffer; cache: PngStripCache } | null> {
  const rowBytes = width * 3;
  const stride = rowBytes + 1;
  const key = `${width}x${height}:${level}`;
  const reuse = previous?.key === key ? previous : null;
  // Its rows are about to change: whatever happens next, the old cache no longer describes them.
  if (reuse) reuse.key = "";
  // Filter bytes are all 0 (none), written once.
  const filtered = reuse?.filtered ?? Buffer.alloc(stride * height);
  const count = Math.ceil(height / PNG_STRIP_ROWS);
  const strips = await Promise.all(
    Array.from({ length: count }, async (_, i): Promise<Strip | null> => {
      const top = i * PNG_STRIP_ROWS;
      const rows = Math.min(PNG_STRIP_ROWS, height - top);
      if (reuse && changed && !overlaps(changed, top, rows)) return reuse.strips[i];
      let same = reuse !== null;
      for (let y = top; y < top + rows; y++) {
        const row = rgb.subarray(y * rowBytes, (y + 1) * rowBytes);
        const at = y * stride + 1;
        if (same && row.equals(filtered.subarray(at, at + rowBytes))) continue;
        same = false;
        row.copy(filtered, at);
      }
      if (same && reuse) return reuse.strips[i];
      return deflateStrip(filtered.subarray(top * stride, (top + rows) * stride), level);
    }),
  );
  if (strips.some((strip) => strip === null)) return null;
  const whole = strips as Strip[];
  let adler = 1;
  for (const strip of whole) adler = adler32Combine(adler, strip.adler, strip.length);
  const trailer = Buffer.alloc(4);
  trailer.writeUInt32BE(adler);
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  // 8 bits, colour type 2 (RGB), deflate, adaptive filtering method 0, no interlace.
  header.set([8, 2, 0, 0, 0], 8);
  const data = Buffer.concat([
    SIGNATURE,
    ...chunk("IHDR", [header]),
    ...chunk("IDAT", [ZLIB_HEADER, ...whole.map((strip) => strip.deflated), FINAL_BLOCK, trailer]),
    IEND,
  ]);
  return { data, cache: { key, filtered, strips: whole } };
}

/**
 * One strip as a zlib stream flushed before it is finished: its header, the strip's blocks ending
 * with a sync flush, an empty final block, the Adler-32. The blocks and the Adler-32 are kept; null
 * when the stream's end is not laid out that way.
 */
function deflateStrip(rows: Buffer, level: number): Promise<Strip | null> {
  return new Promise((resolve, reject) => {
    const stream = zlib.createDeflate({ level, chunkSize: 64 * 1024 });
    const chunks: Buffer[] = [];
    stream.on("data", (piece: Buffer) => chunks.push(piece));
    stream.on("error", reject);
    stream.on("end", () => {
      const out = Buffer.concat(chunks);
      const end = out.length - 6;
      const laidOut =
        end >= 6 &&
        out.subarray(end - 4, end).equals(SYNC_MARKER) &&
        out.subarray(end, end + 2).equals(FINAL_BLOCK);
      resolve(
        laidOut
          ? { deflated: out.subarray(2, end), adler: out.readUInt32BE(end + 2), length: rows.length }
          : null,
      );
    });
    stream.write(rows);
    // Ended only once flushed: an end() queued right behind the flush would finish the stream in
    // the flush's place.
    stream.flush(zlib.constants.Z_SYNC_FLUSH, () => stream.end());
  });
}

/** A PNG chunk's pieces: length, type, data, CRC-32 of type and data. */
function chunk(type: string, parts: Buffer[]): Buffer[] {
  const name = Buffer.from(type, "ascii");
  const length = parts.reduce((n, part) => n + part.length, 0);
  let crc = zlib.crc32(name);
  for (const part of parts) crc = zlib.crc32(part, crc);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(length);
  name.copy(head, 4);
  const tail = Buffer.alloc(4);
  tail.writeUInt32BE(crc);
  return [head, ...parts, tail];
}

const ADLER_BASE = 65_521;

/** The Adler-32 of two byte sequences one after the other, from theirs (zlib's adler32_combine). */
export function adler32Combine(first: number, second: number, secondLength: number): number {
  const rem = secondLength % ADLER_BASE;
  let sum1 = first & 0xffff;
  let sum2 = (rem * sum1) % ADLER_BASE;
  sum1 += (second & 0xffff) + ADLER_BASE - 1;
  sum2 += (first >>> 16) + (second >>> 16) + ADLER_BASE - rem;
  if (sum1 >= ADLER_BASE) sum1 -= ADLER_BASE;
  if (sum1 >= ADLER_BASE) sum1 -= ADLER_BASE;
  if (sum2 >= ADLER_BASE * 2) sum2 -= ADLER_BASE * 2;
  if (sum2 >= ADLER_BASE) sum2 -= ADLER_BASE;
  return ((sum2 << 16) | sum1) >>> 0;
}

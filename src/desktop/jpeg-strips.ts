/**
 * JPEG screenshots encoded in horizontal strips, so that a screen where little changed costs little:
 * only the strips whose pixels changed since the last encoding are encoded again.
 *
 * Each strip is a JPEG of its own (same size, quality and tables); the screenshot is their scans
 * joined with restart markers, under one header whose restart interval is a strip's MCU count. A
 * decoder resets its DC prediction at each restart marker, as each strip's encoder started afresh, so
 * the joined image decodes to exactly the pixels one encoding of the whole frame gives (baseline
 * JPEG, 4:2:0, fixed Huffman tables: nothing in a strip depends on another).
 *
 * Anything unexpected in a strip's JPEG (another marker layout, different tables) gives `null`, and
 * the caller encodes the frame whole.
 */
import type { RawImage, Rows } from "./backend.js";

/**
 * Rows per strip: a multiple of the 16-row MCU of 4:2:0. Each strip costs a sharp call (about 0.9 ms
 * of set-up): on a 1080p scene a changed line costs 2.2 ms to encode (6-8 ms whole), a frame that
 * changed everywhere 13-15 ms.
 */
export const STRIP_ROWS = 128;
const MCU = 16;

/**
 * Encodes rows of a frame (`rows` of its raw bytes, `height` rows from row `top`) as a standalone
 * baseline JPEG.
 */
export type StripEncoder = (rows: Buffer, height: number, top: number) => Promise<Buffer>;

interface Strip {
  /** The header segments before SOS (DQT, SOF0, DHT, …), identical in every strip but SOF's height. */
  head: Buffer;
  /** Where SOF0's height field is in `head`. */
  heightAt: number;
  sos: Buffer;
  scan: Buffer;
}

/** What the last encoding left: its pixels, to compare with, and its strips. */
export interface StripCache {
  /** Size, channels and variant; emptied once the cache is used (it then belongs to the next one). */
  key: string;
  reference: Buffer;
  strips: Strip[];
  /** The capture encoded: the strips whose rows did not change since it (`changedSince`) are not compared. */
  image: RawImage;
}

/**
 * The frame as one JPEG, encoding only the strips that differ from `previous` (same size, channels
 * and `variant`, e.g. the quality); returns it with the cache for the next frame, or null when the
 * strips cannot be joined.
 */
export async function encodeInStrips(
  raw: RawImage,
  variant: string,
  encodeStrip: StripEncoder,
  previous: StripCache | null,
): Promise<{ data: Buffer; cache: StripCache } | null> {
  const { width, height, channels } = raw;
  const rowBytes = width * channels;
  const key = `${width}x${height}x${channels}:${variant}`;
  const reuse = previous?.key === key ? previous : null;
  // Its reference is about to change: whatever happens next, the old cache no longer describes it.
  if (reuse) reuse.key = "";
  const reference = reuse?.reference ?? Buffer.allocUnsafeSlow(rowBytes * height);
  const changed = reuse ? raw.changedSince?.(reuse.image) : undefined;
  const count = Math.ceil(height / STRIP_ROWS);
  const strips: Array<Strip | null> = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const top = i * STRIP_ROWS;
      const rows = Math.min(STRIP_ROWS, height - top);
      if (reuse && changed && !overlaps(changed, top, rows)) return reuse.strips[i];
      const pixels = raw.data.subarray(top * rowBytes, (top + rows) * rowBytes);
      const kept = reference.subarray(top * rowBytes, (top + rows) * rowBytes);
      if (reuse && pixels.equals(kept)) return reuse.strips[i];
      const strip = parseStrip(await encodeStrip(pixels, rows, top));
      // The reference takes the new pixels only once they are encoded: a failure leaves it as it was.
      if (strip) pixels.copy(kept);
      return strip;
    }),
  );
  if (strips.some((strip) => strip === null)) return null;
  const whole = strips as Strip[];
  const data = join(whole, width, height, STRIP_ROWS);
  return data ? { data, cache: { key, reference, strips: whole, image: raw } } : null;
}

/**
 * The whole frame as one JPEG encoded in `parts` tall strips at once, one per core: libjpeg encodes a
 * frame on one thread, so a frame that changed everywhere costs about 5.5 ms in two parts on two cores
 * against 7.5 ms in one (1080p text, bench/step-profile.ts). Null when the parts cannot be joined.
 */
export async function encodeInParts(
  raw: RawImage,
  parts: number,
  encodeStrip: StripEncoder,
): Promise<Buffer | null> {
  const { width, height, channels } = raw;
  const rowBytes = width * channels;
  const rows = Math.ceil(height / parts / MCU) * MCU;
  const count = Math.ceil(height / rows);
  const strips = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const top = i * rows;
      const tall = Math.min(rows, height - top);
      return parseStrip(
        await encodeStrip(raw.data.subarray(top * rowBytes, (top + tall) * rowBytes), tall, top),
      );
    }),
  );
  if (strips.some((strip) => strip === null)) return null;
  return join(strips as Strip[], width, height, rows);
}

/** Whether rows `top` to `top + rows` meet `changed`. */
export function overlaps(changed: Rows, top: number, rows: number): boolean {
  return changed.height > 0 && changed.top < top + rows && top < changed.top + changed.height;
}

/**
 * How many of the frame's strips differ from those `previous` encoded (all of them when `previous`
 * cannot be used): a frame that changed nearly everywhere is cheaper encoded whole, in one call.
 */
export function changedStrips(raw: RawImage, variant: string, previous: StripCache | null): number {
  const { width, height, channels } = raw;
  const count = Math.ceil(height / STRIP_ROWS);
  if (!previous || previous.key !== `${width}x${height}x${channels}:${variant}`) return count;
  const changed = raw.changedSince?.(previous.image);
  const rowBytes = width * channels;
  let differ = 0;
  for (let i = 0; i < count; i++) {
    const top = i * STRIP_ROWS;
    const rows = Math.min(STRIP_ROWS, height - top);
    if (changed && !overlaps(changed, top, rows)) continue;
    const at = top * rowBytes;
    const end = (top + rows) * rowBytes;
    if (!raw.data.subarray(at, end).equals(previous.reference.subarray(at, end))) differ++;
  }
  return differ;
}

/** The segments of a baseline JPEG as sharp writes it: SOI, header segments, SOS, scan, EOI. */
function parseStrip(jpeg: Buffer): Strip | null {
  if (jpeg.length < 4 || jpeg[0] !== 0xff || jpeg[1] !== 0xd8) return null;
  if (jpeg[jpeg.length - 2] !== 0xff || jpeg[jpeg.length - 1] !== 0xd9) return null;
  let at = 2;
  let heightAt = -1;
  while (at + 4 <= jpeg.length) {
    if (jpeg[at] !== 0xff) return null;
    const marker = jpeg[at + 1];
    const length = jpeg.readUInt16BE(at + 2);
    if (marker === 0xda) {
      const end = at + 2 + length;
      if (heightAt < 0 || end > jpeg.length - 2) return null;
      return {
        head: jpeg.subarray(2, at),
        heightAt: heightAt - 2,
        sos: jpeg.subarray(at, end),
        scan: jpeg.subarray(end, jpeg.length - 2),
      };
    }
    // Baseline only (SOF0); a progressive or arithmetic-coded strip cannot be joined this way. A
    // restart interval of the strip's own would be one too many.
    if (
      (marker >= 0xc1 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) ||
      marker === 0xdd
    ) {
      return null;
    }
    if (marker === 0xc0) heightAt = at + 5;
    at += 2 + length;
  }
  return null;
}

/**
 * One JPEG of the strips (`rows` tall each, the last maybe less): the first strip's header with the
 * whole height and a restart interval.
 */
function join(strips: Strip[], width: number, height: number, rows: number): Buffer | null {
  const first = strips[0];
  const sameTables = (strip: Strip) =>
    strip.head.length === first.head.length &&
    strip.head.subarray(0, strip.heightAt).equals(first.head.subarray(0, first.heightAt)) &&
    strip.head.subarray(strip.heightAt + 2).equals(first.head.subarray(first.heightAt + 2)) &&
    strip.sos.equals(first.sos);
  if (!strips.every(sameTables)) return null;
  const interval = Math.ceil(width / MCU) * (rows / MCU);
  if (interval > 0xffff) return null;

  const head = Buffer.from(first.head);
  head.writeUInt16BE(height, first.heightAt);
  const restartInterval = Buffer.from([0xff, 0xdd, 0x00, 0x04, interval >> 8, interval & 0xff]);
  const parts: Buffer[] = [Buffer.from([0xff, 0xd8]), head, restartInterval, first.sos];
  strips.forEach((strip, i) => {
    if (i > 0) parts.push(Buffer.from([0xff, 0xd0 + ((i - 1) % 8)]));
    parts.push(strip.scan);
  });
  parts.push(Buffer.from([0xff, 0xd9]));
  return Buffer.concat(parts);
}

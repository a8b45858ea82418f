/**
 * A downscale that redoes only the rows whose source changed. An image of height H resized to height
 * h (libvips' linear reduce, as `sharp().resize(…, { fit: "fill", kernel: "linear" })`) maps each band
 * of P = H / gcd(H, h) source rows to Q = h / gcd(H, h) output rows, and a band of the source resized
 * on its own (with some bands around it for the kernel's reach) gives exactly the output rows of the
 * whole resize: the sampling positions repeat every band and every row is full width
 * (resize-bands.test.ts checks it, byte for byte). So only the bands whose source rows changed since
 * the last resize are resized again, into the kept output.
 */
import type { Sharp, SharpOptions } from "sharp";
import type { RawImage, Rows } from "./backend.js";
import { overlaps } from "./jpeg-strips.js";

/** Bands no taller than this are worth it; a longer band (an odd ratio) resizes the whole image. */
const MAX_BAND_ROWS = 256;

export interface ResizeCache {
  /** Sizes; emptied once the cache is used (it then belongs to the next one). */
  key: string;
  /** The source's pixels the output was made from, to compare with. */
  source: Buffer;
  output: Buffer;
  /** The capture resized, when the source says (`BandSource.image`). */
  image?: RawImage;
}

interface Size {
  width: number;
  height: number;
}

/** An image to resize: its pixels as compared (whole rows, any layout) and its R,G,B rows on demand. */
export interface BandSource extends Size {
  pixels: Buffer;
  /** Packed R,G,B of the whole image, of which at least rows `top` to `top + rows` are made. */
  rgb(top: number, rows: number): Buffer;
  /** The capture these pixels are: bands outside the rows it says changed are not compared. */
  image?: RawImage;
}

type SharpFactory = (input: Buffer, options: SharpOptions) => Sharp;

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

function resize(sharp: SharpFactory, rows: Buffer, from: Size, to: Size): Promise<Buffer> {
  return sharp(rows, { raw: { width: from.width, height: from.height, channels: 3 } })
    .resize(to.width, to.height, { fit: "fill", kernel: "linear" })
    .raw()
    .toBuffer();
}

/**
 * `from` resized to `to`, redoing only the bands whose pixels differ from `previous`'s source;
 * returns the output (kept in the cache: read it before the next call) and the cache for the next
 * call. Only the R,G,B rows that are resized are asked of `from`.
 */
export async function resizeInBands(
  sharp: SharpFactory,
  from: BandSource,
  to: Size,
  previous: ResizeCache | null,
): Promise<{ output: Buffer; cache: ResizeCache; redone: Rows }> {
  const inRow = from.pixels.length / from.height;
  const key = `${from.width}x${from.height}x${inRow}>${to.width}x${to.height}`;
  const reuse = previous?.key === key ? previous : null;
  if (reuse) reuse.key = "";
  const g = gcd(from.height, to.height);
  const band = from.height / g;
  const outBand = to.height / g;
  if (!reuse || band > MAX_BAND_ROWS) {
    const output = await resize(
      sharp,
      from.rgb(0, from.height),
      { width: from.width, height: from.height },
      to,
    );
    const cache = { key, source: Buffer.from(from.pixels), output, image: from.image };
    return { output, cache, redone: { top: 0, height: to.height } };
  }
  const { source, output } = reuse;
  const rgbRow = from.width * 3;
  const outRow = to.width * 3;
  const bands = g;
  // The kernel reaches a few source rows past a band's edges (linear: about the shrink factor plus
  // one): a changed band changes the output rows of `reach` bands around it too, and those are made
  // from `reach` more bands around them.
  const reach = Math.ceil((Math.ceil(band / outBand) + 3) / band);
  const changedRows = reuse.image && from.image?.changedSince?.(reuse.image);
  const runs: [number, number][] = [];
  for (let b = 0; b < bands; b++) {
    if (changedRows && !overlaps(changedRows, b * band, band)) continue;
    const rows = from.pixels.subarray(b * band * inRow, (b + 1) * band * inRow);
    const kept = source.subarray(b * band * inRow, (b + 1) * band * inRow);
    if (rows.equals(kept)) continue;
    rows.copy(kept);
    const last = runs.at(-1);
    // Runs whose reaches would overlap are resized together.
    if (last && b - last[1] <= 4 * reach) last[1] = b + 1;
    else runs.push([b, b + 1]);
  }
  let redone: Rows = { top: 0, height: 0 };
  await Promise.all(
    runs.map(async ([changed, changedEnd]) => {
      const first = Math.max(0, changed - reach);
      const end = Math.min(bands, changedEnd + reach);
      const top = Math.max(0, first - reach);
      const bottom = Math.min(bands, end + reach);
      const rgb = from.rgb(top * band, (bottom - top) * band);
      const part = await resize(
        sharp,
        rgb.subarray(top * band * rgbRow, bottom * band * rgbRow),
        { width: from.width, height: (bottom - top) * band },
        { width: to.width, height: (bottom - top) * outBand },
      );
      part.copy(
        output,
        first * outBand * outRow,
        (first - top) * outBand * outRow,
        (end - top) * outBand * outRow,
      );
      redone = spanning(redone, { top: first * outBand, height: (end - first) * outBand });
    }),
  );
  return { output, cache: { key, source, output, image: from.image }, redone };
}

/** The rows from the first of `a` and `b` to the last of either. */
function spanning(a: Rows, b: Rows): Rows {
  if (a.height === 0) return b;
  const top = Math.min(a.top, b.top);
  return { top, height: Math.max(a.top + a.height, b.top + b.height) - top };
}

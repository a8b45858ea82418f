/**
 * A downscale redone band by band gives exactly the bytes of the whole image resized, at the ratios
 * screens and model displays have (and an integer one, and a shrink over 2), wherever the change is.
 */
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { type BandSource, type ResizeCache, resizeInBands } from "./resize-bands.js";

/** Gradients with sharp-edged text-like spots: every kernel tap matters. */
function picture(width: number, height: number, seed: number): Buffer {
  const data = Buffer.alloc(width * height * 3);
  let state = seed;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      state = (state * 1103515245 + 12345) >>> 0;
      const ink = (x >> 2) % 3 === 0 && (y >> 3) % 2 === 0 ? state >>> 24 : 0;
      data[i] = (x + ink) & 255;
      data[i + 1] = (y + ink) & 255;
      data[i + 2] = ((x ^ y) + ink) & 255;
    }
  }
  return data;
}

/**
 * The image as the capture gives it: R,G,B,X pixels to compare, and R,G,B rows made on demand in a
 * buffer whose other rows are junk (so a band resized from rows it did not ask for shows).
 */
function source(rgb: Buffer, size: { width: number; height: number }): BandSource {
  const pixels = Buffer.alloc(size.width * size.height * 4);
  for (let i = 0, j = 0; i < rgb.length; i += 3, j += 4) {
    rgb.copy(pixels, j, i, i + 3);
    pixels[j + 3] = 0x7f;
  }
  return {
    ...size,
    pixels,
    rgb: (top, rows) => {
      const made = Buffer.alloc(rgb.length, 0xee);
      const row = size.width * 3;
      rgb.copy(made, top * row, top * row, (top + rows) * row);
      return made;
    },
  };
}

const whole = (rgb: Buffer, from: { width: number; height: number }, to: { width: number; height: number }) =>
  sharp(rgb, { raw: { ...from, channels: 3 } })
    .resize(to.width, to.height, { fit: "fill", kernel: "linear" })
    .raw()
    .toBuffer();

describe("resizeInBands", () => {
  const cases = [
    [1920, 1080, 1280, 800],
    [1920, 1080, 1366, 768],
    [1024, 768, 800, 600],
    [3840, 2160, 1280, 800],
    [640, 480, 320, 240],
  ] as const;
  for (const [w, h, ow, oh] of cases) {
    it(`${w}x${h} to ${ow}x${oh}: equal to the whole resize after changes at the top, middle and bottom`, async () => {
      const from = { width: w, height: h };
      const to = { width: ow, height: oh };
      const rgb = picture(w, h, 1);
      let cache: ResizeCache | null = null;
      const first = await resizeInBands(sharp, source(rgb, from), to, cache);
      expect(first.output.equals(await whole(rgb, from, to))).toBe(true);
      cache = first.cache;
      for (const rows of [
        [0, 2],
        [Math.floor(h / 2), Math.floor(h / 2) + 40],
        [h - 1, h],
        [3, h - 3],
      ]) {
        const [top, bottom] = rows;
        for (let y = top; y < bottom; y++) {
          for (let x = 0; x < w; x += 7) rgb[(y * w + x) * 3 + (y % 3)] ^= 0x5a;
        }
        const next: { output: Buffer; cache: ResizeCache } = await resizeInBands(
          sharp,
          source(rgb, from),
          to,
          cache,
        );
        cache = next.cache;
        expect(next.output.equals(await whole(rgb, from, to)), `rows ${top}-${bottom} changed`).toBe(true);
      }
    });
  }

  it("resizes the whole image again for an odd ratio, or another size", async () => {
    const from = { width: 300, height: 257 };
    const to = { width: 200, height: 171 };
    const rgb = picture(300, 257, 2);
    const first = await resizeInBands(sharp, source(rgb, from), to, null);
    rgb[5000] ^= 0xff;
    const second = await resizeInBands(sharp, source(rgb, from), to, first.cache);
    expect(second.output.equals(await whole(rgb, from, to))).toBe(true);
    const other = await resizeInBands(sharp, source(rgb, from), { width: 150, height: 100 }, second.cache);
    expect(other.output.equals(await whole(rgb, from, { width: 150, height: 100 }))).toBe(true);
  });
});

/**
 * PNG screenshots encoded in strips: a valid PNG (zlib's own inflate checks the joined stream and its
 * Adler-32) that decodes to exactly the pixels given, and only the strips whose rows changed are
 * deflated again.
 */
import { randomBytes } from "node:crypto";
import zlib from "node:zlib";
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { adler32Combine, encodePngInStrips, PNG_STRIP_ROWS } from "./png-strips.js";

// Not a multiple of the strip height: a short last strip.
const WIDTH = 333;
const HEIGHT = 2 * PNG_STRIP_ROWS + 21;

/** Flat colour with noisy text-like spots: compressible, not trivially. */
function image(seed: number): Buffer {
  const data = Buffer.alloc(WIDTH * HEIGHT * 3, 40);
  let state = seed;
  for (let i = 0; i < data.length; i += 7) {
    state = (state * 1103515245 + 12345) >>> 0;
    data[i] = state >>> 24;
  }
  return data;
}

/** The IDAT data of a PNG, inflated by zlib (which checks the Adler-32). */
function inflatedIdat(png: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString("ascii", at + 4, at + 8);
    const data = png.subarray(at + 8, at + 8 + length);
    expect(png.readUInt32BE(at + 8 + length)).toBe(zlib.crc32(data, zlib.crc32(type)));
    if (type === "IDAT") parts.push(data);
    at += 12 + length;
  }
  return zlib.inflateSync(Buffer.concat(parts));
}

async function decoded(png: Buffer) {
  const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

describe("encodePngInStrips", () => {
  it("makes a PNG of exactly the given pixels, unfiltered rows in one checked zlib stream", async () => {
    const pixels = image(1);
    const encoded = await encodePngInStrips(pixels, WIDTH, HEIGHT, 2, null);
    if (!encoded) throw new Error("not encoded");
    const back = await decoded(encoded.data);
    expect([back.width, back.height, back.channels]).toEqual([WIDTH, HEIGHT, 3]);
    expect(back.data.equals(pixels)).toBe(true);
    const rows = inflatedIdat(encoded.data);
    expect(rows.length).toBe(HEIGHT * (WIDTH * 3 + 1));
    const filters = Array.from({ length: HEIGHT }, (_, y) => rows[y * (WIDTH * 3 + 1)]);
    expect(filters.every((filter) => filter === 0)).toBe(true);
    // About the size of one stream over the whole (the strips lose little).
    const whole = await sharp(pixels, { raw: { width: WIDTH, height: HEIGHT, channels: 3 } })
      .png({ compressionLevel: 2, adaptiveFiltering: false })
      .toBuffer();
    expect(encoded.data.length).toBeLessThan(whole.length * 1.15);
  });

  it("deflates again only the strips whose rows changed, and decodes to the new pixels", async () => {
    const first = image(2);
    const one = await encodePngInStrips(first, WIDTH, HEIGHT, 2, null);
    if (!one) throw new Error("not encoded");
    const kept = [...one.cache.strips];
    const second = Buffer.from(first);
    // One pixel in the second strip.
    second[(PNG_STRIP_ROWS + 5) * WIDTH * 3 + 100] ^= 0xff;
    const two = await encodePngInStrips(second, WIDTH, HEIGHT, 2, one.cache);
    if (!two) throw new Error("not encoded");
    expect(two.cache.strips[0]).toBe(kept[0]);
    expect(two.cache.strips[1]).not.toBe(kept[1]);
    expect(two.cache.strips[2]).toBe(kept[2]);
    expect((await decoded(two.data)).data.equals(second)).toBe(true);
    inflatedIdat(two.data);
    // The old cache was handed over: it is not used again.
    const three = await encodePngInStrips(first, WIDTH, HEIGHT, 2, one.cache);
    expect(three?.cache.strips.every((strip, i) => strip !== two.cache.strips[i])).toBe(true);
    expect((await decoded(three?.data as Buffer)).data.equals(first)).toBe(true);
  });

  it("starts afresh for another size", async () => {
    const first = await encodePngInStrips(image(3), WIDTH, HEIGHT, 2, null);
    const small = randomBytes(17 * 9 * 3);
    const other = await encodePngInStrips(small, 17, 9, 2, first?.cache ?? null);
    if (!other) throw new Error("not encoded");
    expect((await decoded(other.data)).data.equals(small)).toBe(true);
  });
});

describe("adler32Combine", () => {
  it("gives the Adler-32 of the two sequences joined", () => {
    const a = randomBytes(70_000);
    const b = randomBytes(100_003);
    const adler = (bytes: Buffer) => {
      const z = zlib.deflateSync(bytes, { level: 0 });
      return z.readUInt32BE(z.length - 4);
    };
    expect(adler32Combine(adler(a), adler(b), b.length)).toBe(adler(Buffer.concat([a, b])));
    expect(adler32Combine(1, adler(b), b.length)).toBe(adler(b));
  });
});

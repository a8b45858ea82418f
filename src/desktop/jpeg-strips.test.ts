/**
 * JPEG screenshots encoded in strips: the joined image decodes to exactly the pixels of one encoding
 * of the whole frame, and only the strips whose pixels changed are encoded again.
 */
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import type { RawImage } from "./backend.js";
import { encodeInParts, encodeInStrips, STRIP_ROWS, type StripCache } from "./jpeg-strips.js";
import { JPEG_OPTIONS } from "./screenshot.js";

// Neither a multiple of 16 wide nor of the strip height high: partial MCUs on the right and below.
const WIDTH = 1366;
const HEIGHT = 770;

/** A busy RGBX frame: gradients, text-like noise and a fourth byte of padding. */
function frame(seed: number): RawImage {
  const data = Buffer.alloc(WIDTH * HEIGHT * 4);
  let state = seed;
  for (let y = 0; y < HEIGHT; y++) {
    for (let x = 0; x < WIDTH; x++) {
      const i = (y * WIDTH + x) * 4;
      state = (state * 1103515245 + 12345) >>> 0;
      const ink = (x >> 3) % 4 === 0 && (y >> 4) % 2 === 0 ? state >>> 24 : 0;
      data[i] = (x + ink) & 255;
      data[i + 1] = (y * 2 + ink) & 255;
      data[i + 2] = ((x ^ y) + ink) & 255;
      data[i + 3] = 0xff;
    }
  }
  return { width: WIDTH, height: HEIGHT, channels: 4, data };
}

function encoderCounting(calls: number[]) {
  return (rows: Buffer, height: number) => {
    calls.push(height);
    return sharp(rows, { raw: { width: WIDTH, height, channels: 4 } })
      .removeAlpha()
      .jpeg({ ...JPEG_OPTIONS, quality: 80 })
      .toBuffer();
  };
}

/** Strips no baseline decoder can join: progressive JPEGs. */
const progressive = (rows: Buffer, height: number) =>
  sharp(rows, { raw: { width: WIDTH, height, channels: 4 } })
    .removeAlpha()
    .jpeg({ quality: 80, progressive: true })
    .toBuffer();

const wholeJpeg = (raw: RawImage) =>
  sharp(raw.data, { raw: { width: WIDTH, height: HEIGHT, channels: 4 } })
    .removeAlpha()
    .jpeg({ ...JPEG_OPTIONS, quality: 80 })
    .toBuffer();

/** Whether two JPEGs decode to the same pixels. */
async function samePixels(a: Buffer, b: Buffer): Promise<boolean> {
  const [x, y] = await Promise.all(
    [a, b].map((jpeg) => sharp(jpeg).raw().toBuffer({ resolveWithObject: true })),
  );
  expect([x.info.width, x.info.height]).toEqual([WIDTH, HEIGHT]);
  expect([y.info.width, y.info.height]).toEqual([WIDTH, HEIGHT]);
  return x.data.equals(y.data);
}

describe("JPEG in strips", () => {
  it("decodes to the pixels of one encoding of the whole frame, and encodes again only what changed", async () => {
    const calls: number[] = [];
    const first = frame(1);
    const encoded = await encodeInStrips(first, "q80", encoderCounting(calls), null);
    expect(encoded).not.toBeNull();
    const strips = Math.ceil(HEIGHT / STRIP_ROWS);
    expect(calls.length).toBe(strips);
    expect(await samePixels(encoded!.data, await wholeJpeg(first))).toBe(true);

    // The same pixels again: nothing is encoded, the same image comes back.
    calls.length = 0;
    const again = await encodeInStrips(frame(1), "q80", encoderCounting(calls), encoded!.cache);
    expect(calls).toEqual([]);
    expect(again!.data.equals(encoded!.data)).toBe(true);

    // A change in rows 100-140 (strips 1 and 2): those two are encoded again.
    const changed = frame(1);
    changed.data.fill(0x40, 100 * WIDTH * 4, 140 * WIDTH * 4);
    calls.length = 0;
    const after = await encodeInStrips(changed, "q80", encoderCounting(calls), again!.cache);
    expect(calls).toEqual([STRIP_ROWS, STRIP_ROWS]);
    expect(await samePixels(after!.data, await wholeJpeg(changed))).toBe(true);
    // And it differs from the frame before the change (the comparison can fail).
    expect(await samePixels(after!.data, encoded!.data)).toBe(false);

    // The cache it replaced is spent: given again, it is not trusted.
    calls.length = 0;
    await encodeInStrips(frame(1), "q80", encoderCounting(calls), again!.cache);
    expect(calls.length).toBe(strips);
  });

  it("starts afresh for another quality or size", async () => {
    const calls: number[] = [];
    const { cache } = (await encodeInStrips(frame(2), "q80", encoderCounting(calls), null))!;
    calls.length = 0;
    await encodeInStrips(frame(2), "q60", encoderCounting(calls), cache as StripCache);
    expect(calls.length).toBe(Math.ceil(HEIGHT / STRIP_ROWS));
  });

  it("gives null for strips it cannot join (a progressive JPEG)", async () => {
    expect(await encodeInStrips(frame(3), "q80", progressive, null)).toBeNull();
  });

  it("encodes a whole frame in parts at once that decode to the pixels of one encoding", async () => {
    const raw = frame(4);
    const single = await wholeJpeg(raw);
    for (const parts of [2, 3]) {
      const calls: number[] = [];
      const joined = await encodeInParts(raw, parts, encoderCounting(calls));
      // Tall strips of whole MCU rows; the last takes the rest.
      const rows = Math.ceil(HEIGHT / parts / 16) * 16;
      expect(calls).toEqual([...Array(parts - 1).fill(rows), HEIGHT - rows * (parts - 1)]);
      expect(await samePixels(joined!, single)).toBe(true);
    }
    const other = frame(5);
    expect(await samePixels((await encodeInParts(other, 2, encoderCounting([])))!, single)).toBe(false);
  });

  it("gives null for parts it cannot join", async () => {
    expect(await encodeInParts(frame(3), 2, progressive)).toBeNull();
  });
});

/**
 * The WebAssembly pixel conversions give exactly what the functions they replace give: Node's
 * `Buffer#swap32`, sharp's `removeAlpha()` of a raw RGBX image, and that with each pixel's bytes
 * reversed (B,G,R); at any offset and for pixel
 * counts that are not whole groups, without touching bytes outside what they were asked to write.
 */
import { randomBytes } from "node:crypto";
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { PixelMemory } from "./pixels.js";

describe("PixelMemory", () => {
  it("swaps each 32-bit word as Buffer#swap32 does, in place", () => {
    for (const words of [1, 3, 4, 5, 1000, 1023]) {
      const bytes = randomBytes(words * 4);
      const memory = new PixelMemory(words * 4 + 8);
      memory.bytes.fill(0xaa);
      bytes.copy(memory.bytes, 4);
      memory.swap32(4, words * 4);
      expect(memory.bytes.subarray(4, 4 + words * 4)).toEqual(Buffer.from(bytes).swap32());
      expect(memory.bytes.subarray(0, 4)).toEqual(Buffer.alloc(4, 0xaa));
      expect(memory.bytes.subarray(4 + words * 4, words * 4 + 8)).toEqual(Buffer.alloc(4, 0xaa));
    }
  });

  it("packs RGBX pixels into RGB as sharp's removeAlpha does, from an odd offset", async () => {
    // 37x23: neither dimension a multiple of the 16-pixel groups.
    const [width, height] = [37, 23];
    const pixels = width * height;
    const rgbx = randomBytes(pixels * 4);
    const expected = await sharp(rgbx, { raw: { width, height, channels: 4 } })
      .removeAlpha()
      .raw()
      .toBuffer();
    const rgbAt = 1 + pixels * 4 + 63;
    const memory = new PixelMemory(rgbAt + pixels * 3 + 16);
    memory.bytes.fill(0x55);
    rgbx.copy(memory.bytes, 1);
    memory.rgbxToRgb(1, rgbAt, pixels);
    expect(memory.bytes.subarray(rgbAt, rgbAt + pixels * 3)).toEqual(expected);
    // The source is left as it was, and so is what lies before the output.
    expect(memory.bytes.subarray(1, 1 + pixels * 4)).toEqual(rgbx);
    expect(memory.bytes[rgbAt - 1]).toBe(0x55);
  });

  it("packs in place (output over its own input)", () => {
    const pixels = 1920 * 3 + 5;
    const rgbx = randomBytes(pixels * 4);
    const memory = new PixelMemory(pixels * 4);
    rgbx.copy(memory.bytes);
    memory.rgbxToRgb(0, 0, pixels);
    const expected = Buffer.alloc(pixels * 3);
    for (let i = 0; i < pixels; i++) rgbx.copy(expected, i * 3, i * 4, i * 4 + 3);
    expect(memory.bytes.subarray(0, pixels * 3)).toEqual(expected);
  });

  it("packs RGBX pixels into BGR, the bytes of each in reverse, at any offset and count", () => {
    for (const pixels of [1, 15, 16, 17, 37 * 23, 1920 * 2 + 7]) {
      const rgbx = randomBytes(pixels * 4);
      const bgrAt = 3 + pixels * 4 + 61;
      const memory = new PixelMemory(bgrAt + pixels * 3 + 64);
      memory.bytes.fill(0x55);
      rgbx.copy(memory.bytes, 3);
      memory.rgbxToBgr(3, bgrAt, pixels);
      const expected = Buffer.alloc(pixels * 3);
      for (let i = 0; i < pixels; i++) {
        expected[i * 3] = rgbx[i * 4 + 2];
        expected[i * 3 + 1] = rgbx[i * 4 + 1];
        expected[i * 3 + 2] = rgbx[i * 4];
      }
      expect(memory.bytes.subarray(bgrAt, bgrAt + pixels * 3)).toEqual(expected);
      expect(memory.bytes.subarray(3, 3 + pixels * 4)).toEqual(rgbx);
      expect(memory.bytes[bgrAt - 1]).toBe(0x55);
    }
  });

  it("refuses regions outside the memory, or an output that overtakes its input", () => {
    const memory = new PixelMemory(1024);
    expect(() => memory.swap32(1000, 32)).toThrow(RangeError);
    expect(() => memory.swap32(0, 6)).toThrow(/multiple of 4/);
    expect(() => memory.rgbxToRgb(0, 0, 300)).toThrow(RangeError);
    expect(() => memory.rgbxToRgb(0, 4, 100)).toThrow(/overlapping/);
    expect(() => memory.rgbxToBgr(0, 4, 100)).toThrow(/overlapping/);
  });
});

/** Pixel conversions for what nut-js captures (BGRA rows, possibly padded, alpha byte undefined). */

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/**
 * Converts BGRA pixels (rows of `stride` bytes) to tightly packed RGBA with alpha 255. Tightly
 * packed, aligned input is converted in place on 32-bit words (about 2 ms for 1920×1080) and
 * returned; anything else is copied byte by byte into a new buffer.
 */
export function bgraToRgba(src: Uint8Array, width: number, height: number, stride = width * 4): Buffer {
  if (stride === width * 4 && src.byteOffset % 4 === 0 && LITTLE_ENDIAN) {
    const words = new Uint32Array(src.buffer, src.byteOffset, width * height);
    for (let i = 0; i < words.length; i++) {
      // A little-endian word of B,G,R,A bytes reads 0xAARRGGBB; RGBA bytes read 0xAABBGGRR.
      const v = words[i];
      words[i] = 0xff000000 | ((v & 0xff) << 16) | (v & 0xff00) | ((v >>> 16) & 0xff);
    }
    return Buffer.from(src.buffer, src.byteOffset, width * height * 4);
  }
  const out = Buffer.allocUnsafe(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * stride + x * 4;
      const o = (y * width + x) * 4;
      out[o] = src[i + 2];
      out[o + 1] = src[i + 1];
      out[o + 2] = src[i];
      out[o + 3] = 255;
    }
  }
  return out;
}

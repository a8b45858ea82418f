/**
 * Pixel memory with conversions in WebAssembly SIMD, 16 bytes at a time, for the capture path:
 * the byte swap of each 32-bit pixel (the X server's B,G,R,X into X,R,G,B: what `Buffer#swap32`
 * does, about five times faster), R,G,B,X pixels into packed R,G,B (what sharp's `removeAlpha()`
 * does to a raw image, without a libvips pipeline of its own) and into packed B,G,R (the video
 * encoders' input). They only move bytes, so the results are exactly those of the functions they
 * replace (pixels.test.ts compares them).
 *
 * A `PixelMemory` is one WebAssembly memory, never grown: views of it stay valid as long as it is
 * referenced, and its pages are given back with it.
 */

/** The module, assembled by hand (see `assemble`): two functions over the memory it exports. */
let compiled: WebAssembly.Module | undefined;

/** Bytes past the end that a conversion may read or write (it works on whole 64-byte groups). */
const SLACK = 128;
const PAGE = 65_536;

export class PixelMemory {
  /** The whole memory as a Buffer. */
  readonly bytes: Buffer;
  readonly #swap: (at: number, groups: number) => void;
  readonly #rgb: (from: number, to: number, groups: number) => void;
  readonly #bgr: (from: number, to: number, groups: number) => void;

  /** A memory of at least `size` usable bytes. */
  constructor(readonly size: number) {
    compiled ??= new WebAssembly.Module(assemble());
    const memory = new WebAssembly.Memory({ initial: Math.ceil((size + SLACK) / PAGE) });
    const exports = new WebAssembly.Instance(compiled, { env: { memory } }).exports as {
      swap32: (at: number, groups: number) => void;
      rgbx_to_rgb: (from: number, to: number, groups: number) => void;
      rgbx_to_bgr: (from: number, to: number, groups: number) => void;
    };
    this.#swap = exports.swap32;
    this.#rgb = exports.rgbx_to_rgb;
    this.#bgr = exports.rgbx_to_bgr;
    this.bytes = Buffer.from(memory.buffer, 0, size);
  }

  /**
   * Swaps the bytes of each 32-bit word in `[at, at + length)` (length a multiple of 4), in place;
   * nothing outside it.
   */
  swap32(at: number, length: number) {
    this.#check(at, length);
    if (length % 4 !== 0) throw new RangeError("swap32 needs a multiple of 4 bytes");
    // Whole 16-byte groups in WebAssembly, the last words (at most three) here.
    const groups = Math.floor(length / 16);
    this.#swap(at, groups);
    if (groups * 16 < length) this.bytes.subarray(at + groups * 16, at + length).swap32();
  }

  /**
   * Writes `pixels` R,G,B,X pixels at `from` as packed R,G,B at `to` (`to` ≤ `from`, or the regions
   * apart): the fourth byte of each is dropped. It works on groups of 16 pixels: up to 15 pixels
   * after the last are packed too (from whatever bytes follow the input, into the 45 bytes after
   * the output), so the memory must have room there.
   */
  rgbxToRgb(from: number, to: number, pixels: number) {
    this.#pack(this.#rgb, from, to, pixels);
  }

  /**
   * As `rgbxToRgb`, into packed B,G,R (what ffmpeg's `bgr24` is, whose conversion to YUV 4:2:0 has
   * a path of its own, about twice as fast as from four bytes a pixel).
   */
  rgbxToBgr(from: number, to: number, pixels: number) {
    this.#pack(this.#bgr, from, to, pixels);
  }

  #pack(
    convert: (from: number, to: number, groups: number) => void,
    from: number,
    to: number,
    pixels: number,
  ) {
    this.#check(from, pixels * 4);
    this.#check(to, pixels * 3);
    if (to > from && to < from + pixels * 4) throw new RangeError("packing pixels: overlapping regions");
    convert(from, to, Math.ceil(pixels / 16));
  }

  #check(at: number, length: number) {
    if (
      !Number.isInteger(at) ||
      !Number.isInteger(length) ||
      at < 0 ||
      length < 0 ||
      at + length > this.size
    ) {
      throw new RangeError(`pixel memory: [${at}, ${at + length}) is outside its ${this.size} bytes`);
    }
  }
}

/** An unsigned LEB128 number. */
function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    out.push(byte);
  } while (n !== 0);
  return out;
}

const section = (id: number, body: number[]) => [id, ...leb(body.length), ...body];
const vector = (items: number[][]) => [...leb(items.length), ...items.flat()];
const name = (text: string) => [...leb(text.length), ...Buffer.from(text, "ascii")];

// Opcodes (WebAssembly 2.0 with fixed-width SIMD).
const BLOCK = 0x02;
const LOOP = 0x03;
const VOID = 0x40;
const END = 0x0b;
const BR = 0x0c;
const BR_IF = 0x0d;
const LOCAL_GET = 0x20;
const LOCAL_SET = 0x21;
const I32_CONST = 0x41;
const I32_EQZ = 0x45;
const I32_ADD = 0x6a;
const I32_SUB = 0x6b;
const I32 = 0x7f;
const V128 = 0x7b;
const v128Load = (offset: number) => [0xfd, 0x00, 0x00, ...leb(offset)];
const v128Store = (offset: number) => [0xfd, 0x0b, 0x00, ...leb(offset)];
const shuffle = (lanes: number[]) => [0xfd, 0x0d, ...lanes];
const get = (local: number) => [LOCAL_GET, local];
const set = (local: number) => [LOCAL_SET, local];
/** `local += by` (by < 64, a one-byte signed LEB). */
const add = (local: number, by: number) => [...get(local), I32_CONST, by, I32_ADD, ...set(local)];

/** `while (groups) { body; groups-- }` with `groups` in local `counter`. */
function countedLoop(counter: number, body: number[]): number[] {
  return [
    BLOCK,
    VOID,
    LOOP,
    VOID,
    ...get(counter),
    I32_EQZ,
    BR_IF,
    1,
    ...body,
    ...get(counter),
    I32_CONST,
    1,
    I32_SUB,
    ...set(counter),
    BR,
    0,
    END,
    END,
  ];
}

/**
 * The module's bytes: `swap32(at, groups)` reverses the bytes of each 32-bit word of `groups` 16-byte
 * groups at `at`; `rgbx_to_rgb(from, to, groups)` packs `groups` groups of 16 R,G,B,X pixels (64
 * bytes) at `from` into 48 bytes of R,G,B each at `to`. The memory is imported (`env.memory`).
 */
function assemble(): Uint8Array<ArrayBuffer> {
  const swapLanes = [3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12];
  // Locals: 0 = at, 1 = groups, 2 = a word group.
  const swap = countedLoop(1, [
    ...get(0),
    ...get(0),
    ...v128Load(0),
    ...set(2),
    ...get(2),
    ...get(2),
    ...shuffle(swapLanes),
    ...v128Store(0),
    ...add(0, 16),
  ]);
  // Locals: 0 = from, 1 = to, 2 = groups, 3-6 = the four input vectors.
  const loads = [0, 1, 2, 3].flatMap((i) => [...get(0), ...v128Load(16 * i), ...set(3 + i)]);
  /** Packs 16 pixels a round, each pixel's bytes taken in `order` (of its four). */
  const pack = (order: number[]) => {
    // Four input vectors (16 pixels) make three output vectors: output vector i takes its bytes
    // from input vectors i and i + 1 (lanes 16-31 are the second operand's).
    const lanes = (i: number) =>
      Array.from({ length: 16 }, (_, j) => {
        const out = 16 * i + j;
        return 4 * Math.floor(out / 3) + order[out % 3] - 16 * i;
      });
    const stores = [0, 1, 2].flatMap((i) => [
      ...get(1),
      ...get(3 + i),
      ...get(4 + i),
      ...shuffle(lanes(i)),
      ...v128Store(16 * i),
    ]);
    return countedLoop(2, [
      ...loads,
      ...stores,
      ...add(1, 48),
      ...get(0),
      I32_CONST,
      0xc0,
      0x00,
      I32_ADD,
      ...set(0),
    ]);
  };
  const rgb = pack([0, 1, 2]);
  const bgr = pack([2, 1, 0]);

  const body = (locals: number[][], code: number[]) => {
    const bytes = [...vector(locals), ...code, END];
    return [...leb(bytes.length), ...bytes];
  };
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00],
    // Types: 0 = (i32, i32) → (), 1 = (i32, i32, i32) → ().
    ...section(
      1,
      vector([
        [0x60, 2, I32, I32, 0],
        [0x60, 3, I32, I32, I32, 0],
      ]),
    ),
    // Imports: env.memory, at least one page.
    ...section(2, vector([[...name("env"), ...name("memory"), 0x02, 0x00, 0x01]])),
    ...section(3, vector([[0], [1], [1]])),
    ...section(
      7,
      vector([
        [...name("swap32"), 0x00, 0],
        [...name("rgbx_to_rgb"), 0x00, 1],
        [...name("rgbx_to_bgr"), 0x00, 2],
      ]),
    ),
    ...section(10, [
      ...leb(3),
      ...body([[1, V128]], swap),
      ...body([[4, V128]], rgb),
      ...body([[4, V128]], bgr),
    ]),
  ]);
}

/**
 * Base64 at the transport edge: the text of a result's `Bytes` written without one long string
 * (`Base64Bytes`, for `/cmd` events and `/ws` frames), and a body's long base64 text decoded the same
 * way (`decodeBase64Text`, for the body reader).
 *
 * Node's encoder makes a string, and a megabyte string lives outside V8's heap, where V8 counts it
 * towards its next full collection: 1 MiB reads back to back started a marking cycle every 15 reads
 * ("external memory pressure", 2-11 ms pauses). Encoded in 48 KiB slices, each a young string copied
 * into a reused buffer, they leave only young garbage, gone at the next scavenge.
 */

/**
 * Base64 text is decoded (and made) this many characters at a time: a multiple of 4, and a young
 * string (V8 puts strings above 128 KiB elsewhere).
 */
const SLICE = 64 * 1024;
/** Bytes encoded at a time: one `SLICE` of text. */
const ENCODE_SLICE = (SLICE / 4) * 3;
/** Encodings outside these sizes get a buffer of their own, not kept for reuse. */
const POOLED_MIN = 64 * 1024;
const POOLED_MAX = 4 * 1024 * 1024;
/** Buffers kept for reuse: one per reply being written, more only under concurrent reads. */
const POOL_SIZE = 2;
const pool: Buffer[] = [];
const pooled = (length: number) => length >= POOLED_MIN && length <= POOLED_MAX;

function takeBuffer(length: number): Buffer {
  if (!pooled(length)) return Buffer.allocUnsafe(length);
  const index = pool.findIndex((buffer) => buffer.length >= length);
  return index >= 0 ? pool.splice(index, 1)[0] : Buffer.allocUnsafeSlow(length);
}

/** Bytes encoded at once into a pooled buffer, so that the caller may reuse its own. */
export class Base64Bytes {
  #buffer: Buffer | undefined;
  readonly #length: number;

  constructor(bytes: Buffer) {
    this.#length = Math.ceil(bytes.length / 3) * 4;
    const buffer = takeBuffer(this.#length);
    let at = 0;
    for (let i = 0; i < bytes.length; i += ENCODE_SLICE) {
      at += buffer.write(bytes.subarray(i, i + ENCODE_SLICE).toString("base64"), at, "latin1");
    }
    this.#buffer = buffer;
  }

  /** The base64 text as ASCII bytes (it needs no JSON escaping); only until `release()`. */
  get encoded(): Buffer {
    if (!this.#buffer) throw new Error("Base64Bytes used after release()");
    return this.#buffer.subarray(0, this.#length);
  }

  get text(): string {
    return this.encoded.toString("latin1");
  }

  toJSON(): string {
    return this.text;
  }

  /** The encoding is no longer needed (its reply has been written): its buffer may be reused. */
  release() {
    const buffer = this.#buffer;
    this.#buffer = undefined;
    if (!buffer || !pooled(buffer.length)) return;
    if (pool.length < POOL_SIZE) {
      pool.push(buffer);
      return;
    }
    // Full: the largest are kept (chunks of one size come one after another).
    const smallest = pool.reduce((at, kept, i) => (kept.length < pool[at].length ? i : at), 0);
    if (pool[smallest].length < buffer.length) pool[smallest] = buffer;
  }
}

/** Releases the `Base64Bytes` fields of a command's result (see `Base64Bytes.release`). */
export function releaseBase64Fields(result: unknown) {
  if (typeof result !== "object" || result === null) return;
  for (const value of Object.values(result)) if (value instanceof Base64Bytes) value.release();
}

const EQUALS = 0x3d;

/**
 * Standard, canonical base64 given as ASCII bytes (a string cut out of a request body), decoded
 * without making one string of it: a string of a megabyte lives outside V8's heap, where it brings
 * the next full collection nearer; slices of 64 KiB are young strings, dropped at the next
 * scavenge. Undefined when it is not that: anything Node's decoder would skip or take as url-safe,
 * a misplaced `=`, padding bits that are not zero (so that encoding the bytes gives the text back).
 */
export function decodeBase64Text(text: Buffer): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0 || text.includes(0x2d) || text.includes(0x5f)) {
    return undefined;
  }
  const padding = text[text.length - 1] !== EQUALS ? 0 : text[text.length - 2] === EQUALS ? 2 : 1;
  const size = (text.length / 4) * 3 - padding;
  const bytes = Buffer.allocUnsafeSlow(size + padding);
  let written = 0;
  for (let at = 0; at < text.length; at += SLICE) {
    written += bytes.write(text.toString("latin1", at, Math.min(at + SLICE, text.length)), written, "base64");
  }
  if (written !== size) return undefined;
  const decoded = bytes.subarray(0, size);
  const last = decoded.subarray(size - (3 - padding)).toString("base64");
  return last === text.toString("latin1", text.length - 4) ? decoded : undefined;
}

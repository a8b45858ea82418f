/**
 * `Base64Bytes` (base64.ts): a result's bytes encoded in slices into a reused buffer.
 * The text must be exactly Node's base64 of the bytes at every size, and a buffer is reused only once
 * its encoding has been released (its reply written).
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Base64Bytes, releaseBase64Fields } from "./base64.js";

const SLICE = 48 * 1024;

describe("Base64Bytes", () => {
  it("is Node's base64 of the bytes, around slice boundaries and past the pooled size", () => {
    const sizes = [
      0,
      1,
      2,
      3,
      4,
      SLICE - 1,
      SLICE,
      SLICE + 1,
      2 * SLICE + 2,
      1 << 20,
      3 * (1 << 20) + 1,
      5 << 20,
    ];
    for (const size of sizes) {
      const bytes = randomBytes(size);
      const encoded = new Base64Bytes(bytes);
      expect(encoded.text, `${size} bytes`).toBe(bytes.toString("base64"));
      expect(JSON.stringify({ b: encoded })).toBe(JSON.stringify({ b: bytes.toString("base64") }));
      encoded.release();
    }
  });

  it("keeps an encoding intact while others are made and released, and reuses a released buffer", () => {
    const kept = randomBytes(1 << 20);
    const first = new Base64Bytes(kept);
    for (let i = 0; i < 5; i++) new Base64Bytes(randomBytes(1 << 20)).release();
    expect(first.text).toBe(kept.toString("base64"));

    // Held encodings of this size take every pooled buffer that fits one; the one released is then
    // the only one the next encoding of that size can get.
    const held = [first, ...[1, 2, 3].map(() => new Base64Bytes(randomBytes(1 << 20)))];
    const before = first.encoded.buffer;
    releaseBase64Fields({ content_b64: first, other: "text" });
    expect(() => first.encoded).toThrow(/after release/);
    first.release();
    const next = new Base64Bytes(randomBytes(1 << 20));
    // (Compared by identity: a failing toBe would print two megabyte buffers.)
    expect(next.encoded.buffer === before).toBe(true);
    for (const encoding of held.slice(1)) encoding.release();
    next.release();
  });
});

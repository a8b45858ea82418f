/**
 * The push compressor: whatever mix of zeros, text and incompressible data a piece holds, the
 * output is plain gzip of exactly that piece with the right digests; text is really compressed.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import { gzipPiece } from "./gzip-piece.js";

const MiB = 1024 * 1024;
let work: string;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "hangar-gzip-piece-"));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

function text(bytes: number): Buffer {
  const words = ["alpha", "kernel", "package", "river", "config", "seven", "usr", "lib", "share"];
  const parts: string[] = [];
  let size = 0;
  while (size < bytes) {
    const word = `${words[Math.floor(Math.random() * words.length)]}${Math.floor(Math.random() * 100)} `;
    parts.push(word);
    size += word.length;
  }
  return Buffer.from(parts.join("")).subarray(0, bytes);
}

it("compresses a mixed piece into gzip that unpacks to the same bytes", async () => {
  const layout = [text(4 * MiB), Buffer.alloc(2 * MiB), randomBytes(12 * MiB + 12345), text(6 * MiB)];
  const content = Buffer.concat(layout);
  const path = join(work, "disk.img");
  const file = await open(path, "w+");
  await file.write(Buffer.alloc(MiB, 1), 0, MiB, 0); // bytes outside the piece
  await file.write(content, 0, content.length, MiB);
  const piece = await gzipPiece(file, MiB, content.length, join(work, "piece.gz"));
  await file.close();

  const packed = await readFile(join(work, "piece.gz"));
  expect(gunzipSync(packed).equals(content)).toBe(true);
  expect(piece.size).toBe(packed.length);
  expect(piece.digest).toBe(`sha256:${createHash("sha256").update(packed).digest("hex")}`);
  expect(piece.uncompressedDigest).toBe(`sha256:${createHash("sha256").update(content).digest("hex")}`);
  expect(piece.uncompressedSize).toBe(content.length);
  // Text compresses (to well under half), random data is stored (a little over its size).
  expect(packed.length).toBeLessThan(12 * MiB + 12345 + 5 * MiB);
  expect(packed.length).toBeGreaterThan(12 * MiB);
});

it("compresses zeros without a disk", async () => {
  const piece = await gzipPiece(null, 0, 3 * MiB + 7, join(work, "zeros.gz"));
  const unpacked = gunzipSync(await readFile(join(work, "zeros.gz")));
  expect(unpacked.length).toBe(3 * MiB + 7);
  expect(unpacked.every((b) => b === 0)).toBe(true);
  expect(piece.size).toBeLessThan(16 * 1024);
});

/**
 * A tar archive (POSIX ustar) written to a response while it is read from disk: one 512-byte header
 * per file, its bytes padded to 512, two empty blocks at the end. Only what the server archives itself
 * (its own short file names, regular files), so none of tar's long-name extensions are needed. A file
 * that grows while it is sent (an open trajectory) is sent at the size it had when listed.
 */
import { open } from "node:fs/promises";
import type { Writable } from "node:stream";

const BLOCK = 512;
const CHUNK = 256 * 1024;

export interface TarFile {
  /** The name in the archive, at most 100 bytes. */
  name: string;
  path: string;
  size: number;
}

/** The ustar header of a regular file. */
export function tarHeader(name: string, size: number, mtime = Date.now()): Buffer {
  const header = Buffer.alloc(BLOCK);
  if (Buffer.byteLength(name) > 100) throw new Error(`tar: name too long: ${name}`);
  const octal = (value: number, length: number, at: number) =>
    header.write(`${value.toString(8).padStart(length - 1, "0")}\0`, at, length, "ascii");
  header.write(name, 0, 100, "utf8");
  octal(0o644, 8, 100);
  octal(0, 8, 108);
  octal(0, 8, 116);
  octal(size, 12, 124);
  octal(Math.floor(mtime / 1000), 12, 136);
  header.write("        ", 148, 8, "ascii");
  header.write("0", 156, 1, "ascii");
  header.write("ustar\0", 257, 6, "ascii");
  header.write("00", 263, 2, "ascii");
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "ascii");
  return header;
}

/** Writes the archive of `files` to `out` (waiting while it is full); ends it. */
export async function writeTar(out: Writable, files: TarFile[]): Promise<void> {
  const send = (chunk: Buffer) =>
    new Promise<void>((resolve, reject) => {
      if (out.destroyed) return reject(new Error("the client went away"));
      out.write(chunk, (err) => (err ? reject(err) : resolve()));
    });
  const buffer = Buffer.allocUnsafe(CHUNK);
  for (const file of files) {
    await send(tarHeader(file.name, file.size));
    const handle = await open(file.path, "r");
    try {
      let sent = 0;
      while (sent < file.size) {
        const { bytesRead } = await handle.read(buffer, 0, Math.min(CHUNK, file.size - sent), sent);
        // A file that shrank: the rest is zeros, so the archive stays well formed.
        const piece = bytesRead > 0 ? buffer.subarray(0, bytesRead) : Buffer.alloc(file.size - sent);
        await send(Buffer.from(piece));
        sent += piece.length;
      }
    } finally {
      await handle.close();
    }
    const pad = (BLOCK - (file.size % BLOCK)) % BLOCK;
    if (pad > 0) await send(Buffer.alloc(pad));
  }
  await send(Buffer.alloc(BLOCK * 2));
  await new Promise<void>((resolve) => out.end(resolve));
}

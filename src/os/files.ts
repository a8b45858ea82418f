/**
 * The file service: what the file commands (commands/file.ts), `/files`, OSWorld's file routes and
 * envd's files share. Reads open a file without waiting (`O_NONBLOCK`: a FIFO without a writer
 * cannot hold a thread of the pool) and read it whole, in a range, or streamed to a socket. Writes
 * go to a temporary file beside the target, renamed over it once complete
 * (`common/atomic-write.ts`): whole from memory, or streamed from a body that the caller's limit
 * has already counted (`http/body.ts` `limitedBody`). Paths from requests go through `expandPath`
 * (`paths.ts`): `~` expanded, NUL bytes refused. Failures are OS errors; `describeOsError` turns
 * them into a `CommandError` that names the path, which each transport maps to its wire.
 */
import { constants, createWriteStream, write, writev } from "node:fs";
import { dirname } from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { writeAtomicWith, writeFileAtomic } from "../common/atomic-write.js";
import { fileKind, notRegularFile } from "../common/errors.js";
import {
  type FileInfo,
  type FileSystem,
  localDescriptor,
  localFileSystem,
  type OpenFile,
  writeAll,
} from "../common/file-system.js";
import { makeDirectory } from "./make-directory.js";

export { expandHome, expandPath } from "./paths.js";

/** Streamed reads: fewer, bigger writes to the socket (the default 64 KiB halves the throughput). */
const SEND_CHUNK = 1024 * 1024;
/** What a streamed write may queue for the disk: socket chunks pile up and go out in one `writev`. */
const WRITE_BUFFER = 4 * 1024 * 1024;

/** Opens `abs` for reading without waiting, with what `fstat` says of it; the caller closes it. */
export async function openFile(
  abs: string,
  files: FileSystem = localFileSystem,
): Promise<{ handle: OpenFile; info: FileInfo }> {
  const handle = await files.open(abs, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    return { handle, info: await handle.stat() };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Opens a regular file for reading, and only that: a directory is EISDIR, a FIFO, device or socket
 * is refused (reading one could wait forever), naming `path` (as the client gave it).
 */
export async function openRegularFile(
  abs: string,
  path: string,
  files: FileSystem = localFileSystem,
): Promise<{ handle: OpenFile; size: number }> {
  const { handle, info } = await openFile(abs, files);
  if (info.isFile()) return { handle, size: info.size };
  await handle.close().catch(() => undefined);
  if (info.isDirectory()) throw Object.assign(new Error(`EISDIR: ${path}`), { code: "EISDIR" });
  throw notRegularFile(fileKind(info), path);
}

/** Reads up to `wanted` bytes at `offset` into `buffer`; returns how many were read (fewer at the end). */
export async function readInto(
  handle: OpenFile,
  buffer: Buffer,
  wanted: number,
  offset: number,
): Promise<number> {
  let read = 0;
  while (read < wanted) {
    const { bytesRead } = await handle.read(buffer, read, wanted - read, offset + read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  return read;
}

/**
 * Reads a file of unknown size (`/proc`'s say 0) a `buffer` at a time from `offset`, up to `wanted`
 * bytes; returns a copy.
 */
export async function readToEnd(
  handle: OpenFile,
  buffer: Buffer,
  wanted: number,
  offset = 0,
): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  while (total < wanted) {
    const read = await readInto(handle, buffer, Math.min(buffer.length, wanted - total), offset + total);
    if (read === 0) break;
    parts.push(Buffer.from(buffer.subarray(0, read)));
    total += read;
  }
  return Buffer.concat(parts, total);
}

/**
 * Bytes `start`..`end` of an open file as a stream of chunks; the file is closed when the stream
 * ends or is destroyed.
 */
export function fileStream(handle: OpenFile, start: number, end: number): Readable {
  async function* chunks() {
    try {
      for (let position = start; position <= end; ) {
        const buffer = Buffer.allocUnsafe(Math.min(SEND_CHUNK, end + 1 - position));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
        if (bytesRead === 0) throw new Error("The file became shorter while it was being sent");
        position += bytesRead;
        yield buffer.subarray(0, bytesRead);
      }
    } finally {
      await handle.close().catch(() => undefined);
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

/** Where streamed bytes go: a socket's response (`write` with a callback, then `end`). */
export interface ByteSink {
  write(chunk: Buffer, done: (err?: Error | null) => void): unknown;
  end(done: () => void): unknown;
}

/**
 * Sends bytes `start`..`end` of the file to `out` and ends it, with two buffers used in turn: a
 * buffer is read into again once the socket has taken its previous content. A fresh buffer per read
 * (as a file stream does) costs page faults on every megabyte and leaves the allocator fragmented.
 */
export async function sendRange(handle: OpenFile, out: ByteSink, start: number, end: number) {
  const buffers = [Buffer.allocUnsafeSlow(SEND_CHUNK), Buffer.allocUnsafeSlow(SEND_CHUNK)];
  const written: Promise<void>[] = [Promise.resolve(), Promise.resolve()];
  let position = start;
  for (let turn = 0; position <= end; turn ^= 1) {
    await written[turn];
    const buffer = buffers[turn];
    const { bytesRead } = await handle.read(buffer, 0, Math.min(SEND_CHUNK, end + 1 - position), position);
    if (bytesRead === 0) throw new Error("The file became shorter while it was being sent");
    position += bytesRead;
    written[turn] = new Promise<void>((resolve, reject) =>
      out.write(buffer.subarray(0, bytesRead), (err) => (err ? reject(err) : resolve())),
    );
    // Awaited before the buffer is used again; a failure meanwhile is not an unhandled rejection.
    written[turn].catch(() => undefined);
  }
  await Promise.all(written);
  await new Promise<void>((resolve) => out.end(resolve));
}

export interface WriteOptions {
  /** Make the missing parent directories first. */
  parents?: boolean;
  /** Whose file system (default this process's). */
  files?: FileSystem;
}

/** Replaces the file at `abs` with `data`, atomically. */
export async function writeWhole(abs: string, data: string | Uint8Array, options: WriteOptions = {}) {
  if (options.parents) await makeDirectory(dirname(abs), options.files);
  await writeFileAtomic(abs, data, { files: options.files });
}

/**
 * The file system calls of a write stream on a descriptor it borrows from a `FileHandle`: its own
 * `close` does nothing. A stream that pipeline destroys (a client gone mid-upload) closes its
 * descriptor whatever `autoClose` says; the handle then closed the same number again, by then
 * perhaps another socket's or file's, which it cut (a test's next upload failed with EPIPE).
 */
const BORROWED_DESCRIPTOR = {
  write,
  writev,
  close: (_fd: number, done: (err: NodeJS.ErrnoException | null) => void) => done(null),
};

/**
 * Streams `source` to a temporary file beside `abs` and renames it over the target once `source`
 * ends; resolves with the number of bytes written. A source that fails (a limit passed, a client
 * gone) leaves the target as it was and no temporary file; its error is the rejection. The source is
 * destroyed on any failure.
 */
export async function writeStreamed(
  abs: string,
  source: Readable,
  files: FileSystem = localFileSystem,
): Promise<number> {
  let written = 0;
  await writeAtomicWith(
    abs,
    async (handle) => {
      const fd = localDescriptor(handle);
      if (fd !== undefined) {
        const out = createWriteStream("", {
          fd,
          autoClose: false,
          highWaterMark: WRITE_BUFFER,
          fs: BORROWED_DESCRIPTOR,
        });
        await pipeline(source, out);
        written = out.bytesWritten;
      } else {
        const out = fileSink(handle);
        await pipeline(source, out);
        written = out.bytesWritten;
      }
    },
    { files },
  ).catch((err) => {
    // A source (a request piped into it) that the write never read stops flowing: the caller can drop the rest.
    source.destroy();
    throw err;
  });
  return written;
}

/**
 * A stream into a file that another process holds (the command user's file worker): what piles up
 * while a write is under way goes in the next one, in order.
 */
function fileSink(file: OpenFile): Writable & { bytesWritten: number } {
  const sink = new Writable({
    highWaterMark: WRITE_BUFFER,
    writev(chunks, done) {
      const data = Buffer.concat(chunks.map((c) => c.chunk as Buffer));
      writeAll(file, data, position).then(() => {
        position += data.length;
        sink.bytesWritten = position;
        done();
      }, done);
    },
  }) as Writable & { bytesWritten: number };
  let position = 0;
  sink.bytesWritten = 0;
  return sink;
}

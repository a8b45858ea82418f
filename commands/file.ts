/** File commands (reference §9.8): paths get `~` expanded and are made absolute. */
import { z } from "zod";
import { appendFileAllOrNothing } from "../src/common/atomic-write.js";
import { CommandError, describeOsError } from "../src/common/errors.js";
import type { FileSystem, OpenFile } from "../src/common/file-system.js";
import { Bytes, base64Param, bytesField } from "../src/computer/core/bytes.js";
import { defineCommand } from "../src/computer/core/command.js";
import { expandPath, openRegularFile, readInto, readToEnd, writeWhole } from "../src/os/files.js";

/** A path from a request: checked here, once (not empty, no NUL byte); `~` is expanded when used. */
const pathParam = z
  .string()
  .min(1, "must not be empty")
  .refine((path) => !path.includes("\0"), "contains a NUL byte");
const pathOnly = z.object({ path: pathParam });
const empty = z.object({});
const exists = z.object({ exists: z.boolean() });

/** Largest file `read_text` returns whole; bigger files are read with `read_bytes` in chunks. */
const MAX_WHOLE_READ = 64 * 1024 * 1024;

/** Runs `fn` on the expanded path and turns OS errors into messages that name the path. */
async function onPath<T>(path: string, fn: (abs: string) => Promise<T>): Promise<T> {
  const abs = expandPath(path);
  try {
    return await fn(abs);
  } catch (err) {
    throw describeOsError(err, path);
  }
}

const isKind = (kind: "file" | "directory") => (path: string, files: FileSystem) =>
  onPath(path, (abs) =>
    files.stat(abs).then(
      (s) => ({ exists: kind === "file" ? s.isFile() : s.isDirectory() }),
      () => ({ exists: false }),
    ),
  );

export const fileExists = defineCommand({
  name: "file_exists",
  description: "Whether a regular file exists at the path (false for directories).",
  params: pathOnly,
  result: exists,
  handler: ({ path }, ctx) => isKind("file")(path, ctx.files),
});

export const directoryExists = defineCommand({
  name: "directory_exists",
  description: "Whether a directory exists at the path.",
  params: pathOnly,
  result: exists,
  handler: ({ path }, ctx) => isKind("directory")(path, ctx.files),
});

export const listDir = defineCommand({
  name: "list_dir",
  aliases: ["ls"],
  description: "The names of the entries of a directory, sorted.",
  params: pathOnly,
  result: z.object({ files: z.array(z.string()) }),
  handler: ({ path }, ctx) => onPath(path, async (abs) => ({ files: (await ctx.files.readdir(abs)).sort() })),
});

export const readText = defineCommand({
  name: "read_text",
  aliases: ["read_file"],
  description: "The whole content of a text file, as UTF-8 (files up to 64 MiB; use read_bytes for more).",
  params: pathOnly,
  result: z.string(),
  handler: ({ path }, ctx) =>
    onPath(path, async (abs) => {
      const { handle, size } = await openRegularFile(abs, path, ctx.files);
      try {
        if (size > MAX_WHOLE_READ) {
          throw new CommandError("failed", `File is too large for read_text (${size} bytes): use read_bytes`);
        }
        // A file that says it is empty (/proc's) is read to its end, up to the same limit.
        const data =
          size === 0
            ? await readToEnd(handle, Buffer.allocUnsafe(READ_BUFFER_SIZE), MAX_WHOLE_READ)
            : await readWholeFile(handle, size);
        return data.toString("utf8");
      } finally {
        await handle.close().catch(() => undefined);
      }
    }),
});

/** A file of known size read whole into one buffer (fewer, larger reads than a growing list). */
async function readWholeFile(handle: OpenFile, size: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(size);
  return buffer.subarray(0, await readInto(handle, buffer, size, 0));
}

export const writeText = defineCommand({
  name: "write_text",
  aliases: ["write_file"],
  description: "Creates or replaces a text file atomically (the parent directory must exist).",
  params: z.object({ path: pathParam, content: z.string() }),
  result: empty,
  handler: ({ path, content }, ctx) =>
    onPath(path, async (abs) => {
      await writeWhole(abs, content, { files: ctx.files });
      return {};
    }),
});

/**
 * Chunked downloads read 1 MiB after 1 MiB: those reads reuse a few buffers instead of allocating
 * one each time (fewer garbage collections while a large file streams out).
 */
const READ_BUFFER_SIZE = 1024 * 1024;
const spareReadBuffers: Buffer[] = [];

function takeReadBuffer(size: number): Buffer {
  if (size > READ_BUFFER_SIZE) return Buffer.allocUnsafe(size);
  return spareReadBuffers.pop() ?? Buffer.allocUnsafeSlow(READ_BUFFER_SIZE);
}

function giveBackReadBuffer(buffer: Buffer) {
  if (buffer.length === READ_BUFFER_SIZE && spareReadBuffers.length < 2) spareReadBuffers.push(buffer);
}

export const readBytes = defineCommand({
  name: "read_bytes",
  description: "Reads `length` bytes from `offset` (to the end of the file when length is null), base64.",
  params: z.object({
    path: pathParam,
    offset: z.number().int().min(0).default(0),
    length: z.number().int().min(0).max(MAX_WHOLE_READ).nullish(),
  }),
  result: z.object({ content_b64: bytesField("the bytes read, base64") }),
  handler: ({ path, offset, length }, ctx) =>
    onPath(path, async (abs) => {
      const { handle, size } = await openRegularFile(abs, path, ctx.files);
      try {
        // Files of /proc and /sys say they are empty: read them up to the length asked (or to their end).
        const available = size === 0 ? MAX_WHOLE_READ : Math.max(0, size - offset);
        const wanted = Math.min(length ?? available, available);
        if (wanted > MAX_WHOLE_READ) {
          throw new CommandError("failed", `Too much to read at once (${wanted} bytes): pass a length`);
        }
        const buffer = takeReadBuffer(Math.min(wanted, size === 0 ? READ_BUFFER_SIZE : wanted));
        let handedOver = false;
        try {
          if (size === 0) return { content_b64: new Bytes(await readToEnd(handle, buffer, wanted, offset)) };
          const read = await readInto(handle, buffer, wanted, offset);
          // The buffer comes back once the transport has encoded the bytes (else it is simply dropped).
          handedOver = true;
          const release = () => giveBackReadBuffer(buffer);
          return { content_b64: new Bytes(buffer.subarray(0, read), undefined, { release }) };
        } finally {
          if (!handedOver) giveBackReadBuffer(buffer);
        }
      } finally {
        // Closed while the reply goes out: a trip through the thread pool the client need not wait for.
        handle.close().catch(() => undefined);
      }
    }),
});

export const writeBytes = defineCommand({
  name: "write_bytes",
  description:
    "Writes base64 data to a file: replaces it atomically, or with `append` adds to its end (all or nothing).",
  params: z.object({
    path: pathParam,
    content_b64: base64Param("the bytes to write"),
    append: z.boolean().nullish(),
  }),
  result: empty,
  handler: ({ path, content_b64: data, append }, ctx) =>
    onPath(path, async (abs) => {
      if (append) await appendFileAllOrNothing(abs, data, ctx.files);
      else await writeWhole(abs, data, { files: ctx.files });
      return {};
    }),
});

export const getFileSize = defineCommand({
  name: "get_file_size",
  description: "The size of a file in bytes.",
  params: pathOnly,
  result: z.object({ size: z.number() }),
  handler: ({ path }, ctx) => onPath(path, async (abs) => ({ size: (await ctx.files.stat(abs)).size })),
});

export const deleteFile = defineCommand({
  name: "delete_file",
  aliases: ["rm"],
  description: "Deletes a file (not a directory).",
  params: pathOnly,
  result: empty,
  handler: ({ path }, ctx) =>
    onPath(path, async (abs) => {
      await ctx.files.unlink(abs);
      return {};
    }),
});

export const createDir = defineCommand({
  name: "create_dir",
  aliases: ["mkdir"],
  description: "Creates a directory and its parents; fine if it exists.",
  params: pathOnly,
  result: empty,
  handler: ({ path }, ctx) =>
    onPath(path, async (abs) => {
      await ctx.files.mkdir(abs, { recursive: true });
      return {};
    }),
});

export const deleteDir = defineCommand({
  name: "delete_dir",
  aliases: ["rmdir"],
  description: "Deletes an empty directory.",
  params: pathOnly,
  result: empty,
  handler: ({ path }, ctx) =>
    onPath(path, async (abs) => {
      await ctx.files.rmdir(abs);
      return {};
    }),
});

export default [
  fileExists,
  directoryExists,
  listDir,
  readText,
  writeText,
  readBytes,
  writeBytes,
  getFileSize,
  deleteFile,
  createDir,
  deleteDir,
];

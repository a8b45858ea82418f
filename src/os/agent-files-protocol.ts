/**
 * The messages between the server and its file worker (agent-files.ts, agent-files-worker.ts): one
 * request, one reply, matched by id; plain data only (Buffers for bytes). Stats and directory
 * entries cross as their fields; errors as Node's fields, so that the server raises the same error.
 */
import type { DirEntry, FileInfo } from "../common/file-system.js";

export interface WireInfo {
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtimeMs: number;
}

export interface WireEntry {
  name: string;
  /** The entry's own type (a link is "link", whatever it leads to). */
  type: "file" | "directory" | "link" | "other";
}

export interface WireError {
  message: string;
  code?: string;
  errno?: number;
  syscall?: string;
  path?: string;
}

/** Each operation: its arguments and what it answers. `handle` is a number the worker gave at `open`. */
export interface FileOps {
  stat: [{ path: string }, WireInfo];
  lstat: [{ path: string }, WireInfo];
  readdir: [{ path: string }, string[]];
  readdirEntries: [{ path: string }, WireEntry[]];
  realpath: [{ path: string }, string];
  readlink: [{ path: string }, string];
  rename: [{ from: string; to: string }, null];
  rm: [{ path: string; recursive: boolean; force: boolean }, null];
  rmdir: [{ path: string }, null];
  unlink: [{ path: string }, null];
  mkdir: [{ path: string; recursive?: boolean; mode?: number }, null];
  statfs: [{ path: string }, { type: number }];
  open: [{ path: string; flags: number; mode?: number }, { handle: number }];
  read: [{ handle: number; length: number; position: number | null }, Buffer];
  write: [{ handle: number; data: Uint8Array; position: number | null }, number];
  fstat: [{ handle: number }, WireInfo];
  truncate: [{ handle: number; length: number }, null];
  datasync: [{ handle: number }, null];
  close: [{ handle: number }, null];
}

export type FileOp = keyof FileOps;

export interface FileRequest<K extends FileOp = FileOp> {
  id: number;
  op: K;
  args: FileOps[K][0];
}

export type FileReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: WireError };

/** Bytes one `read` may ask for: larger reads are split by the caller. */
export const MAX_WIRE_READ = 4 * 1024 * 1024;

export function infoToWire(info: FileInfo): WireInfo {
  return { size: info.size, mode: info.mode, uid: info.uid, gid: info.gid, mtimeMs: info.mtimeMs };
}

export function entryToWire(entry: DirEntry): WireEntry {
  const type = entry.isSymbolicLink()
    ? "link"
    : entry.isDirectory()
      ? "directory"
      : entry.isFile()
        ? "file"
        : "other";
  return { name: entry.name, type };
}

const S_IFMT = 0o170000;

/** A `FileInfo` from its fields, with the type tests of Node's `Stats`. */
export class InfoFromWire implements FileInfo {
  readonly size: number;
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly mtimeMs: number;

  constructor(wire: WireInfo) {
    this.size = Number(wire.size);
    this.mode = Number(wire.mode);
    this.uid = Number(wire.uid);
    this.gid = Number(wire.gid);
    this.mtimeMs = Number(wire.mtimeMs);
  }

  get mtime(): Date {
    return new Date(this.mtimeMs);
  }

  private is(type: number): boolean {
    return (this.mode & S_IFMT) === type;
  }

  isFile = () => this.is(0o100000);
  isDirectory = () => this.is(0o040000);
  isSymbolicLink = () => this.is(0o120000);
  isFIFO = () => this.is(0o010000);
  isSocket = () => this.is(0o140000);
  isBlockDevice = () => this.is(0o060000);
  isCharacterDevice = () => this.is(0o020000);
}

export function entryFromWire(wire: WireEntry): DirEntry {
  return {
    name: String(wire.name),
    isFile: () => wire.type === "file",
    isDirectory: () => wire.type === "directory",
    isSymbolicLink: () => wire.type === "link",
  };
}

export function errorToWire(err: unknown): WireError {
  const e = err as NodeJS.ErrnoException;
  return {
    message: String(e?.message ?? err),
    code: e?.code,
    errno: e?.errno,
    syscall: e?.syscall,
    path: e?.path,
  };
}

/** The error the worker met, raised again here with Node's fields (`describeOsError` reads `code`). */
export function errorFromWire(wire: WireError): Error {
  const err: NodeJS.ErrnoException = new Error(String(wire?.message ?? "the file worker failed"));
  if (typeof wire.code === "string") err.code = wire.code;
  if (typeof wire.errno === "number") err.errno = wire.errno;
  if (typeof wire.syscall === "string") err.syscall = wire.syscall;
  if (typeof wire.path === "string") err.path = wire.path;
  return err;
}

/**
 * The file system as the desktop's user sees it: what the file commands, `/files`, OSWorld's file
 * routes and envd's files and filesystem service do to files goes through a `FileSystem`. On a
 * developer's machine it is this process's own (`localFileSystem`, Node's `fs`); with a command user
 * (`--command-user`) it is a worker process running as that user (`agent-files.ts`), so that the
 * server, which runs as root then, reads and writes only what the agent itself may, and what it
 * writes belongs to the agent.
 *
 * The operations are the few those surfaces use, with Node's names and errors (an `Error` with
 * `code`, `syscall` and `path`), so that their messages stay the same either way.
 */
import type { FileHandle } from "node:fs/promises";
import * as fs from "node:fs/promises";

/** What `stat` says of a path: Node's `Stats` is one. */
export interface FileInfo {
  readonly size: number;
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly mtime: Date;
  readonly mtimeMs: number;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isBlockDevice(): boolean;
  isCharacterDevice(): boolean;
}

/** An entry of a directory: Node's `Dirent` is one. */
export interface DirEntry {
  readonly name: string;
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}

/** An open file: Node's `FileHandle` is one. */
export interface OpenFile {
  read(
    buffer: Buffer,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesRead: number }>;
  /** Writes at `position`, or at the file's offset (its end with `O_APPEND`) when null. */
  write(
    data: Uint8Array,
    offset: number,
    length: number,
    position: number | null,
  ): Promise<{ bytesWritten: number }>;
  stat(): Promise<FileInfo>;
  truncate(length: number): Promise<void>;
  datasync(): Promise<void>;
  close(): Promise<void>;
}

export interface FileSystem {
  stat(path: string): Promise<FileInfo>;
  lstat(path: string): Promise<FileInfo>;
  readdir(path: string): Promise<string[]>;
  readdirEntries(path: string): Promise<DirEntry[]>;
  realpath(path: string): Promise<string>;
  readlink(path: string): Promise<string>;
  rename(from: string, to: string): Promise<void>;
  rm(path: string, options: { recursive: boolean; force: boolean }): Promise<void>;
  rmdir(path: string): Promise<void>;
  unlink(path: string): Promise<void>;
  mkdir(path: string, options?: { recursive?: boolean; mode?: number }): Promise<void>;
  statfs(path: string): Promise<{ type: number }>;
  open(path: string, flags: number, mode?: number): Promise<OpenFile>;
}

/** This process's own file system. */
export const localFileSystem: FileSystem = {
  stat: (path) => fs.stat(path),
  lstat: (path) => fs.lstat(path),
  readdir: (path) => fs.readdir(path),
  readdirEntries: (path) => fs.readdir(path, { withFileTypes: true }),
  realpath: (path) => fs.realpath(path),
  readlink: (path) => fs.readlink(path),
  rename: (from, to) => fs.rename(from, to),
  rm: (path, options) => fs.rm(path, options),
  rmdir: (path) => fs.rmdir(path),
  unlink: (path) => fs.unlink(path),
  mkdir: async (path, options) => {
    await fs.mkdir(path, options);
  },
  statfs: (path) => fs.statfs(path),
  open: (path, flags, mode) => fs.open(path, flags, mode),
};

/** The descriptor of a file this process opened itself (a stream can write to it directly), else undefined. */
export function localDescriptor(file: OpenFile): number | undefined {
  const fd = (file as Partial<FileHandle>).fd;
  return typeof fd === "number" ? fd : undefined;
}

/** Writes all of `data` at `position` (or at the file's offset when null), in as few calls as the system allows. */
export async function writeAll(file: OpenFile, data: Uint8Array, position: number | null = 0) {
  let written = 0;
  while (written < data.length) {
    const at = position === null ? null : position + written;
    const { bytesWritten } = await file.write(data, written, data.length - written, at);
    written += bytesWritten;
  }
}

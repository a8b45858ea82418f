/**
 * Writes a file so that readers see either the old content or the new one, never a half-written
 * file: the data goes to a temporary file beside it, is flushed, then renamed over the target.
 * Writing through a symbolic link writes the file it points to and keeps the link, as an editor does.
 *
 * A write that a crash interrupts leaves its temporary file behind. Each write notes its temporary
 * file in a journal (a symbolic link per write under the state directory) until it is renamed; the
 * first write of a process, and `sweepInterruptedWrites()`, remove those of processes that are gone.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, readdir, readlink, symlink, unlink } from "node:fs/promises";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { fileKind, notRegularFile } from "./errors.js";
import { type FileInfo, type FileSystem, localFileSystem, type OpenFile, writeAll } from "./file-system.js";

/** A new file (`wx`). */
const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;
/** A new file whose writes are synced, where the system has O_DSYNC (not Windows). */
const NEW_SYNCED_FILE = NEW_FILE | (constants.O_DSYNC ?? 0);
/** Links followed before giving up, as the kernel's ELOOP limit. */
const MAX_LINKS = 40;

/** Where and how a file is written: its mode, and whose file system (default this process's). */
export interface AtomicWriteOptions {
  mode?: number;
  files?: FileSystem;
}

export function writeFileAtomic(path: string, data: string | Uint8Array, options: AtomicWriteOptions = {}) {
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  return writeAtomicWith(path, (handle) => writeAll(handle, bytes), { ...options, synced: true });
}

/**
 * Writes the file at `path` atomically with what `fill` writes into the temporary file (see
 * `beginAtomicWrite` for the options); a `fill` that fails leaves nothing behind.
 */
export async function writeAtomicWith(
  path: string,
  fill: (handle: OpenFile) => Promise<void>,
  options: AtomicWriteOptions & { synced?: boolean } = {},
) {
  const write = await beginAtomicWrite(path, options);
  try {
    await fill(write.handle);
  } catch (err) {
    await write.abort();
    throw err;
  }
  await write.commit();
}

/** Puts a file's data on disk (its pages written by another process too); a missing file is left. */
export async function flushFile(path: string) {
  const file = await open(path, "r").catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (!file) return;
  try {
    await file.datasync();
  } finally {
    await file.close();
  }
}

/** A write in progress to a temporary file beside its target (see `beginAtomicWrite`). */
export interface AtomicWrite {
  /** The temporary file, open for writing from its start. */
  readonly handle: OpenFile;
  /** Puts the data on disk and renames the file over the target; on a failure nothing is left behind. */
  commit(): Promise<void>;
  /** Closes and removes the temporary file. */
  abort(): Promise<void>;
}

/**
 * Opens the temporary file of a write to `path` (through its symbolic links), for data that comes in
 * pieces (an upload streamed to disk): the target changes only at `commit`. The file's mode is `mode`,
 * else the target's when it exists, else 0644; a directory at the target is refused at once
 * (EISDIR). With `synced`, each write reaches the disk before it returns (O_DSYNC, where the system
 * has it), which suits one large write; otherwise `commit` flushes once.
 */
export async function beginAtomicWrite(
  path: string,
  options: AtomicWriteOptions & { synced?: boolean } = {},
): Promise<AtomicWrite> {
  const files = options.files ?? localFileSystem;
  const { target, existing } = await followLinks(path, files);
  if (existing?.isDirectory())
    throw Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${path}'`), {
      code: "EISDIR",
      path,
    });
  const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  const mode = options.mode ?? (existing ? existing.mode & 0o7777 : 0o644);
  const synced = options.synced && Boolean(constants.O_DSYNC);
  const note = await journal.note(temp);
  let handle: OpenFile;
  try {
    handle = await files.open(temp, synced ? NEW_SYNCED_FILE : NEW_FILE, mode);
  } catch (err) {
    void note.done();
    throw err;
  }
  const abort = async () => {
    await handle.close().catch(() => undefined);
    await files.unlink(temp).catch(() => undefined);
    // Not waited for: once the file is gone, a leftover entry points at nothing and is swept.
    void note.done();
  };
  return {
    handle,
    commit: async () => {
      try {
        // The data and the size that reaches it are on disk before the name points at them.
        if (!synced) await handle.datasync();
        // An open file can be renamed: both at once, one trip through the thread pool fewer.
        await Promise.all([files.rename(temp, target), handle.close()]);
      } catch (err) {
        await abort();
        throw err;
      }
      void note.done();
    },
    abort,
  };
}

/** Whether a directory entry's name is the temporary file of a write in progress (`.name.<hex>.tmp`). */
export function isTemporaryWriteName(name: string): boolean {
  return /^\..+\.[0-9a-f]{12}\.tmp$/.test(name);
}

/**
 * Appends all of `data` or nothing: on a failure the file is cut back to its old length. Not
 * crash-safe: if the process dies in the middle, part of `data` may stay appended. Only regular
 * files (a FIFO would block the write until someone reads it).
 */
export async function appendFileAllOrNothing(
  path: string,
  data: Uint8Array,
  files: FileSystem = localFileSystem,
) {
  const flags = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK;
  const handle = await files.open(path, flags).catch((err: NodeJS.ErrnoException) => {
    // A FIFO that nobody reads cannot be opened for writing without blocking.
    throw err.code === "ENXIO" ? notRegularFile("a FIFO", path) : err;
  });
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw notRegularFile(fileKind(info), path);
    try {
      await writeAll(handle, data, null);
    } catch (err) {
      await handle.truncate(info.size).catch(() => undefined);
      throw err;
    }
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * The path a write to `path` lands on: the end of its chain of symbolic links (which may not exist
 * yet), and what is there now.
 */
async function followLinks(
  path: string,
  files: FileSystem,
): Promise<{ target: string; existing: FileInfo | null }> {
  let current = path;
  for (let hops = 0; hops < MAX_LINKS; hops++) {
    const info = await files.lstat(current).catch(() => null);
    if (!info?.isSymbolicLink()) return { target: current, existing: info };
    const next = await files.readlink(current);
    current = isAbsolute(next) ? next : resolve(dirname(current), next);
  }
  throw Object.assign(new Error(`Too many levels of symbolic links: ${path}`), { code: "ELOOP" });
}

/** Removes the temporary files of writes whose process is gone (run at start; also before the first write). */
export function sweepInterruptedWrites(): Promise<void> {
  return journal.sweep();
}

/**
 * The journal of writes in progress: `<dir>/<pid>.<random>` → the temporary file. Best effort: where
 * the state directory cannot be written, writes go on without it.
 */
class WriteJournal {
  private swept: Promise<void> | undefined;

  private get dir(): string {
    const state = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
    return join(state, "hangar", "writes");
  }

  async note(temp: string): Promise<{ done(): Promise<void> }> {
    await this.sweep();
    const entry = join(this.dir, `${process.pid}.${randomBytes(6).toString("hex")}`);
    const noted = await symlink(temp, entry).then(
      () => true,
      () => false,
    );
    return { done: async () => (noted ? unlink(entry).catch(() => undefined) : undefined) };
  }

  sweep(): Promise<void> {
    this.swept ??= this.sweepOnce().catch(() => undefined);
    return this.swept;
  }

  private async sweepOnce() {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      const pid = Number(name.split(".")[0]);
      // This process has written nothing yet: an entry with its pid is from an earlier life of it.
      if (pid !== process.pid && isRunning(pid)) continue;
      const entry = join(this.dir, name);
      const temp = await readlink(entry).catch(() => null);
      if (temp && /\.tmp$/.test(temp)) await unlink(temp).catch(() => undefined);
      await unlink(entry).catch(() => undefined);
    }
  }
}

const journal = new WriteJournal();

function isRunning(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

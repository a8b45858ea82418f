/**
 * envd's `filesystem.Filesystem` service: stat, make a directory, move, list to a depth, remove,
 * and watch (a stream, or a watcher polled for its events). Paths are the desktop user's: `~` and
 * relative paths are taken from the home directory. OS errors become envd's codes: a missing path
 * is not_found, a path of the wrong kind invalid_argument, an existing directory already_exists.
 */
import { randomBytes } from "node:crypto";
import { dirname, join } from "node:path";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { describeOsError } from "../../../common/errors.js";
import type { FileSystem } from "../../../common/file-system.js";
import { makeDirectory } from "../../../os/make-directory.js";
import { entryInfo } from "./entries.js";
import type { EnvdState } from "./envd-state.js";
import {
  type EntryInfo,
  type Filesystem,
  type FilesystemEvent,
  FileType,
} from "./gen/filesystem/filesystem_pb.js";
import { keepAliveMs, waitFor } from "./keepalive.js";
import { watchDirectory } from "./watchers.js";

/** Entries one `ListDir` returns at most (a deep listing of `/` would not end). */
const MAX_LIST_ENTRIES = 100_000;
/** Polling watchers at once, and the events each keeps until it is polled. */
const MAX_WATCHERS = 256;
const MAX_WATCHER_EVENTS = 10_000;
/** statfs types of network file systems (NFS, CIFS/SMB, SMB2, FUSE), which envd does not watch unless asked. */
const NETWORK_FILESYSTEMS = new Set([0x6969, 0xff534d42, 0x517b, 0xfe534d42, 0x65735546]);

interface PolledWatcher {
  events: FilesystemEvent[];
  error?: ConnectError;
  stop(): void;
}

export interface FilesystemService {
  impl: ServiceImpl<typeof Filesystem>;
  /** Stops every polling watcher. */
  close(): void;
}

export function filesystemService(state: EnvdState, files: FileSystem): FilesystemService {
  const watchers = new Map<string, PolledWatcher>();
  /** The path of a request, absolute, for the user the request names (only this server's). */
  const pathOf = (path: string, ctx: HandlerContext) => {
    state.checkUser(state.userOfHeader(ctx.requestHeader.get("authorization")));
    return state.resolve(path);
  };

  const impl: ServiceImpl<typeof Filesystem> = {
    async stat(req, ctx) {
      const path = pathOf(req.path, ctx);
      return { entry: await entryOf(files, path) };
    },

    async makeDir(req, ctx) {
      const path = pathOf(req.path, ctx);
      const existing = await files.stat(path).catch((err: NodeJS.ErrnoException) => {
        if (err.code === "ENOENT") return undefined;
        throw rpcError(err, path);
      });
      if (existing?.isDirectory())
        throw new ConnectError(`directory already exists: ${path}`, Code.AlreadyExists);
      if (existing)
        throw new ConnectError(
          `path already exists but it is not a directory: ${path}`,
          Code.InvalidArgument,
        );
      await makeDirectory(path, files).catch((err) => {
        throw rpcError(err, path);
      });
      return { entry: await entryOf(files, path) };
    },

    async move(req, ctx) {
      const source = pathOf(req.source, ctx);
      const destination = pathOf(req.destination, ctx);
      try {
        await makeDirectory(dirname(destination), files);
        await files.rename(source, destination);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT") throw new ConnectError(`source file not found: ${source}`, Code.NotFound);
        throw rpcError(err, code === "EXDEV" ? `${source} → ${destination} (another file system)` : source);
      }
      return { entry: await entryOf(files, destination) };
    },

    async listDir(req, ctx) {
      const path = pathOf(req.path, ctx);
      const depth = req.depth === 0 ? 1 : req.depth;
      const real = await files.realpath(path).catch((err) => {
        throw rpcError(err, path);
      });
      const info = await files.stat(real).catch((err) => {
        throw rpcError(err, path);
      });
      if (!info.isDirectory())
        throw new ConnectError(`path is not a directory: ${path}`, Code.InvalidArgument);
      const entries: EntryInfo[] = [];
      await walk(files, real, path, depth, entries);
      return { entries };
    },

    async remove(req, ctx) {
      const path = pathOf(req.path, ctx);
      await files.rm(path, { recursive: true, force: true }).catch((err) => {
        throw rpcError(err, path);
      });
      return {};
    },

    async *watchDir(req, ctx) {
      const path = pathOf(req.path, ctx);
      await checkWatchable(files, path, req.allowNetworkMounts);
      const queue: FilesystemEvent[] = [];
      let failure: Error | undefined;
      let wake: (() => void) | undefined;
      const stop = await watchDirectory(
        path,
        { recursive: req.recursive, includeEntry: req.includeEntry, files },
        (event) => {
          queue.push(event);
          wake?.();
        },
        (err) => {
          failure = err;
          wake?.();
        },
      );
      const interval = keepAliveMs(ctx);
      try {
        yield { event: { case: "start", value: {} } };
        for (;;) {
          if (queue.length > 0) {
            yield { event: { case: "filesystem", value: queue.shift()! } };
            continue;
          }
          if (failure) throw rpcError(failure, path);
          const woke = await waitFor(interval, ctx.signal, (w) => {
            wake = w;
          });
          if (!woke) yield { event: { case: "keepalive", value: {} } };
        }
      } finally {
        stop();
      }
    },

    async createWatcher(req, ctx) {
      const path = pathOf(req.path, ctx);
      await checkWatchable(files, path, req.allowNetworkMounts);
      if (watchers.size >= MAX_WATCHERS) {
        throw new ConnectError(
          `too many watchers (${MAX_WATCHERS}): remove the ones not needed`,
          Code.ResourceExhausted,
        );
      }
      const id = `w${randomBytes(12).toString("hex")}`;
      const watcher: PolledWatcher = { events: [], stop: () => undefined };
      watcher.stop = await watchDirectory(
        path,
        { recursive: req.recursive, includeEntry: req.includeEntry, files },
        (event) => {
          if (watcher.events.length < MAX_WATCHER_EVENTS) watcher.events.push(event);
          else
            watcher.error ??= new ConnectError(
              `more than ${MAX_WATCHER_EVENTS} events waited to be polled: events were lost`,
              Code.ResourceExhausted,
            );
        },
        (err) => {
          watcher.error ??= rpcError(err, path);
        },
      );
      watchers.set(id, watcher);
      return { watcherId: id };
    },

    getWatcherEvents(req) {
      const watcher = watchers.get(req.watcherId);
      if (!watcher) throw new ConnectError(`watcher with id ${req.watcherId} not found`, Code.NotFound);
      if (watcher.error) throw watcher.error;
      return { events: watcher.events.splice(0) };
    },

    removeWatcher(req) {
      const watcher = watchers.get(req.watcherId);
      if (!watcher) throw new ConnectError(`watcher with id ${req.watcherId} not found`, Code.NotFound);
      watcher.stop();
      watchers.delete(req.watcherId);
      return {};
    },
  };

  return {
    impl,
    close() {
      for (const watcher of watchers.values()) watcher.stop();
      watchers.clear();
    },
  };
}

async function entryOf(files: FileSystem, path: string): Promise<EntryInfo> {
  return entryInfo(path, files).catch((err) => {
    throw rpcError(err, path);
  });
}

/**
 * The entries under `real` down to `depth` levels, sorted by name at each level, as paths under
 * `shown` (the path the client asked for); symbolic links to directories are not followed.
 */
async function walk(files: FileSystem, real: string, shown: string, depth: number, into: EntryInfo[]) {
  const names = (
    await files.readdir(real).catch((err) => {
      throw rpcError(err, shown);
    })
  ).sort();
  for (const name of names) {
    if (into.length >= MAX_LIST_ENTRIES) {
      throw new ConnectError(
        `more than ${MAX_LIST_ENTRIES} entries under ${shown}: list a smaller depth`,
        Code.ResourceExhausted,
      );
    }
    const entry = await entryInfo(join(real, name), files).catch(() => undefined);
    // Gone since the listing: skipped, as envd does.
    if (!entry) continue;
    entry.path = join(shown, name);
    into.push(entry);
    if (depth > 1 && entry.type === FileType.DIRECTORY && entry.symlinkTarget === undefined) {
      await walk(files, join(real, name), join(shown, name), depth - 1, into);
    }
  }
}

async function checkWatchable(files: FileSystem, path: string, allowNetworkMounts: boolean) {
  const info = await files.stat(path).catch((err) => {
    throw rpcError(err, path);
  });
  if (!info.isDirectory()) throw new ConnectError(`path ${path} not a directory`, Code.InvalidArgument);
  // Watched by this process's inotify: only a directory the user may list itself.
  await files.readdir(path).catch((err) => {
    throw rpcError(err, path);
  });
  if (allowNetworkMounts) return;
  const fs = await files.statfs(path).catch(() => undefined);
  if (fs && NETWORK_FILESYSTEMS.has(fs.type)) {
    throw new ConnectError(`cannot watch path on network filesystem: ${path}`, Code.InvalidArgument);
  }
}

/** An OS error as envd's code: not_found, permission_denied, invalid_argument, resource_exhausted or internal. */
export function rpcError(err: unknown, path: string): ConnectError {
  if (err instanceof ConnectError) return err;
  const code = (err as NodeJS.ErrnoException)?.code;
  const message = describeOsError(err, path).message;
  switch (code) {
    case "ENOENT":
      return new ConnectError(message, Code.NotFound);
    case "EACCES":
    case "EPERM":
      return new ConnectError(message, Code.PermissionDenied);
    case "ENOTDIR":
    case "EISDIR":
    case "ENAMETOOLONG":
    case "EINVAL":
    case "ELOOP":
      return new ConnectError(message, Code.InvalidArgument);
    case "ENOSPC":
    case "EMFILE":
    case "ENFILE":
      return new ConnectError(message, Code.ResourceExhausted);
    default:
      return new ConnectError(message, Code.Internal);
  }
}

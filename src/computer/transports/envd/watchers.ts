/**
 * Directory watches for envd's `WatchDir` and polling watchers, on Node's `fs.watch` (inotify). Node
 * says only "rename" or "change" of a name, so the kind is read from the disk: a name that exists
 * after a "rename" was created (or moved in), one that does not was removed (or moved away); a
 * "change" is a write (attribute changes included). The temporary files of Hangar's atomic writes
 * are not reported: an upload shows as the creation of its file.
 */
import { type FSWatcher, watch } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { isTemporaryWriteName } from "../../../common/atomic-write.js";
import type { FileSystem } from "../../../common/file-system.js";
import { entryInfo } from "./entries.js";
import { EventType, type FilesystemEvent, FilesystemEventSchema } from "./gen/filesystem/filesystem_pb.js";

/** Directories one recursive watch follows at most (each is an inotify watch). */
const MAX_WATCHED_DIRECTORIES = 8192;

export interface WatchOptions {
  recursive: boolean;
  includeEntry: boolean;
  /**
   * The user's file system: what an event says of a name is read through it, and a recursive watch
   * follows only the directories the user may list (the watch itself is this process's inotify).
   */
  files: FileSystem;
}

/**
 * Watches `dir` and calls `onEvent` for each event, in order; `onError` once when the watch fails
 * (the directory removed, the system out of watches). Resolves, once every directory is watched,
 * with the function that stops it. A
 * recursive watch is one inotify watch per directory (Node's own recursive mode on Linux polls the
 * tree and misses files that come and go between two looks): the directories there at the start,
 * and each one that appears.
 */
export async function watchDirectory(
  dir: string,
  options: WatchOptions,
  onEvent: (event: FilesystemEvent) => void,
  onError: (err: Error) => void,
): Promise<() => void> {
  const watchers = new Map<string, FSWatcher>();
  let closed = false;
  // Events are described one after another, so that their order is the order they came in.
  let chain = Promise.resolve();
  const stop = () => {
    closed = true;
    for (const watcher of watchers.values()) watcher.close();
    watchers.clear();
  };
  const fail = (err: Error) => {
    if (closed) return;
    stop();
    onError(err);
  };
  const add = (relative: string) => {
    if (closed || watchers.has(relative)) return;
    if (watchers.size >= MAX_WATCHED_DIRECTORIES) {
      fail(new Error(`more than ${MAX_WATCHED_DIRECTORIES} directories to watch under ${dir}`));
      return;
    }
    let watcher: FSWatcher;
    try {
      watcher = watch(join(dir, relative), { persistent: false }, (kind, name) => {
        if (!closed && name) heard(relative, kind, name.toString());
      });
    } catch (err) {
      // A directory gone before its watch began is not a failure of the watch; the root is.
      if (relative === "") fail(err as Error);
      return;
    }
    watcher.on("error", (err) => {
      if (relative === "") fail(err);
      else forget(relative);
    });
    watchers.set(relative, watcher);
  };
  const forget = (relative: string) => {
    for (const [path, watcher] of watchers) {
      if (path === relative || path.startsWith(`${relative}/`)) {
        watcher.close();
        watchers.delete(path);
      }
    }
  };
  const heard = (parent: string, kind: "rename" | "change", name: string) => {
    if (isTemporaryWriteName(name)) return;
    const relative = parent ? join(parent, name) : name;
    chain = chain.then(async () => {
      const event = await describe(options.files, dir, relative, kind, options.includeEntry);
      if (closed) return;
      if (options.recursive && kind === "rename") {
        if (event.type === EventType.REMOVE) forget(relative);
        else if (await isDirectory(options.files, join(dir, relative))) await addTree(relative);
      }
      onEvent(event);
    });
  };
  const addTree = async (relative: string) => {
    const entries = await options.files.readdirEntries(join(dir, relative)).catch(() => undefined);
    // A directory the user may not list is not watched (the root was checked by the caller).
    if (!entries && relative !== "") return;
    add(relative);
    for (const entry of entries ?? []) {
      if (entry.isDirectory() && !closed) await addTree(relative ? join(relative, entry.name) : entry.name);
    }
  };
  if (options.recursive) await addTree("");
  else add("");
  return stop;
}

async function isDirectory(files: FileSystem, path: string): Promise<boolean> {
  return files.lstat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

async function describe(
  files: FileSystem,
  dir: string,
  name: string,
  kind: "rename" | "change",
  includeEntry: boolean,
): Promise<FilesystemEvent> {
  const path = join(dir, name);
  let type = EventType.WRITE;
  if (kind === "rename") {
    const exists = await files.lstat(path).then(
      () => true,
      () => false,
    );
    type = exists ? EventType.CREATE : EventType.REMOVE;
  }
  const entry =
    includeEntry && type !== EventType.REMOVE
      ? await entryInfo(path, files).catch(() => undefined)
      : undefined;
  return create(FilesystemEventSchema, { name, type, entry });
}

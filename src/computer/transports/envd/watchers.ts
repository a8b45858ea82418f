/**
 * Directory watches for envd's `WatchDir` and polling watchers, on Node's `fs.watch` (inotify). Node
 * says only "rename" or "change" of a name, so the kind is read from the disk: a name that exists
 * after a "rename" was created (or moved in), one that does not was removed (or moved away); a
 * "change" is a write (attribute changes included). The temporary files of Hangar's atomic writes
 * are not reported: an upload shows as the creation of its file.
 */
import { type FSWatcher, watch } from "node:fs";
import { lstat } from "node:fs/promises";
import { basename, join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { isTemporaryWriteName } from "../../../common/atomic-write.js";
import { entryInfo } from "./entries.js";
import { EventType, type FilesystemEvent, FilesystemEventSchema } from "./gen/filesystem/filesystem_pb.js";

export interface WatchOptions {
  recursive: boolean;
  includeEntry: boolean;
}

/**
 * Watches `dir` and calls `onEvent` for each event, in order; `onError` once when the watch fails
 * (the directory removed, the system out of watches). Returns the function that stops it.
 */
export function watchDirectory(
  dir: string,
  options: WatchOptions,
  onEvent: (event: FilesystemEvent) => void,
  onError: (err: Error) => void,
): () => void {
  let watcher: FSWatcher;
  let closed = false;
  // Events are described one after another, so that their order is the order they came in.
  let chain = Promise.resolve();
  watcher = watch(dir, { recursive: options.recursive, persistent: false }, (kind, name) => {
    if (closed || !name) return;
    const relative = name.toString();
    if (isTemporaryWriteName(basename(relative))) return;
    chain = chain.then(async () => {
      const event = await describe(dir, relative, kind, options.includeEntry);
      if (!closed) onEvent(event);
    });
  });
  watcher.on("error", (err) => {
    if (closed) return;
    closed = true;
    watcher.close();
    onError(err);
  });
  return () => {
    closed = true;
    watcher.close();
  };
}

async function describe(
  dir: string,
  name: string,
  kind: "rename" | "change",
  includeEntry: boolean,
): Promise<FilesystemEvent> {
  const path = join(dir, name);
  let type = EventType.WRITE;
  if (kind === "rename") {
    const exists = await lstat(path).then(
      () => true,
      () => false,
    );
    type = exists ? EventType.CREATE : EventType.REMOVE;
  }
  const entry =
    includeEntry && type !== EventType.REMOVE ? await entryInfo(path).catch(() => undefined) : undefined;
  return create(FilesystemEventSchema, { name, type, entry });
}

/**
 * The file worker: a child process of the server that runs as the command user (`--command-user`)
 * and performs the server's file operations with that user's rights (agent-files.ts starts it
 * through `setpriv`). It holds the files it opened until the server closes them, and exits when the
 * server goes away (its IPC channel closes).
 */
import type { FileHandle } from "node:fs/promises";
import { localFileSystem as fs } from "../common/file-system.js";
import {
  entryToWire,
  errorToWire,
  type FileOps,
  type FileReply,
  type FileRequest,
  infoToWire,
  MAX_WIRE_READ,
} from "./agent-files-protocol.js";

type Handlers = { [K in keyof FileOps]: (args: FileOps[K][0]) => Promise<FileOps[K][1]> };

/** Files held open at once: a server that forgot to close them would otherwise run out of descriptors. */
const MAX_OPEN = 512;
const open = new Map<number, FileHandle>();
let nextHandle = 1;

function held(handle: number): FileHandle {
  const file = open.get(handle);
  if (!file) throw Object.assign(new Error("EBADF: bad file descriptor"), { code: "EBADF" });
  return file;
}

/** An operation that answers nothing once it is done. */
async function nothing(done: Promise<unknown>): Promise<null> {
  await done;
  return null;
}

const handlers: Handlers = {
  stat: async ({ path }) => infoToWire(await fs.stat(path)),
  lstat: async ({ path }) => infoToWire(await fs.lstat(path)),
  readdir: ({ path }) => fs.readdir(path),
  readdirEntries: async ({ path }) => (await fs.readdirEntries(path)).map(entryToWire),
  realpath: ({ path }) => fs.realpath(path),
  readlink: ({ path }) => fs.readlink(path),
  rename: ({ from, to }) => nothing(fs.rename(from, to)),
  rm: ({ path, recursive, force }) => nothing(fs.rm(path, { recursive, force })),
  rmdir: ({ path }) => nothing(fs.rmdir(path)),
  unlink: ({ path }) => nothing(fs.unlink(path)),
  mkdir: ({ path, recursive, mode }) => nothing(fs.mkdir(path, { recursive, mode })),
  statfs: async ({ path }) => ({ type: (await fs.statfs(path)).type }),
  open: async ({ path, flags, mode }) => {
    if (open.size >= MAX_OPEN) {
      throw Object.assign(new Error(`EMFILE: the file worker holds ${MAX_OPEN} open files`), {
        code: "EMFILE",
      });
    }
    const file = (await fs.open(path, flags, mode)) as FileHandle;
    const handle = nextHandle++;
    open.set(handle, file);
    return { handle };
  },
  read: async ({ handle, length, position }) => {
    const buffer = Buffer.allocUnsafe(Math.max(0, Math.min(length, MAX_WIRE_READ)));
    const { bytesRead } = await held(handle).read(buffer, 0, buffer.length, position);
    return buffer.subarray(0, bytesRead);
  },
  write: async ({ handle, data, position }) =>
    (await held(handle).write(data, 0, data.length, position)).bytesWritten,
  fstat: async ({ handle }) => infoToWire(await held(handle).stat()),
  truncate: ({ handle, length }) => nothing(held(handle).truncate(length)),
  datasync: ({ handle }) => nothing(held(handle).datasync()),
  close: async ({ handle }) => {
    const file = open.get(handle);
    open.delete(handle);
    await file?.close();
    return null;
  },
};

function reply(message: FileReply) {
  process.send?.(message);
}

process.on("disconnect", () => process.exit(0));
process.on("message", (message: FileRequest) => {
  const { id, op, args } = message ?? {};
  const handler = handlers[op as keyof FileOps] as ((args: unknown) => Promise<unknown>) | undefined;
  if (!handler) {
    reply({ id, ok: false, error: { message: `unknown file operation ${String(op)}` } });
    return;
  }
  handler(args).then(
    (value) => reply({ id, ok: true, value }),
    (err) => reply({ id, ok: false, error: errorToWire(err) }),
  );
});
reply({ id: 0, ok: true, value: "ready" });

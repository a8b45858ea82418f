/**
 * The file routes: `/file` (a download), `/setup/upload` (multipart), `/list_directory`,
 * `/desktop_path` and `/setup/download_file`. Paths are the desktop user's, `~` and `$VAR`
 * expanded as upstream does. What the routes refuse: reading this server's own `/proc/<pid>` (its
 * memory, environment and open files), writing under `/proc`, `/sys` and `/dev`, and anything but a
 * regular file (a FIFO would hang the reader). Uploads go to a temporary file beside the target,
 * renamed over it when complete (`os/files.ts` `writeWhole`): a failed upload leaves nothing behind.
 */
import { homedir } from "node:os";
import { basename, extname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { Hono } from "hono";
import { CommandError, describeOsError } from "../../../common/errors.js";
import type { DirEntry, FileSystem } from "../../../common/file-system.js";
import { expandHome, fileStream, openFile, readToEnd, writeWhole } from "../../../os/files.js";
import type { ComputerEnv } from "../../http/env.js";
import { attachment, formBody, jsonBody, multipartBody, stringField, text } from "./replies.js";

export interface FileDeps {
  /** Largest request body (and upload, and download by `/setup/download_file`). */
  bodyLimitBytes: number;
  /** The desktop user's file system (`--command-user`: its file worker's). */
  files: FileSystem;
}

/** Entries a `/list_directory` tree holds at most (a tree of `/` would not end). */
const MAX_TREE_ENTRIES = 50_000;
const MAX_TREE_DEPTH = 64;

const TYPES: Record<string, string> = {
  ".txt": "text/plain; charset=utf-8",
  ".csv": "text/csv; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".htm": "text/html; charset=utf-8",
  ".xml": "application/xml",
  ".json": "application/json",
  ".js": "text/javascript; charset=utf-8",
  ".py": "text/x-python; charset=utf-8",
  ".sh": "application/x-sh",
  ".md": "text/markdown; charset=utf-8",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".svg": "image/svg+xml",
  ".webp": "image/webp",
  ".pdf": "application/pdf",
  ".zip": "application/zip",
  ".mp4": "video/mp4",
  ".mp3": "audio/mpeg",
  ".wav": "audio/x-wav",
  ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  ".odt": "application/vnd.oasis.opendocument.text",
  ".ods": "application/vnd.oasis.opendocument.spreadsheet",
};

/** `os.path.expandvars(os.path.expanduser(path))`, made absolute. */
export function expandUserPath(path: string): string {
  if (path.includes("\0")) throw new CommandError("invalid_params", "The path contains a NUL byte");
  const p = expandHome(path).replace(/\$(\w+)|\$\{(\w+)\}/g, (whole, a, b) => process.env[a ?? b] ?? whole);
  return resolve(p);
}

/** Whether `path` is under this server's own `/proc` entry. */
function ownProcess(path: string): boolean {
  return new RegExp(`^/proc/(self|thread-self|${process.pid})(/|$)`).test(path);
}

const NO_WRITE = /^\/(proc|sys|dev)(\/|$)/;

export function fileRoutes(deps: FileDeps) {
  const routes = new Hono<ComputerEnv>();

  routes.post("/file", async (c) => {
    const form = await formBody(c, deps.bodyLimitBytes);
    const given = form.get("file_path");
    if (!given) return c.json({ error: "file_path is required" }, 400);
    const path = expandUserPath(given);
    if (ownProcess(path)) return c.json({ error: "Not allowed: the controller's own /proc entry" }, 403);
    let opened: Awaited<ReturnType<typeof openFile>>;
    try {
      opened = await openFile(path, deps.files);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return c.json({ error: "File not found" }, 404);
      return c.json({ error: `Failed to serve file: ${describeOsError(err).message}` }, 500);
    }
    const { handle, info } = opened;
    if (!info.isFile()) {
      await handle.close();
      return c.json({ error: "File not found" }, 404);
    }
    const headers: Record<string, string> = {
      "content-type": TYPES[extname(path).toLowerCase()] ?? "application/octet-stream",
      "content-disposition": attachment(basename(path)),
    };
    if (info.size === 0) {
      // /proc files say 0 and still have content: read them whole, within the limit.
      try {
        const data = await readToEnd(handle, Buffer.allocUnsafe(65536), deps.bodyLimitBytes);
        return c.body(new Uint8Array(data), 200, headers);
      } finally {
        await handle.close();
      }
    }
    headers["content-length"] = String(info.size);
    const stream = fileStream(handle, 0, info.size - 1);
    return c.body(Readable.toWeb(stream) as ReadableStream, 200, headers);
  });

  routes.post("/setup/upload", async (c) => {
    const form = await multipartBody(c, deps.bodyLimitBytes);
    const given = form.get("file_path");
    const file = form.get("file_data");
    if (typeof given !== "string" || !given || !(file instanceof Blob)) {
      return c.json({ error: "file_path and file_data are required" }, 400);
    }
    const path = expandUserPath(given);
    if (NO_WRITE.test(path))
      return c.json({ error: `Not allowed: uploads cannot write under /proc, /sys or /dev` }, 403);
    const data = new Uint8Array(await file.arrayBuffer());
    try {
      await writeWhole(path, data, { parents: true, files: deps.files });
    } catch (err) {
      return c.json({ error: `Failed to upload file: ${describeOsError(err).message}` }, 500);
    }
    return text(c, `File Uploaded: ${data.length} bytes`);
  });

  routes.post("/list_directory", async (c) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const given = stringField(data, "path");
    if (!given) return c.json({ error: "Missing 'path' parameter" }, 400);
    const path = resolve(given);
    if (!(await isDirectory(deps.files, path))) {
      return c.json({ error: "The provided path is not a directory" }, 400);
    }
    const budget = { left: MAX_TREE_ENTRIES };
    return c.json({ directory_tree: await directoryTree(deps.files, path, 0, budget) });
  });

  routes.post("/desktop_path", async (c) => {
    const path = join(homedir(), "Desktop");
    if (await isDirectory(deps.files, path)) return c.json({ desktop_path: path });
    return c.json({ error: "Unsupported operating system or desktop path not found" }, 404);
  });

  routes.post("/setup/download_file", async (c) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const url = stringField(data, "url");
    const given = stringField(data, "path");
    if (!url || !given) return text(c, "Path or URL not supplied!", 400);
    const path = expandUserPath(given);
    if (NO_WRITE.test(path))
      return text(c, "Not allowed: downloads cannot write under /proc, /sys or /dev", 403);
    let last = "";
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const bytes = await download(url, deps.bodyLimitBytes);
        await writeWhole(path, bytes, { parents: true, files: deps.files });
        return text(c, `File downloaded successfully: ${bytes.length} bytes`);
      } catch (err) {
        last = (err as Error).message;
      }
    }
    return text(c, `Failed to download ${url}. No retries left. Error: ${last}`, 500);
  });

  return routes;
}

async function download(url: string, limit: number): Promise<Buffer> {
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new Error(`unsupported URL scheme ${parsed.protocol}`);
  const res = await fetch(parsed, { signal: AbortSignal.timeout(300_000) });
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (declared > limit) throw new Error(`the file is larger than ${limit} bytes`);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > limit) throw new Error(`the file is larger than ${limit} bytes`);
    chunks.push(chunk);
  }
  if (Number.isFinite(declared) && declared !== size) throw new Error(`got ${size} of ${declared} bytes`);
  return Buffer.concat(chunks);
}

type TreeNode =
  | { type: "directory"; name: string; children: TreeNode[] }
  | { type: "file"; name: string }
  | { error: string };

/** upstream's tree: directories with children, files; symbolic links are not followed. */
async function directoryTree(
  files: FileSystem,
  path: string,
  depth: number,
  budget: { left: number },
): Promise<TreeNode> {
  let entries: DirEntry[];
  try {
    entries = await files.readdirEntries(path);
  } catch (err) {
    return { error: describeOsError(err).message };
  }
  const children: TreeNode[] = [];
  for (const entry of entries) {
    if (budget.left <= 0) break;
    budget.left--;
    if (entry.isDirectory() && depth < MAX_TREE_DEPTH) {
      children.push(await directoryTree(files, join(path, entry.name), depth + 1, budget));
    } else {
      children.push({ type: "file", name: entry.name });
    }
  }
  return { type: "directory", name: basename(path), children };
}

function isDirectory(files: FileSystem, path: string): Promise<boolean> {
  return files.stat(path).then(
    (info) => info.isDirectory(),
    () => false,
  );
}

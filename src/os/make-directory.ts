/**
 * Creates a directory and its missing parents. Node 20's `mkdir(path, { recursive: true })` loops
 * forever where the kernel answers ENOENT for a parent that exists (under /proc, say); this walks
 * up once to the first existing ancestor and creates each missing level with a plain mkdir, so it
 * ends after at most one call per path component, with the first error.
 */
import { dirname, resolve } from "node:path";
import { type FileSystem, localFileSystem } from "../common/file-system.js";

export async function makeDirectory(path: string, files: FileSystem = localFileSystem): Promise<void> {
  const missing: string[] = [];
  for (let current = resolve(path); ; current = dirname(current)) {
    const info = await files.stat(current).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (info?.isDirectory()) break;
    if (info)
      throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${current}'`), {
        code: "ENOTDIR",
        path: current,
      });
    missing.push(current);
    if (dirname(current) === current) break;
  }
  for (const dir of missing.reverse()) {
    await files.mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "EEXIST") throw err;
    });
  }
}

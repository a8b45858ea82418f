/**
 * Writes a file so that readers see either the old content or the new one, never a half-written
 * file: the data goes to a temporary file beside it, is flushed, then renamed over the target.
 */
import { randomBytes } from "node:crypto";
import { open, rename, stat, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  options: { mode?: number } = {},
) {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const mode =
    options.mode ??
    (await stat(path).then(
      (s) => s.mode & 0o7777,
      () => 0o644,
    ));
  const handle = await open(temp, "wx", mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
    await handle.close();
    await rename(temp, path);
  } catch (err) {
    await handle.close().catch(() => undefined);
    await unlink(temp).catch(() => undefined);
    throw err;
  }
}

/** Appends all of `data` or nothing: on a failure the file is cut back to its old length. */
export async function appendFileAllOrNothing(path: string, data: Uint8Array) {
  const handle = await open(path, "a");
  const { size } = await handle.stat();
  try {
    await handle.writeFile(data);
    await handle.close();
  } catch (err) {
    await handle.truncate(size).catch(() => undefined);
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Temporary directories that outlive no process: `<tmpdir>/<prefix><holder>-XXXXXX`, where `<holder>`
 * is this process's holder id (holder-lock.ts). Making one first removes the directories of the same
 * prefix whose holder has ended, however it ended (`kill -9` included), so that what a killed process
 * left is gone at the next start of any process that makes one.
 */
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { holderAlive, holderId } from "./holder-lock.js";

export async function makeOwnedTempDir(prefix: string): Promise<string> {
  const dir = tmpdir();
  for (const name of await readdir(dir).catch(() => [])) {
    if (!name.startsWith(prefix)) continue;
    const holder = name.slice(prefix.length).split("-")[0];
    if (!(await holderAlive(holder))) await rm(join(dir, name), { recursive: true, force: true });
  }
  return mkdtemp(join(dir, `${prefix}${await holderId()}-`));
}

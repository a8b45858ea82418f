/**
 * A VM's disk file in the two formats it can have: raw (`disk.img` as lume has it) or a qcow2
 * overlay on a snapshot's raw disk (after a restore, in a fork). The format is the config's word,
 * never guessed from the file (the guest writes the file).
 */
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { HostError } from "../errors.js";
import { copySparse } from "./sparse-copy.js";
import { DISK_FILE, type VmConfig } from "./vm-config.js";

const run = promisify(execFile);

/** Copies a VM's disk as it is now into a raw sparse file (an overlay is flattened). */
export async function copyDisk(vmDir: string, config: VmConfig, destination: string) {
  const source = join(vmDir, DISK_FILE);
  if ((config.diskFormat ?? "raw") === "raw") return copySparse(source, destination);
  try {
    // -U: the VM's QEMU holds the image (it is paused, its writes flushed).
    await run("qemu-img", ["convert", "-U", "-f", "qcow2", "-O", "raw", "--", source, destination]);
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
    throw new HostError("failed", `Copying ${source} failed: ${detail}`);
  }
}

/** A new qcow2 overlay at `path` on the snapshot disk `backing` (raw), of `size` bytes. */
export async function createOverlay(path: string, backing: string, size: number) {
  await rm(path, { force: true });
  try {
    await run("qemu-img", [
      "create",
      "-q",
      "-f",
      "qcow2",
      "-F",
      "raw",
      "-b",
      backing,
      "--",
      path,
      String(size),
    ]);
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
    throw new HostError("failed", `Cannot create a disk on snapshot ${backing}: ${detail}`);
  }
}

/** Grows a qcow2 disk (its virtual size). */
export async function resizeOverlay(path: string, size: number) {
  try {
    await run("qemu-img", ["resize", "-q", "-f", "qcow2", "--", path, String(size)]);
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
    throw new HostError("failed", `Cannot resize ${path}: ${detail}`);
  }
}

/**
 * A QEMU VM's snapshots on disk: `<vm>/snapshots/<name>/` holds `snapshot.json` (the record and
 * the VM's config then), `disk.img` (raw, sparse: the disk then; never written again), `nvram.bin`,
 * and for a running VM `state.bin` (its devices, and its RAM when the RAM was not a file of its own)
 * and `memory.ram` (its RAM). A snapshot is built in a hidden temporary directory beside the others
 * and renamed into place when complete, so a killed service never leaves half a snapshot in the list.
 *
 * Disks built on a snapshot are qcow2 overlays whose backing file is the snapshot's `disk.img`; the
 * config of their VM names it (`diskBacking`), which is how a snapshot knows who depends on it.
 */
import { readdir, readFile, rename, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { formatBytes } from "../../common/sizes.js";
import type { SnapshotRecord } from "../desktops/runtime.js";
import { HostError } from "../errors.js";
import { DISK_FILE, SNAPSHOTS_DIR, type VmConfig, vmConfigSchema } from "./vm-config.js";
import type { VmRef } from "./vm-store.js";

export const SNAPSHOT_RECORD = "snapshot.json";
export const STATE_FILE = "state.bin";
export const MEMORY_FILE = "memory.ram";

const recordSchema = z.object({
  name: z.string(),
  vm: z.string(),
  createdAt: z.string(),
  memory: z.boolean(),
  /** The VM's config when it was taken: a restore or a fork runs with these devices. */
  config: vmConfigSchema,
});

export interface Snapshot extends SnapshotRecord {
  dir: string;
  config: VmConfig;
  /** The RAM as a file of its own (mapped privately by restores and forks), or null (in the state). */
  ramFile: string | null;
  stateFile: string;
  disk: string;
}

export function snapshotsDir(vm: VmRef): string {
  return join(vm.dir, SNAPSHOTS_DIR);
}

/** The snapshot's files, or undefined when there is none of that name. */
export async function readSnapshot(vm: VmRef, name: string): Promise<Snapshot | undefined> {
  const dir = join(snapshotsDir(vm), name);
  let record: z.infer<typeof recordSchema>;
  try {
    record = recordSchema.parse(JSON.parse(await readFile(join(dir, SNAPSHOT_RECORD), "utf8")));
  } catch {
    return undefined;
  }
  const hasRam = await exists(join(dir, MEMORY_FILE));
  return {
    name: record.name,
    vm: record.vm,
    createdAt: record.createdAt,
    memory: record.memory,
    bytes: await bytesOf(dir),
    dir,
    config: record.config,
    ramFile: hasRam ? join(dir, MEMORY_FILE) : null,
    stateFile: join(dir, STATE_FILE),
    disk: join(dir, DISK_FILE),
  };
}

/** The VM's snapshots, oldest first. */
export async function listSnapshots(vm: VmRef): Promise<Snapshot[]> {
  const entries = await readdir(snapshotsDir(vm)).catch(() => [] as string[]);
  const found = await Promise.all(
    entries.filter((e) => !e.startsWith(".")).map((entry) => readSnapshot(vm, entry)),
  );
  return found
    .filter((s): s is Snapshot => s !== undefined)
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name));
}

export function publicRecord(snapshot: Snapshot): SnapshotRecord {
  const { name, vm, createdAt, memory, bytes } = snapshot;
  return { name, vm, createdAt, memory, bytes };
}

export async function writeRecord(dir: string, record: z.infer<typeof recordSchema>) {
  await writeFileAtomic(join(dir, SNAPSHOT_RECORD), `${JSON.stringify(record, null, 2)}\n`);
}

/** A clear 400 when the file system of `dir` has less than `bytes` free. */
export async function checkRoom(dir: string, bytes: number, what: string) {
  const info = await statfs(dir);
  const free = info.bavail * info.bsize;
  if (free < bytes) {
    throw new HostError(
      "failed",
      `Not enough disk space for ${what}: about ${formatBytes(bytes)} is needed, ${formatBytes(free)} is free`,
    );
  }
}

/** Removes a snapshot's directory: out of the list at once (renamed), then its files. */
export async function removeSnapshotDir(dir: string, trash: string) {
  await rename(dir, trash);
  await rm(trash, { recursive: true, force: true });
}

/** Bytes the files of `dir` take on disk. */
export async function bytesOf(dir: string): Promise<number> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  const sizes = await Promise.all(
    entries.map((e) =>
      stat(join(dir, e)).then(
        (s) => (s.isFile() ? s.blocks * 512 : 0),
        () => 0,
      ),
    ),
  );
  return sizes.reduce((a, b) => a + b, 0);
}

async function exists(path: string) {
  return stat(path).then(
    () => true,
    () => false,
  );
}

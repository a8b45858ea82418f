/**
 * A hibernated QEMU VM on disk (docs/host.md#hibernate-and-resume): `<vm>/hibernation/` holds what a
 * memory snapshot holds, less the disk (the VM's own disk is not written while it sleeps):
 * `state.bin` (the devices, through QEMU's migration; and the RAM when it was not a file of its
 * own), `memory.ram` (the RAM file, copied sparsely out of /dev/shm) and `hibernation.json` (the
 * address, ports and VNC password it had, so that it comes back as itself). The record is written
 * last and the directory renamed into place: a hibernation without its record is not one.
 *
 * A resumed VM maps `memory.ram` privately (as a restore does), so the directory stays while that
 * QEMU runs, without its record and state (consumed: the guest has moved on). It goes when the VM
 * stops, hibernates again (its RAM then goes in the stream) or is deleted.
 *
 * `.hangar-hibernate.json` in the VM's directory is the intent of a hibernate or a resume in
 * progress, written before anything changes; a service killed mid-way finds it at start and
 * finishes to one side (`settleIntent`): hibernated, or running, never both and never neither.
 */
import { mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { flushFile, writeFileAtomic } from "../../common/atomic-write.js";
import { type Session, sessionSchema } from "./session.js";
import { bytesOf, MEMORY_FILE, STATE_FILE } from "./snapshots.js";
import { vmConfigSchema } from "./vm-config.js";
import type { VmRef } from "./vm-store.js";
import { tempPath } from "./vm-store.js";

export const HIBERNATION_DIR = "hibernation";
export const HIBERNATION_RECORD = "hibernation.json";
export const INTENT_FILE = ".hangar-hibernate.json";

const recordSchema = z.object({
  hibernatedAt: z.string(),
  /** The VM's config then: its devices are what the saved state fits. */
  config: vmConfigSchema,
  /** What the running VM was reached at, kept for its resume. */
  ipAddress: z.string(),
  forwardedPorts: z.record(z.string(), z.number().int()),
  vnc: sessionSchema.shape.vnc,
  restoredFrom: sessionSchema.shape.restoredFrom,
  /**
   * Whether the state was saved with QEMU's `x-ignore-shared` (migration.ts), as it must be loaded;
   * absent in records of earlier versions, which always did.
   */
  ignoreShared: z.boolean().optional(),
});
export type HibernationRecord = z.infer<typeof recordSchema>;

export interface Hibernation extends HibernationRecord {
  dir: string;
  stateFile: string;
  /** The RAM as a file of its own (mapped privately on resume), or null (it is in the state). */
  ramFile: string | null;
  bytes: number;
}

const intentSchema = z.object({
  op: z.enum(["hibernate", "resume"]),
  /** The directory a hibernate builds in (inside the VM's), to finish or remove after a kill. */
  temp: z.string().optional(),
});
export type Intent = z.infer<typeof intentSchema>;

export function hibernationDir(vm: VmRef): string {
  return join(vm.dir, HIBERNATION_DIR);
}

/** The VM's complete hibernation, or undefined (none, or one consumed by a resume). */
export async function readHibernation(vm: VmRef): Promise<Hibernation | undefined> {
  return readHibernationIn(hibernationDir(vm));
}

async function readHibernationIn(dir: string): Promise<Hibernation | undefined> {
  let record: HibernationRecord;
  try {
    record = recordSchema.parse(JSON.parse(await readFile(join(dir, HIBERNATION_RECORD), "utf8")));
  } catch {
    return undefined;
  }
  const hasRam = await stat(join(dir, MEMORY_FILE)).then(
    () => true,
    () => false,
  );
  return {
    ...record,
    dir,
    stateFile: join(dir, STATE_FILE),
    ramFile: hasRam ? join(dir, MEMORY_FILE) : null,
    bytes: await bytesOf(dir),
  };
}

/** What a hibernation keeps of the running VM's session. */
export function recordOf(
  session: Session,
  config: HibernationRecord["config"],
  ignoreShared: boolean,
): HibernationRecord {
  return {
    ignoreShared,
    hibernatedAt: new Date().toISOString(),
    config,
    ipAddress: session.ipAddress,
    forwardedPorts: session.forwardedPorts,
    vnc: session.vnc,
    restoredFrom: session.restoredFrom,
  };
}

/** A new directory to build a hibernation in, inside the VM's (renamed into place when complete). */
export async function newBuildDir(vm: VmRef): Promise<string> {
  const dir = await tempPath(vm.dir, "hibernation-");
  await mkdir(dir);
  return dir;
}

/** Writes the record last, after the files it describes are on disk (flushed). */
export async function completeBuild(dir: string, record: HibernationRecord) {
  for (const file of [STATE_FILE, MEMORY_FILE]) await flushFile(join(dir, file));
  await writeFileAtomic(join(dir, HIBERNATION_RECORD), `${JSON.stringify(record, null, 2)}\n`, {
    mode: 0o600,
  });
}

/** Puts a complete build in place; what was there (a resumed VM's RAM file) goes aside, then away. */
export async function installBuild(vm: VmRef, build: string) {
  const target = hibernationDir(vm);
  const trash = await tempPath(vm.dir, "old-hibernation-");
  await rename(target, trash).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "ENOENT") throw err;
  });
  await rename(build, target);
  await rm(trash, { recursive: true, force: true });
}

/**
 * After a resume: the saved state is spent (the guest runs on from it), so the record and the
 * state go; the RAM file stays while the resumed QEMU maps it. Idempotent.
 */
export async function consume(vm: VmRef) {
  const dir = hibernationDir(vm);
  await rm(join(dir, HIBERNATION_RECORD), { force: true });
  await rm(join(dir, STATE_FILE), { force: true });
}

/** Removes the hibernation directory (the VM stopped, or its saved state was given up). */
export async function discard(vm: VmRef) {
  const dir = hibernationDir(vm);
  const trash = await tempPath(vm.dir, "old-hibernation-");
  await rename(dir, trash).catch(() => undefined);
  await rm(trash, { recursive: true, force: true });
}

/** A consumed hibernation (a resumed VM's RAM file) whose QEMU is gone: removed. */
export async function dropStale(vm: VmRef, running: boolean) {
  if (running) return;
  const dir = hibernationDir(vm);
  const present = await stat(dir).then(
    () => true,
    () => false,
  );
  if (present && !(await readHibernation(vm))) await discard(vm);
}

export async function readIntent(vm: VmRef): Promise<Intent | undefined> {
  try {
    return intentSchema.parse(JSON.parse(await readFile(join(vm.dir, INTENT_FILE), "utf8")));
  } catch {
    return undefined;
  }
}

export function writeIntent(vm: VmRef, intent: Intent) {
  return writeFileAtomic(join(vm.dir, INTENT_FILE), `${JSON.stringify(intent)}\n`);
}

export function clearIntent(vm: VmRef) {
  return rm(join(vm.dir, INTENT_FILE), { force: true });
}

/** A build directory of an intent, when it is complete (its record written). */
export function readBuild(dir: string): Promise<Hibernation | undefined> {
  return readHibernationIn(dir);
}

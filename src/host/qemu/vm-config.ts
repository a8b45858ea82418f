/**
 * A VM's directory, the one place that knows what lies in it: `config.json` (lume's field names so
 * that lume's tools and images read it: `os`, `cpuCount`, `memorySize` and `diskSize` in bytes,
 * `macAddress`, `display` (`WxH`), `networkMode`; written pretty-printed and atomically), the raw
 * `disk.img`, the UEFI variables `nvram.bin`, and the files a run, a failed start and a push leave.
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { HostError } from "../errors.js";

export const vmConfigSchema = z.looseObject({
  os: z.string(),
  cpuCount: z.number().int().optional(),
  memorySize: z.number().int().optional(),
  diskSize: z.number().int().optional(),
  macAddress: z.string().optional(),
  display: z.string(),
  networkMode: z.string().optional(),
  /**
   * Hangar's: `qcow2` when `disk.img` is a copy-on-write overlay on a snapshot's disk (after a
   * restore, and in a fork); raw otherwise. Never guessed from the file, which the guest writes.
   */
  diskFormat: z.enum(["raw", "qcow2"]).optional(),
  /** The snapshot disk an overlay is built on (an absolute path); what keeps that snapshot. */
  diskBacking: z.string().optional(),
  /** Direct kernel boot (no firmware, no boot loader): a kernel, an initramfs and a command line. */
  kernel: z.string().optional(),
  initrd: z.string().optional(),
  kernelCmdline: z.string().optional(),
});

export type VmConfig = z.infer<typeof vmConfigSchema>;

/** What makes a VM: its settings, its disk and its UEFI variables. */
export const CONFIG_FILE = "config.json";
export const DISK_FILE = "disk.img";
export const NVRAM_FILE = "nvram.bin";
/** While it runs: QEMU's session (see qemu/session.ts), its pid file and its serial console. */
export const SESSION_FILE = "session.json";
export const PID_FILE = "qemu.pid";
export const SERIAL_LOG = "serial.log";
export const QMP_SOCKET = "qmp.sock";
/** The last failure to start, shown as `lastError`. */
export const LAST_ERROR_FILE = "last-error.txt";
/** The last push's state, and the work directory of a push in progress. */
export const PUSH_RECORD_FILE = ".hangar-push.json";
export const PUSH_WORK_DIR = ".hangar-push";
/** The digest of the manifest a pulled VM came from. */
export const MANIFEST_DIGEST_FILE = ".manifest-digest";
/** The VM's snapshots, one directory each (qemu/snapshots.ts). */
export const SNAPSHOTS_DIR = "snapshots";
/** Written while a snapshot has the VM paused; start-up resumes a VM it finds paused so. */
export const SNAPSHOT_MARK_FILE = ".hangar-snapshotting";
/** Written while a restore replaces the VM's disk and QEMU; start-up finishes its disk part. */
export const RESTORE_JOURNAL_FILE = ".hangar-restore.json";

/** Reads and checks `config.json`; the error names the file and what is wrong with it. */
export async function readVmConfig(dir: string): Promise<VmConfig> {
  const path = join(dir, CONFIG_FILE);
  const text = await readFile(path, "utf8").catch(() => {
    throw new HostError("not_found", `The VM has no ${CONFIG_FILE} (${path})`);
  });
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new HostError("failed", `${path} is not valid JSON`);
  }
  const parsed = vmConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new HostError("failed", `${path} is not a VM config: ${parsed.error.issues[0]?.message}`);
  }
  return parsed.data;
}

export function writeVmConfig(dir: string, config: VmConfig) {
  return writeFileAtomic(join(dir, CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`);
}

/** A random unicast, locally administered MAC address. */
export function randomMac(): string {
  const bytes = randomBytes(6);
  bytes[0] = (bytes[0] & 0xfc) | 0x02;
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/** `nat`, `bridged` or `bridged:<iface>` (case-insensitive), as lume accepts them. */
export function parseNetworkMode(mode: string): string {
  const lower = mode.toLowerCase();
  if (lower === "nat" || lower === "bridged") return lower;
  if (lower.startsWith("bridged:")) return `bridged:${mode.slice("bridged:".length)}`;
  throw new HostError(
    "invalid_params",
    `Invalid network mode '${mode}'. Expected 'nat', 'bridged', or 'bridged:<interface>'.`,
  );
}

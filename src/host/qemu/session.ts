/**
 * What a running VM leaves next to its files: `session.json` (QEMU's pid, QMP socket, VNC address
 * and password, loopback address, forwarded ports, shared directories) and QEMU's own `qemu.pid`.
 * A restarted service finds its VMs again from these; a session whose QEMU is gone is stale and
 * removed, so a VM whose QEMU exited by itself reads as stopped.
 */
import { createHash } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { processRunning } from "../../os/pid.js";
import { PID_FILE, QMP_SOCKET, SESSION_FILE } from "./vm-config.js";

export const sessionSchema = z.object({
  pid: z.number().int().nullable(),
  qmpSocket: z.string(),
  accelerator: z.string(),
  ipAddress: z.string(),
  /** Guest port → host port, both on `ipAddress`. */
  forwardedPorts: z.record(z.string(), z.number().int()),
  vnc: z.object({ host: z.string(), port: z.number().int().nullable(), password: z.string() }).nullable(),
  sharedDirectories: z.array(z.object({ hostPath: z.string(), tag: z.string(), readOnly: z.boolean() })),
  startedAt: z.string(),
  /** Where the guest's RAM is (args.ts); `shared` RAM is the VM's own file, removed with the session. */
  ram: z.object({ path: z.string(), shared: z.boolean() }).nullable().optional(),
  /** The id this launch gave the guest (fw_cfg opt/hangar/boot-id). */
  bootId: z.string().optional(),
  /** Set while the VM was restored or forked from a snapshot: which one. */
  restoredFrom: z.object({ vm: z.string(), snapshot: z.string() }).optional(),
});

export type Session = z.infer<typeof sessionSchema>;

/** `<vm>/qmp.sock`, or a short path in the temp dir when that would pass the Unix socket limit. */
export function qmpSocketPath(dir: string): string {
  const inside = join(dir, QMP_SOCKET);
  if (Buffer.byteLength(inside) <= 100) return inside;
  const digest = createHash("sha256").update(dir).digest("hex").slice(0, 16);
  return join(tmpdir(), `hangar-qmp-${digest}.sock`);
}

export async function readSession(dir: string): Promise<Session | undefined> {
  try {
    return sessionSchema.parse(JSON.parse(await readFile(join(dir, SESSION_FILE), "utf8")));
  } catch {
    return undefined;
  }
}

export function writeSession(dir: string, session: Session) {
  return writeFileAtomic(join(dir, SESSION_FILE), `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600 });
}

/** The pid of the VM's QEMU from the session, else from QEMU's pid file. */
async function sessionPid(dir: string, session: Session): Promise<number | undefined> {
  if (session.pid) return session.pid;
  const text = await readFile(join(dir, PID_FILE), "utf8").catch(() => "");
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** True when `pid` is alive and is the QEMU that serves `qmpSocket` (not a reused pid). */
export async function isQemuFor(pid: number, qmpSocket: string): Promise<boolean> {
  if (!processRunning(pid)) return false;
  if (process.platform !== "linux") return true;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => undefined);
  if (cmdline === undefined) return false;
  return cmdline.split("\0").some((arg) => arg.includes(qmpSocket));
}

/**
 * The session of a running VM with its live pid, or undefined (stale files are removed). A QEMU
 * whose session file was never written (the service died just after starting it) is still found
 * from its pid file, with what the session would have said about it unknown.
 */
export async function liveSession(dir: string): Promise<(Session & { pid: number }) | undefined> {
  const session = (await readSession(dir)) ?? {
    pid: null,
    qmpSocket: qmpSocketPath(dir),
    accelerator: "unknown",
    ipAddress: "",
    forwardedPorts: {},
    vnc: null,
    sharedDirectories: [],
    startedAt: "",
  };
  const pid = await sessionPid(dir, session);
  if (pid && (await isQemuFor(pid, session.qmpSocket))) return { ...session, pid };
  // A session without a pid yet is a start in progress (its QEMU may still be daemonizing) until
  // the launch could no longer be running.
  const launching = !pid && Date.now() - Date.parse(session.startedAt) < LAUNCH_TIMEOUT_MS;
  if ((pid || session.startedAt) && !launching) await clearSession(dir, session);
  return undefined;
}

/**
 * Where a booted VM keeps its RAM: a file in /dev/shm (memory, as the guest's RAM would be anyway)
 * named after the VM's directory, or `<vm>/ram.shm` when /dev/shm is missing or too small.
 */
export const RAM_DIR = "/dev/shm";
export function ramPathIn(dir: string, useShm: boolean): string {
  if (!useShm) return join(dir, "ram.shm");
  return join(RAM_DIR, `hangar-ram-${createHash("sha256").update(dir).digest("hex").slice(0, 24)}`);
}

/** The longest a QEMU launch may take before it is given up. */
export const LAUNCH_TIMEOUT_MS = 30_000;

export async function clearSession(dir: string, session?: Session) {
  // The VM's own RAM file goes with its QEMU (never a snapshot's, which is mapped, not shared).
  for (const path of new Set([ramPathIn(dir, true), ramPathIn(dir, false)])) await rm(path, { force: true });
  await rm(join(dir, SESSION_FILE), { force: true });
  await rm(join(dir, PID_FILE), { force: true });
  await rm(session?.qmpSocket ?? qmpSocketPath(dir), { force: true });
}

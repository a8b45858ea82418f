/**
 * Starts and stops a VM's QEMU. QEMU daemonizes itself (`-daemonize`): the launching process exits
 * once the machine is set up, with QEMU's error on stderr when it could not start, and the VM keeps
 * running when the service stops or restarts. Stop asks the guest to power down over QMP, waits a
 * bounded time, then quits QEMU (and kills it if even that fails).
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, statfs } from "node:fs/promises";
import { join } from "node:path";
import { processRunning } from "../../os/pid.js";
import { parseDisplay } from "../desktops/limits.js";
import type { StopOutcome } from "../desktops/runtime.js";
import { detectAccelerator, qemuBinary } from "./accel.js";
import { buildQemuArgs, type FwCfgItem, type SharedDirectory } from "./args.js";
import { findFirmware } from "./firmware.js";
import { pickForwarding, sshCandidates } from "./loopback.js";
import { loadState } from "./migration.js";
import { QmpClient } from "./qmp.js";
import {
  clearSession,
  LAUNCH_TIMEOUT_MS,
  qmpSocketPath,
  RAM_DIR,
  ramPathIn,
  readSession,
  type Session,
  writeSession,
} from "./session.js";
import type { VmConfig } from "./vm-config.js";
import { PID_FILE } from "./vm-config.js";

/** The computer server inside the guest. */
export const COMPUTER_SERVER_PORT = 8000;

export interface StartOptions {
  name: string;
  dir: string;
  config: VmConfig;
  vnc: boolean;
  sharedDirectories: { hostPath: string; readOnly: boolean }[];
  /** Loopback addresses other VMs hold. */
  takenAddresses: Set<string>;
  /** The `127.A.B` the VM's address is chosen in (loopback.ts; default `127.0.1`). */
  loopbackNetwork?: string;
  /** Start from a snapshot's state instead of booting (a restore, a fork, a resume). */
  restore?: RestoreFrom;
  /**
   * What a previous run of this VM was reached at (a resume): its address, ports, VNC port and
   * password are taken again when they are free, new ones otherwise; and the snapshot it was
   * restored from, if any, is still said.
   */
  keep?: Pick<Session, "ipAddress" | "forwardedPorts" | "vnc" | "restoredFrom">;
  /** More options of the VM's user-mode network (its egress cage: egress/qemu-cage.ts). */
  netdev?: string[];
  /** More fw_cfg items for the guest (its egress cage's gate and CA). */
  fwCfg?: FwCfgItem[];
}

export interface RestoreFrom {
  vm: string;
  snapshot: string;
  /** The device state (and the RAM, when the snapshot has no RAM file). */
  stateFile: string;
  /** The snapshot's RAM file, mapped privately; null when the RAM is in the state file. */
  ramFile: string | null;
  /** How the state was saved (migration.ts); default true. */
  ignoreShared?: boolean;
}

/** The longest a snapshot's state may take to load (a state with a few GB of RAM in it, under load). */
const LOAD_TIMEOUT_MS = 300_000;

const VNC_PASSWORD_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789";

export async function startQemu(options: StartOptions): Promise<Session & { pid: number }> {
  const accelerator = await detectAccelerator();
  const qmpSocket = qmpSocketPath(options.dir);
  const sharedDirectories: SharedDirectory[] = options.sharedDirectories.map((share, index) => ({
    ...share,
    tag: `hangar${index}`,
  }));
  const taken = new Set(options.takenAddresses);
  const { restore } = options;
  const ram = restore
    ? restore.ramFile
      ? { path: restore.ramFile, shared: false }
      : null
    : {
        path: ramPathIn(options.dir, await shmHasRoom(options.config.memorySize ?? 1024 ** 3)),
        shared: true,
      };
  const bootId = randomBytes(16).toString("hex");
  const { keep } = options;
  let ipAddress = "";
  let forwardedPorts: Record<string, number> = {};
  // Another program (another service, say) may take the chosen ports between the check and
  // QEMU's bind: then the next address is tried (for a resume, its own address first).
  for (let attempt = 1; ; attempt++) {
    if (keep && attempt === 1) {
      ipAddress = keep.ipAddress;
      forwardedPorts = keep.forwardedPorts;
    } else {
      ({ ipAddress, ports: forwardedPorts } = await pickForwarding(
        taken,
        {
          [COMPUTER_SERVER_PORT]: [COMPUTER_SERVER_PORT, 18000, 28000],
          22: await sshCandidates(),
        },
        options.loopbackNetwork,
      ));
    }
    await clearSession(options.dir);
    // The session is on disk before QEMU starts: a service killed from here on finds the VM again,
    // and completes what only the running QEMU can tell (its pid, its VNC port) at start-up.
    await writeSession(options.dir, {
      pid: null,
      qmpSocket,
      accelerator,
      ipAddress,
      forwardedPorts,
      vnc: options.vnc
        ? { host: ipAddress, port: null, password: keep?.vnc?.password ?? vncPassword() }
        : null,
      sharedDirectories,
      startedAt: new Date().toISOString(),
      ram,
      bootId,
      ...(keep
        ? keep.restoredFrom && { restoredFrom: keep.restoredFrom }
        : restore && { restoredFrom: { vm: restore.vm, snapshot: restore.snapshot } }),
    });
    const args = buildQemuArgs({
      name: options.name,
      dir: options.dir,
      config: options.config,
      accelerator,
      firmware: findFirmware(),
      qmpSocket,
      ipAddress,
      forwardedPorts,
      vnc: options.vnc,
      vncPort: keep?.vnc?.port ?? undefined,
      sharedDirectories,
      display: parseDisplay(options.config.display),
      ram,
      bootId,
      clock: Math.floor(Date.now() / 1000),
      incoming: restore !== undefined,
      netdev: options.netdev,
      fwCfg: options.fwCfg,
    });
    try {
      await launchDaemon(qemuBinary(), args);
      break;
    } catch (err) {
      await clearSession(options.dir);
      if (attempt >= 3 || !/host forwarding/i.test((err as Error).message)) throw err;
      taken.add(ipAddress);
    }
  }
  const session = await readSession(options.dir);
  if (!session) throw new Error(`The session of ${options.name} vanished while QEMU started`);
  return completeSession(options.dir, session);
}

/**
 * Loads the snapshot's state into a QEMU that startQemu started with `restore`, and lets it run.
 * Apart from startQemu so that several forks load at once (their launches are one at a time).
 * A QEMU that cannot load it is quit.
 */
export async function resumeFrom(dir: string, session: Session & { pid: number }, restore: RestoreFrom) {
  let qmp: QmpClient | undefined;
  try {
    qmp = await QmpClient.connect(session.qmpSocket);
    await loadState(qmp, restore.stateFile, LOAD_TIMEOUT_MS, restore.ignoreShared ?? true);
    await qmp.execute("cont");
  } catch (err) {
    qmp?.close();
    qmp = undefined;
    await stopQemu(dir, session, 0);
    throw err;
  } finally {
    qmp?.close();
  }
}

/** True when /dev/shm can hold `bytes` more (it is memory: the guest's RAM would take as much). */
async function shmHasRoom(bytes: number): Promise<boolean> {
  try {
    const info = await statfs(RAM_DIR);
    return info.bavail * info.bsize > bytes * 1.1;
  } catch {
    return false;
  }
}

/**
 * Fills in what only the running QEMU knows: its pid (from its pid file), and for VNC the password
 * set over QMP and the port it listens on. Used right after a start, and at start-up for a VM whose
 * service was killed before it got that far. A QEMU that cannot be completed is quit.
 */
export async function completeSession(dir: string, session: Session): Promise<Session & { pid: number }> {
  const pid = session.pid ?? (await readPid(dir));
  let vnc = session.vnc;
  const qmp = await QmpClient.connect(session.qmpSocket);
  try {
    if (vnc) {
      await qmp.execute("set_password", { protocol: "vnc", password: vnc.password });
      const info = await qmp.execute<{ host?: string; service?: string }>("query-vnc");
      vnc = { ...vnc, port: info.service ? Number(info.service) : null };
    }
  } catch (err) {
    await qmp.execute("quit").catch(() => undefined);
    throw err;
  } finally {
    qmp.close();
  }
  const complete = { ...session, pid, vnc };
  await writeSession(dir, complete);
  return complete;
}

/** True when the session still lacks what completeSession adds. */
export function isIncomplete(session: Session): boolean {
  return session.pid === null || (session.vnc !== null && session.vnc.port === null);
}

function vncPassword(): string {
  return Array.from(randomBytes(8), (b) => VNC_PASSWORD_ALPHABET[b % VNC_PASSWORD_ALPHABET.length]).join("");
}

/**
 * Powers the VM down: ACPI power button, `graceMs` for the guest to comply (none: straight to
 * `quit`), then `quit`, then SIGKILL. Resolves once the process has ended, not merely once it let
 * go of its command line (an exiting QEMU frees its memory for a second or more).
 */
export async function stopQemu(
  dir: string,
  session: Session & { pid: number },
  graceMs: number,
): Promise<StopOutcome> {
  const gone = async () => !processRunning(session.pid);
  let outcome: StopOutcome = "quit";
  const qmp = await QmpClient.connect(session.qmpSocket).catch(() => undefined);
  try {
    if (qmp && graceMs > 0) {
      await qmp.execute("system_powerdown").catch(() => undefined);
      if (await waitFor(gone, graceMs)) outcome = "powered down";
    }
    if (qmp && outcome !== "powered down") await qmp.execute("quit").catch(() => undefined);
  } finally {
    qmp?.close();
  }
  if (!(await waitFor(gone, 5000))) {
    outcome = "killed";
    try {
      process.kill(session.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
    await waitFor(gone, 5000);
  }
  await clearSession(dir, session);
  return outcome;
}

function launchDaemon(binary: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), LAUNCH_TIMEOUT_MS);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`Cannot start ${binary}: ${(err as NodeJS.ErrnoException).code ?? err.message}`));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      const detail = output
        .split("\n")
        .filter((line) => line.trim() && !/^VNC server running/.test(line))
        .slice(-5)
        .join("; ");
      reject(new Error(`QEMU failed to start (${signal ?? `exit code ${code}`}): ${detail || "no output"}`));
    });
  });
}

async function readPid(dir: string): Promise<number> {
  const text = await readFile(join(dir, PID_FILE), "utf8");
  const pid = Number.parseInt(text.trim(), 10);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`QEMU wrote no pid to ${PID_FILE}`);
  return pid;
}

async function waitFor(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

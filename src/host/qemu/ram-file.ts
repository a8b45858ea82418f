/**
 * A saved state whose RAM is in the migration stream, rewritten as a RAM file beside a device state
 * without it: the form a resume maps privately, so that it reads only the pages the guest touches
 * instead of the whole stream first (a 2 GB desktop: docs/host.md#hibernate-and-resume).
 *
 * A QEMU of the VM's devices loads the stream into a shared RAM file and saves its device state
 * alone (`x-ignore-shared`). It never runs the guest (`-S`), has no network forwards and no VNC,
 * writes its pid file and serial log in the output directory (its QMP socket too, where the path is
 * short enough), and runs in the foreground with the
 * parent-death signal, so that a `kill -9` of the service ends it too.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { withParentDeathSignal } from "../../os/parent-death.js";
import { parseDisplay } from "../desktops/limits.js";
import { detectAccelerator, qemuBinary } from "./accel.js";
import { buildQemuArgs } from "./args.js";
import { findFirmware } from "./firmware.js";
import { loadState, saveState } from "./migration.js";
import { QmpClient } from "./qmp.js";
import { qmpSocketPath } from "./session.js";
import { MEMORY_FILE, STATE_FILE } from "./snapshots.js";
import type { VmConfig } from "./vm-config.js";
import { PID_FILE, SERIAL_LOG } from "./vm-config.js";

/** How long QEMU may take to open its QMP socket. */
const START_TIMEOUT_MS = 30_000;

export interface RamFileJob {
  /** The VM's name and directory (its disk and NVRAM, which the state refers to). */
  name: string;
  vmDir: string;
  config: VmConfig;
  /** The state with the RAM in it, saved without `x-ignore-shared` (migration.ts). */
  stateFile: string;
  /** Where the RAM file (`memory.ram`) and the new device state (`state.bin`) are written. */
  outDir: string;
  timeoutMs: number;
}

/** Writes `outDir/memory.ram` and `outDir/state.bin` from `stateFile`; throws QEMU's reason. */
export async function writeRamFile(job: RamFileJob): Promise<void> {
  const qmpSocket = qmpSocketPath(job.outDir);
  const args = buildQemuArgs({
    name: job.name,
    dir: job.vmDir,
    runDir: job.outDir,
    config: job.config,
    accelerator: await detectAccelerator(),
    firmware: findFirmware(),
    qmpSocket,
    ipAddress: "127.0.0.1",
    forwardedPorts: {},
    vnc: false,
    sharedDirectories: [],
    display: parseDisplay(job.config.display),
    ram: { path: join(job.outDir, MEMORY_FILE), shared: true },
    bootId: randomBytes(16).toString("hex"),
    clock: Math.floor(Date.now() / 1000),
    incoming: true,
    held: true,
  });
  const [file, argv] = withParentDeathSignal(qemuBinary(), args, "KILL");
  const qemu = spawn(file, argv, { stdio: ["ignore", "ignore", "pipe"] });
  let errors = "";
  qemu.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    errors = (errors + chunk).slice(-2000);
  });
  const exited = once(qemu, "exit").catch(() => undefined);
  qemu.on("error", () => undefined);
  let qmp: QmpClient | undefined;
  try {
    qmp = await connectWhenListening(qmpSocket, () => qemu.exitCode !== null || qemu.signalCode !== null);
    await loadState(qmp, job.stateFile, job.timeoutMs, false);
    await saveState(qmp, join(job.outDir, STATE_FILE), job.timeoutMs, true);
    await qmp.execute("quit").catch(() => undefined);
  } catch (err) {
    const detail = errors.trim().split("\n").slice(-3).join("; ");
    throw new Error(`${(err as Error).message}${detail ? ` (QEMU: ${detail})` : ""}`);
  } finally {
    qmp?.close();
    if (qemu.exitCode === null && qemu.signalCode === null) qemu.kill("SIGKILL");
    await exited;
    await Promise.all(
      [qmpSocket, join(job.outDir, PID_FILE), join(job.outDir, SERIAL_LOG)].map((path) =>
        rm(path, { force: true }),
      ),
    );
  }
}

async function connectWhenListening(socket: string, ended: () => boolean): Promise<QmpClient> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!existsSync(socket)) {
    if (ended()) throw new Error("QEMU ended before it listened for QMP");
    if (Date.now() > deadline)
      throw new Error(`QEMU did not listen for QMP within ${START_TIMEOUT_MS / 1000} s`);
    await sleep(20);
  }
  return QmpClient.connect(socket);
}

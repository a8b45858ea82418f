/**
 * Chooses QEMU's accelerator: KVM when `/dev/kvm` can be opened **and** a guest really runs under
 * it (nested virtualization sometimes opens the device and then stops every guest with an internal
 * error), TCG otherwise. Probed once per process; `HANGAR_ACCEL=kvm|tcg` decides without probing.
 */
import { spawn } from "node:child_process";
import { constants } from "node:fs";
import { access, copyFile, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { qemuValue } from "./escape.js";
import { findFirmware } from "./firmware.js";

export type Accelerator = "kvm" | "tcg";

let probe: Promise<Accelerator> | undefined;

export function detectAccelerator(binary = qemuBinary()): Promise<Accelerator> {
  const forced = process.env.HANGAR_ACCEL;
  if (forced === "kvm" || forced === "tcg") return Promise.resolve(forced);
  probe ??= probeKvm(binary).catch(() => "tcg" as const);
  return probe;
}

/** Resolves when a probe in progress has finished (the service waits for it when closing). */
export function acceleratorSettled(): Promise<unknown> {
  return probe ?? Promise.resolve();
}

/** `qemu-system-<arch>` for this machine (`HANGAR_QEMU` names another binary). */
export function qemuBinary(): string {
  if (process.env.HANGAR_QEMU) return process.env.HANGAR_QEMU;
  const arch = process.arch === "arm64" ? "aarch64" : process.arch === "x64" ? "x86_64" : process.arch;
  return `qemu-system-${arch}`;
}

async function probeKvm(binary: string): Promise<Accelerator> {
  try {
    await access("/dev/kvm", constants.R_OK | constants.W_OK);
  } catch {
    return "tcg";
  }
  const dir = await mkdtemp(join(tmpdir(), "hangar-kvm-probe-"));
  try {
    const firmware = findFirmware();
    const args = ["-nodefaults", "-machine", "accel=kvm", "-cpu", "host", "-m", "64", "-display", "none"];
    if (firmware) {
      await copyFile(firmware.vars, join(dir, "vars.fd"));
      args.push(
        "-drive",
        `if=pflash,format=raw,readonly=on,file=${qemuValue(firmware.code)}`,
        "-drive",
        `if=pflash,format=raw,file=${qemuValue(join(dir, "vars.fd"))}`,
      );
    }
    args.push("-qmp", "stdio");
    return await new Promise<Accelerator>((resolve) => {
      const child = spawn(binary, args, { stdio: ["pipe", "pipe", "ignore"] });
      // QEMU outlives a closed stdin: make sure the probe never survives this process.
      const killChild = () => child.kill("SIGKILL");
      process.once("exit", killChild);
      let output = "";
      const finish = (result: Accelerator) => {
        clearTimeout(timer);
        process.off("exit", killChild);
        killChild();
        resolve(result);
      };
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (chunk: string) => {
        output += chunk;
        const status = /"status":\s*"([a-z-]+)"/.exec(output)?.[1];
        if (status) finish(status === "running" ? "kvm" : "tcg");
      });
      child.on("error", () => finish("tcg"));
      child.on("exit", () => finish("tcg"));
      child.stdin.write('{"execute":"qmp_capabilities"}\n');
      // Give the firmware a moment to run; a broken KVM stops the guest almost at once.
      setTimeout(() => child.stdin.write('{"execute":"query-status"}\n'), 1200);
      const timer = setTimeout(() => finish("tcg"), 5000);
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

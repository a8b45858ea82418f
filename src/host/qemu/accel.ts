/**
 * Chooses QEMU's accelerator: KVM when `/dev/kvm` can be opened **and** a guest really runs under
 * it (nested virtualization sometimes opens the device and then stops every guest with an internal
 * error), TCG otherwise. Probed once per process; `HANGAR_ACCEL=kvm|tcg` decides without probing.
 *
 * The probe's QEMU dies with this process however it ends (a parent-death signal), and the next
 * probe removes a temporary directory its killed process left (src/os/owned-temp-dir.ts).
 */
import { spawn } from "node:child_process";
import { constants } from "node:fs";
import { access, copyFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { makeOwnedTempDir } from "../../os/owned-temp-dir.js";
import { withParentDeathSignal } from "../../os/parent-death.js";
import { qemuValue } from "./escape.js";
import { findFirmware } from "./firmware.js";

export type Accelerator = "kvm" | "tcg";

let probe: Promise<Accelerator> | undefined;
/** How many times, a second apart, the probe's guest must be found running. */
const PROBE_LOOKS = 3;
/** Why guests get TCG, when they do (the probe's finding). */
let tcgReason: string | null = null;

export function detectAccelerator(binary = qemuBinary()): Promise<Accelerator> {
  const forced = process.env.HANGAR_ACCEL;
  if (forced === "kvm" || forced === "tcg") return Promise.resolve(forced);
  probe ??= probeKvm(binary).catch((err: Error) => tcg(`the KVM probe failed: ${err.message}`));
  return probe;
}

/** The accelerator guests get and, when it is TCG, why (`/svc/host/status` says both). */
export async function acceleratorStatus(): Promise<{ accelerator: Accelerator; reason: string | null }> {
  const accelerator = await detectAccelerator();
  if (accelerator === "kvm") return { accelerator, reason: null };
  if (process.env.HANGAR_ACCEL === "tcg") return { accelerator, reason: "HANGAR_ACCEL=tcg chose it" };
  return { accelerator, reason: tcgReason };
}

function tcg(reason: string): Accelerator {
  tcgReason = reason;
  return "tcg";
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
  } catch (err) {
    return tcg(`/dev/kvm cannot be opened (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  const dir = await makeOwnedTempDir("hangar-kvm-probe-");
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
      const child = spawn(...withParentDeathSignal(binary, args, "KILL"), {
        stdio: ["pipe", "pipe", "pipe"],
      });
      let errors = "";
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        errors = (errors + chunk).slice(-2000);
      });
      // QEMU's first error line ("KVM internal error. Suberror: 1"), not the register dump after it.
      const lastError = () =>
        errors
          .split("\n")
          .map((line) => line.trim())
          .find((line) => /error|fail|warn/i.test(line)) ?? "";
      // QEMU outlives a closed stdin; the parent-death signal covers a process killed outright.
      const killChild = () => child.kill("SIGKILL");
      process.once("exit", killChild);
      let output = "";
      let done = false;
      const finish = (result: Accelerator, why?: string) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        process.off("exit", killChild);
        killChild();
        resolve(result === "tcg" ? tcg(why ?? "the KVM probe failed") : result);
      };
      child.stdout.setEncoding("utf8");
      // The guest must be running at every look (a broken KVM may let it run a moment under load).
      let looks = 0;
      child.stdout.on("data", (chunk: string) => {
        output += chunk;
        for (const match of output.matchAll(/"status":\s*"([a-z-]+)"/g)) {
          const status = match[1];
          if (status !== "running") {
            const detail = lastError();
            return finish(
              "tcg",
              `/dev/kvm opens, but a firmware guest under KVM stopped (status ${status}${detail ? `: ${detail}` : ""})`,
            );
          }
        }
        looks = [...output.matchAll(/"status":/g)].length;
        if (looks >= PROBE_LOOKS) finish("kvm");
      });
      child.on("error", (err) =>
        finish("tcg", `QEMU could not be started for the KVM probe: ${err.message}`),
      );
      child.on("exit", () => {
        const detail = lastError();
        finish("tcg", `/dev/kvm opens, but QEMU with KVM exited${detail ? `: ${detail}` : ""}`);
      });
      child.stdin.write('{"execute":"qmp_capabilities"}\n');
      // Give the firmware a moment to run, and look again: a broken KVM stops the guest early.
      const looker = setInterval(() => {
        if (done) clearInterval(looker);
        else child.stdin.write('{"execute":"query-status"}\n');
      }, 1000);
      const timer = setTimeout(
        () => finish("tcg", "a firmware guest under KVM did not answer within 8 s"),
        8000,
      );
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Xvfb on a display number of the test's choosing, so that it can be killed and started again
 * there. Started with `-noreset` unless asked otherwise: without it Xvfb resets when its last client
 * leaves (a probe connection closing, say) and drops connections made during the reset.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, rmSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { withParentDeathSignal } from "../../src/os/parent-death.js";

const execFileAsync = promisify(execFile);

/** A display number nobody uses (no socket, no lock file). */
export function freeDisplayNumber(): number {
  for (let attempt = 0; attempt < 200; attempt++) {
    const n = 300 + Math.floor(Math.random() * 600);
    if (!existsSync(`/tmp/.X11-unix/X${n}`) && !existsSync(`/tmp/.X${n}-lock`)) return n;
  }
  throw new Error("no free display number");
}

/** Starts Xvfb on `:n` and waits until it accepts connections (probed with xdpyinfo). */
export async function startXvfb(
  n: number,
  options: { reset?: boolean; size?: string } = {},
): Promise<ChildProcess> {
  const args = [`:${n}`, "-screen", "0", options.size ?? "640x480x24", "-nolisten", "tcp"];
  if (!options.reset) args.push("-noreset");
  const xvfb = spawn(...withParentDeathSignal("Xvfb", args, "TERM"), { stdio: "ignore" });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (xvfb.exitCode !== null) throw new Error(`Xvfb :${n} exited with ${xvfb.exitCode}`);
    const ok = await execFileAsync("xdpyinfo", ["-display", `:${n}`]).then(
      () => true,
      () => false,
    );
    if (ok) return xvfb;
    await sleep(20);
  }
  xvfb.kill("SIGKILL");
  throw new Error(`Xvfb :${n} did not start`);
}

/** Kills Xvfb and removes the socket and lock file a killed server leaves behind. */
export async function killXvfb(xvfb: ChildProcess, n: number) {
  if (xvfb.exitCode === null && xvfb.signalCode === null) {
    const exited = once(xvfb, "exit");
    xvfb.kill("SIGKILL");
    await exited;
  }
  rmSync(`/tmp/.X11-unix/X${n}`, { force: true });
  rmSync(`/tmp/.X${n}-lock`, { force: true });
}

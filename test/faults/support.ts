/**
 * The fault suite's view from outside: `hangar serve` (the built CLI) in a process of its own, under
 * `prlimit` when asked, with its memory and descriptors read from /proc as an operator would.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { withParentDeathSignal } from "../../src/os/parent-death.js";
import { commandPid } from "../support/cli-process.js";

const CLI = join(import.meta.dirname, "../../bin/hangar.js");

export interface ServeProcess {
  readonly url: string;
  /** The process started: the server, or the launcher whose child it is (cli/launcher.ts). */
  readonly child: ChildProcess;
  /** The server's own process, which limits apply to and signals are sent to. */
  readonly pid: number;
  /** What it logged so far. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts `hangar serve --no-virtual-display --port 0 …args` (`display`: `--virtual-display WxH`
 * instead); `nofile` then limits its descriptors (`prlimit`).
 */
export async function serveProcess(
  args: string[] = [],
  options: { env?: Record<string, string | undefined>; nofile?: number; display?: string } = {},
): Promise<ServeProcess> {
  const display = options.display ? ["--virtual-display", options.display] : ["--no-virtual-display"];
  const serve = [CLI, "serve", ...display, "--port", "0", ...args];
  const child = spawn(...withParentDeathSignal(process.execPath, serve, "TERM"), {
    env: { ...process.env, HANGAR_LOG_LEVEL: "info", ...options.env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (d) => {
      log += String(d);
      const m = /"url":"(https?:\/\/127\.0\.0\.1:\d+)"/.exec(log);
      if (m) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`hangar serve exited with ${code}: ${log}`)));
  });
  const pid = commandPid(child.pid!);
  // Applied once it listens: loading the modules opens more files at once than a tight limit allows.
  if (options.nofile) {
    execFileSync("prlimit", ["--pid", String(pid), `--nofile=${options.nofile}:${options.nofile}`]);
  }
  return {
    url,
    child,
    pid,
    log: () => log,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Resident memory of a process in bytes. */
export function rssBytes(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) * 1024;
}

/** Open file descriptors of a process. */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Descriptors of a process that point into /dev/shm (the MIT-SHM capture segments). */
export function shmSegments(pid: number): number {
  let count = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("/dev/shm/")) count++;
    } catch {
      // closed meanwhile
    }
  }
  return count;
}

/**
 * Runs the built `hangar` command line as a user starts it (a child process of `bin/hangar.js`) and
 * waits until it says where it listens.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { withParentDeathSignal } from "../../src/os/parent-death.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface RunningCli {
  /** The process started: the command itself, or the launcher whose child runs it (cli/launcher.ts). */
  readonly child: ChildProcess;
  /** The pid of the process that runs the command (the launcher's child when there is one). */
  readonly pid: number;
  /** The URL from its "listening" log line. */
  readonly url: string;
  /** Everything it wrote to stderr (its JSON log) and stdout so far. */
  log(): string;
  stdout(): string;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

export async function startCli(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<RunningCli> {
  const child = spawn(...withParentDeathSignal(process.execPath, ["bin/hangar.js", ...args], "TERM"), {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  let stdout = "";
  child.stdout!.on("data", (d) => {
    stdout += String(d);
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (d) => {
      log += String(d);
      const found = /"url":"(https?:\/\/[^"]+)"/.exec(log);
      if (found) resolve(found[1]);
    });
    child.once("exit", (code) => reject(new Error(`hangar ${args.join(" ")} exited (${code}): ${log}`)));
  });
  return {
    child,
    pid: commandPid(child.pid!),
    url,
    log: () => log,
    stdout: () => stdout,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** `pid`, or its child running bin/hangar.js when `pid` is the npm bin's launcher (cli/launcher.ts). */
export function commandPid(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
  const command = children.find(
    (child) => child && readFileSync(`/proc/${child}/cmdline`, "utf8").includes("bin/hangar.js"),
  );
  return command ? Number(command) : pid;
}

/**
 * The step `bin/hangar.js` takes before it loads the command line: some settings can only be given to
 * a process when it starts, so a command that needs them runs again in a child process that has them.
 *
 * - The memory settings (common/memory-env.ts: jemalloc, V8's young generation) for the commands that
 *   run for long, `serve` and `mcp`, on Linux where jemalloc is installed and nothing chose an
 *   allocator already (the systemd unit and the container image set them themselves). Node 20 has no
 *   `execve`, so this costs a second, idle process: about 6 MB of memory of its own, against tens of
 *   megabytes that glibc's allocator keeps after a burst of screenshots and transfers
 *   (docs/performance.md). `HANGAR_ALLOCATOR=system` or any node option of the caller's
 *   (`node --inspect bin/hangar.js serve`) keeps everything in one process.
 * - For `serve`, an environment without `HANGAR_API_KEYS`: deleting a variable from `process.env`
 *   leaves it in `/proc/<pid>/environ`, readable by every command the server runs, so the child gets
 *   the keys over a pipe instead. The launcher itself keeps the variable, as does any process above
 *   it: deployments pass keys in a mounted file (`--api-key-file`); see docs/deploy.md.
 *
 * The launcher passes SIGTERM and SIGHUP on, waits through SIGINT (a terminal's Ctrl-C reaches the
 * child as well), and exits with the child's status. The child stops as on SIGTERM when its launcher
 * is gone, killed with SIGKILL included (`followLauncher`).
 *
 * This module is loaded before anything else: it imports only Node's modules and small constants.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { findJemalloc, memoryEnv, PRELOADED_ENV } from "../common/memory-env.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV } from "../computer/auth/key-env.js";

/** The commands that run until stopped, where the memory settings pay for the second process. */
const LONG_RUNNING = new Set(["serve", "mcp"]);
/** Set in the child's environment: the launcher's pid, which the child watches. */
export const LAUNCHER_PID_ENV = "HANGAR_LAUNCHER_PID";
/** `system` keeps the C library's allocator and the one process. */
export const ALLOCATOR_ENV = "HANGAR_ALLOCATOR";
/** The descriptor on which the child reads the keys. */
const KEYS_FD = 3;
/** How often the child looks whether its launcher is still its parent. */
const LAUNCHER_CHECK_MS = 500;

export interface Relaunch {
  /** The child's environment. */
  env: NodeJS.ProcessEnv;
  /** Keys to hand over on descriptor 3 (taken out of `env`). */
  keys?: string;
}

export interface RelaunchChoice {
  /** Whether the memory settings may be the reason (false where the caller already loaded the CLI). */
  memory: boolean;
}

/**
 * What a child would need that this process lacks, for the command line `argv` (`node`, the script,
 * then the arguments), or undefined when this process can run it as it is.
 */
export function relaunchFor(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  execArgv: readonly string[],
  choice: RelaunchChoice = { memory: true },
): Relaunch | undefined {
  const command = argv[2];
  if (!command || !LONG_RUNNING.has(command) || env[LAUNCHER_PID_ENV]) return undefined;
  if (argv.includes("--help") || argv.includes("-h")) return undefined;
  const child: NodeJS.ProcessEnv = { ...env };
  const memory = choice.memory && execArgv.length === 0 && lacksMemorySettings(env);
  if (memory) Object.assign(child, memoryEnv(env));
  const keys = command === "serve" ? env[API_KEYS_ENV] : undefined;
  if (keys) {
    delete child[API_KEYS_ENV];
    child[API_KEYS_FD_ENV] = String(KEYS_FD);
  }
  if (!memory && !keys) return undefined;
  child[LAUNCHER_PID_ENV] = String(process.pid);
  return { env: child, keys };
}

/** Linux with jemalloc installed, where nobody chose an allocator or V8 settings for this process. */
function lacksMemorySettings(env: NodeJS.ProcessEnv): boolean {
  if (env[ALLOCATOR_ENV] === "system") return false;
  if (env[PRELOADED_ENV] || env.LD_PRELOAD || env.MALLOC_CONF) return false;
  return findJemalloc() !== undefined;
}

/**
 * Runs the command line again in a child when `relaunchFor` says so, and then never returns control
 * to the command line: the process lives on as the child's launcher until it exits. False when this
 * process is to run the command itself.
 */
export function relaunch(argv = process.argv, env = process.env, choice?: RelaunchChoice): boolean {
  const plan = relaunchFor(argv, env, process.execArgv, choice);
  if (!plan) return false;
  const child = spawn(process.execPath, [...process.execArgv, ...argv.slice(1)], {
    env: plan.env,
    stdio: plan.keys === undefined ? "inherit" : ["inherit", "inherit", "inherit", "pipe"],
  });
  if (plan.keys !== undefined) {
    const pipe = child.stdio[KEYS_FD] as NodeJS.WritableStream & { on(e: "error", l: () => void): void };
    pipe.on("error", () => undefined);
    pipe.end(plan.keys);
  }
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  process.on("SIGTERM", forward("SIGTERM"));
  process.on("SIGHUP", forward("SIGHUP"));
  process.on("SIGINT", () => undefined);
  child.on("error", (err) => {
    process.stderr.write(`hangar: cannot start ${argv[2]}: ${err.message}\n`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => process.exit(code ?? 128 + signalNumber(signal)));
  return true;
}

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? (constants.signals[signal] ?? 0) : 0;
}

/**
 * In a child of the launcher: stops this process as SIGTERM does (its cleanups run) once the
 * launcher is no longer its parent, which is how a launcher killed with SIGKILL shows.
 */
export function followLauncher(env = process.env) {
  const launcher = Number(env[LAUNCHER_PID_ENV]);
  delete env[LAUNCHER_PID_ENV];
  if (!Number.isSafeInteger(launcher) || launcher <= 0) return;
  const timer = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(timer);
    process.kill(process.pid, "SIGTERM");
  }, LAUNCHER_CHECK_MS);
  timer.unref();
}

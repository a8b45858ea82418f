/**
 * Runs a shell command line in its own process group, collects its output (bounded) and kills the
 * whole group on timeout or cancellation. The shell is a warm one when a pool is given and can take
 * the command (warm-shells.ts), else a new one spawned from this process.
 */
import { spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { constants } from "node:os";
import type { Readable, Writable } from "node:stream";
import { describeOsError } from "../common/errors.js";
import { asUser, type CommandUser, userCwd, userEnv } from "./command-user.js";
import { reaped, reapWithUs } from "./group-reaper.js";

export interface ShellRun {
  command: string;
  cwd?: string;
  env?: Record<string, string>;
  /** Seconds; the group is killed when it passes. */
  timeoutSeconds?: number;
  signal?: AbortSignal;
  /** Called with each chunk of output as it arrives. */
  onOutput?: (stream: "stdout" | "stderr", data: string) => void;
  /** Bytes kept of each stream (default 64 MiB); the rest is dropped and said so. */
  maxOutputBytes?: number;
  /** Waiting shells to run the command in, when one can take it (warm-shells.ts). */
  warm?: ShellPool;
  /** Give the command a pipe on stdin (`StartedShell.stdin`); a warm shell cannot, so it is spawned. */
  stdin?: boolean;
  /** Run it as this user (`--command-user`); a warm shell, which runs as the server, is not used. */
  user?: CommandUser;
}

/** Shells started ahead: one running the command, or undefined when it is to be spawned. */
export interface ShellPool {
  start(run: ShellRun): StartedShell | undefined;
}

export interface ShellResult {
  stdout: string;
  stderr: string;
  /**
   * The shell's exit status: 128+N when it (or the program it exec'd) was killed by signal N, as a
   * shell reports it; -1 when the timeout or a cancellation killed it.
   */
  returnCode: number;
  timedOut: boolean;
  cancelled: boolean;
  /** Whether a warm shell ran it rather than one spawned for it. */
  warm: boolean;
}

/** A shell running a command: spawned for it, or a warm one. Its pid is its process group's. */
export interface StartedShell {
  readonly pid: number | undefined;
  /** The command's stdin when `ShellRun.stdin` asked for it, else null (stdin is at its end). */
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  readonly warm: boolean;
  /** `exit`: the shell has exited; `close`: and its output pipes are closed. Both with its status. */
  on(event: "exit" | "close", listener: (status: number) => void): this;
  on(event: "error", listener: (err: Error) => void): this;
}

const DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024;
/**
 * Once the shell has exited, output still in the pipes is read for this long. A background child
 * (`sleep 30 &`) holds the pipes open: the reply does not wait for it.
 */
const DRAIN_AFTER_EXIT_MS = 100;
/** How often a finished command's process group is looked at while its timeout still runs. */
const LEFTOVER_CHECK_MS = 1000;

/**
 * Runs the command line. Rejects with a `CommandError` when the shell cannot be started: resource
 * exhaustion (EMFILE, EAGAIN, ENOMEM) is `unavailable`, a command line too long for the system
 * (E2BIG) is `invalid_params`.
 */
export function runShell(options: ShellRun): Promise<ShellResult> {
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;

  return new Promise((resolve, reject) => {
    let child: StartedShell;
    try {
      child = startShell(options);
    } catch (err) {
      reject(describeOsError(err));
      return;
    }
    const out = collector(limit);
    const err = collector(limit);
    let timedOut = false;
    let cancelled = false;
    let settled = false;

    /** Kills the process group, background children included, even after the shell has exited. */
    const killGroup = () => signalGroup(child.pid, "SIGKILL");
    const timer =
      options.timeoutSeconds !== undefined
        ? setTimeout(() => {
            timedOut = !settled;
            killGroup();
          }, options.timeoutSeconds * 1000)
        : undefined;
    const onAbort = () => {
      if (settled) return;
      cancelled = true;
      killGroup();
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });

    const streams = [child.stdout, child.stderr];
    const finish = (code: number) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener("abort", onAbort);
      for (const stream of streams) stream?.destroy();
      if (timedOut || cancelled) {
        clearTimeout(timer);
        killGroup();
      } else if (timer) {
        // With a timeout, what the command left running still dies when it passes.
        watchLeftovers(timer);
      }
      resolve({
        stdout: out.text(),
        stderr: err.text(),
        returnCode: timedOut || cancelled ? -1 : code,
        timedOut,
        cancelled,
        warm: child.warm,
      });
    };
    const fail = (error: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      for (const stream of streams) stream?.destroy();
      killGroup();
      reject(describeOsError(error));
    };
    /**
     * Keeps the timeout while the group has members; once it is empty its id may be reused by an
     * unrelated process group, which the timeout must then not kill.
     */
    const watchLeftovers = (deadline: NodeJS.Timeout) => {
      deadline.unref();
      const check = () => {
        if (groupAlive()) return;
        clearTimeout(deadline);
        clearInterval(watch);
      };
      const watch = setInterval(check, LEFTOVER_CHECK_MS).unref();
      check();
    };
    const groupAlive = () => process.platform !== "win32" && signalGroup(child.pid, 0);

    child.on("error", fail);
    if (!child.stdout || !child.stderr) {
      fail(Object.assign(new Error("the shell's output pipes could not be made"), { code: "EMFILE" }));
      return;
    }
    for (const [stream, name, kept] of [
      [child.stdout, "stdout", out],
      [child.stderr, "stderr", err],
    ] as const) {
      stream.on("error", () => undefined);
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        kept.add(chunk);
        options.onOutput?.(name, chunk);
      });
    }
    onShellEnd(child, finish);
    if (options.signal?.aborted) onAbort();
  });
}

/**
 * Starts the command line in its own process group: in a warm shell when the pool can take it,
 * else in a shell spawned from this process. Throws what `spawn` throws.
 */
export function startShell(options: ShellRun): StartedShell {
  return (options.user ? undefined : options.warm?.start(options)) ?? spawnShell(options);
}

/**
 * Sends `signal` to the process group led by `pid` (to the process alone on Windows); 0 only asks
 * whether the group has members. False when there is no such group (or no pid).
 */
export function signalGroup(pid: number | undefined, signal: NodeJS.Signals | 0): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(process.platform === "win32" ? pid : -pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Calls `ended` once with the shell's exit status: when its output pipes have closed, or
 * `DRAIN_AFTER_EXIT_MS` after it exited when a background child holds them open.
 */
export function onShellEnd(child: StartedShell, ended: (status: number) => void) {
  let drain: NodeJS.Timeout | undefined;
  let done = false;
  const end = (status: number) => {
    if (done) return;
    done = true;
    clearTimeout(drain);
    ended(status);
  };
  child.on("exit", (status) => {
    drain = setTimeout(() => end(status), DRAIN_AFTER_EXIT_MS);
  });
  child.on("close", end);
}

/** Spawns `/bin/sh -c command` (`cmd.exe` on Windows) in a new process group, as `options.user` if given. */
function spawnShell(options: ShellRun): StartedShell {
  const shell = process.platform === "win32" ? "cmd.exe" : "/bin/sh";
  const args = process.platform === "win32" ? ["/d", "/s", "/c", options.command] : ["-c", options.command];
  const { user } = options;
  // The user's own HOME, USER and LOGNAME, under the command's variables.
  const base = user ? userEnv(user, process.env) : process.env;
  const child = spawn(...asUser(user, shell, args), {
    cwd: user ? userCwd(user, options.cwd) : options.cwd,
    env: options.env ? { ...base, ...options.env } : base,
    stdio: [options.stdin ? "pipe" : "ignore", "pipe", "pipe"],
    detached: process.platform !== "win32",
    windowsHide: true,
  });
  const started = Object.assign(new EventEmitter(), {
    pid: child.pid,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    warm: false,
  });
  // Its group dies with this process, even by kill -9, unless it ended first.
  reapWithUs(child.pid);
  child.on("error", (err) => started.emit("error", err));
  child.on("exit", (code, signal) => started.emit("exit", exitStatus(code, signal)));
  child.on("close", (code, signal) => {
    reaped(child.pid);
    started.emit("close", exitStatus(code, signal));
  });
  return started;
}

/** A process's exit status as a shell reports it: its exit code, or 128+N after signal N. */
function exitStatus(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const number = signal ? constants.signals[signal] : undefined;
  return number === undefined ? -1 : 128 + number;
}

function collector(limit: number) {
  const parts: string[] = [];
  let size = 0;
  let dropped = 0;
  return {
    add(chunk: string) {
      if (size >= limit) {
        dropped += chunk.length;
        return;
      }
      parts.push(chunk);
      size += chunk.length;
    },
    text() {
      const text = parts.join("");
      return dropped > 0 ? `${text}\n[hangar: ${dropped} more characters of output were dropped]` : text;
    },
  };
}

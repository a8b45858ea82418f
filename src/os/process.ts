/**
 * Runs a shell command line in its own process group, collects its output (bounded) and kills the
 * whole group on timeout or cancellation.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { describeOsError } from "../common/errors.js";

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
}

export interface ShellResult {
  stdout: string;
  stderr: string;
  /** Exit code; -1 when killed by a signal or the timeout. */
  returnCode: number;
  timedOut: boolean;
  cancelled: boolean;
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
  const shell = process.platform === "win32" ? "cmd.exe" : "/bin/sh";
  const args = process.platform === "win32" ? ["/d", "/s", "/c", options.command] : ["-c", options.command];
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;

  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(shell, args, {
        cwd: options.cwd,
        env: options.env ? { ...process.env, ...options.env } : process.env,
        stdio: ["ignore", "pipe", "pipe"],
        detached: process.platform !== "win32",
        windowsHide: true,
      });
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
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(process.platform === "win32" ? child.pid : -child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
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
    const finish = (code: number | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(drain);
      options.signal?.removeEventListener("abort", onAbort);
      for (const stream of streams) stream?.destroy();
      if (timedOut || cancelled) {
        clearTimeout(timer);
        killGroup();
      } else if (timer) {
        // With a timeout, what the command left running still dies when it passes.
        watchLeftovers(timer);
      }
      resolve({ stdout: out.text(), stderr: err.text(), returnCode: code ?? -1, timedOut, cancelled });
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
    let drain: NodeJS.Timeout | undefined;
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
    const groupAlive = () => {
      if (process.platform === "win32") return false;
      try {
        process.kill(-child.pid!, 0);
        return true;
      } catch {
        return false;
      }
    };

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
    child.on("exit", (code) => {
      drain = setTimeout(() => finish(code), DRAIN_AFTER_EXIT_MS);
    });
    child.on("close", (code) => finish(code));
    if (options.signal?.aborted) onAbort();
  });
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

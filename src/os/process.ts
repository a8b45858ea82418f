/**
 * Runs a shell command line in its own process group, collects its output (bounded) and kills the
 * whole group on timeout or cancellation.
 */
import { spawn } from "node:child_process";

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

export function runShell(options: ShellRun): Promise<ShellResult> {
  const shell = process.platform === "win32" ? "cmd.exe" : "/bin/sh";
  const args = process.platform === "win32" ? ["/d", "/s", "/c", options.command] : ["-c", options.command];
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;

  return new Promise((resolve, reject) => {
    const child = spawn(shell, args, {
      cwd: options.cwd,
      env: options.env ? { ...process.env, ...options.env } : process.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: process.platform !== "win32",
      windowsHide: true,
    });
    const out = collector(limit);
    const err = collector(limit);
    let timedOut = false;
    let cancelled = false;

    const killGroup = () => {
      if (child.pid === undefined || child.exitCode !== null) return;
      try {
        process.kill(process.platform === "win32" ? child.pid : -child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer =
      options.timeoutSeconds !== undefined
        ? setTimeout(() => {
            timedOut = true;
            killGroup();
          }, options.timeoutSeconds * 1000)
        : undefined;
    const onAbort = () => {
      cancelled = true;
      killGroup();
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });

    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      out.add(chunk);
      options.onOutput?.("stdout", chunk);
    });
    child.stderr.on("data", (chunk: string) => {
      err.add(chunk);
      options.onOutput?.("stderr", chunk);
    });
    child.on("error", (error) => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      // Kill anything the command left running in its group (e.g. `sleep 100 &`) on timeout/cancel.
      if (timedOut || cancelled) killGroup();
      resolve({
        stdout: out.text(),
        stderr: err.text(),
        returnCode: code ?? -1,
        timedOut,
        cancelled,
      });
    });
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

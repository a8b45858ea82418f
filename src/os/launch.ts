/** Starts a program that outlives the request (an app, a document opener) and reports its pid. */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { delimiter, join } from "node:path";
import { CommandError } from "../common/errors.js";

export interface LaunchOptions {
  /** Extra environment variables (e.g. the desktop's `DISPLAY`). */
  env?: Readonly<Record<string, string>>;
}

/**
 * Runs `file` with `args` directly, or, without args, `file` as a shell command line. Resolves once
 * the process has started; its output is discarded and it is not waited for.
 */
export function launchDetached(file: string, args: readonly string[] | null, options: LaunchOptions = {}) {
  const shell = process.platform === "win32" ? "cmd.exe" : "/bin/sh";
  const [command, commandArgs] =
    args && args.length > 0
      ? [file, [...args]]
      : [shell, process.platform === "win32" ? ["/d", "/s", "/c", file] : ["-c", file]];
  return new Promise<number>((resolve, reject) => {
    const child = spawn(command, commandArgs, {
      env: { ...process.env, ...options.env },
      stdio: "ignore",
      detached: true,
      windowsHide: true,
    });
    child.once("error", (err: NodeJS.ErrnoException) => {
      reject(
        new CommandError(
          err.code === "ENOENT" ? "not_found" : "failed",
          err.code === "ENOENT" ? `No such program: ${file}` : `Could not start ${file}: ${err.message}`,
        ),
      );
    });
    child.once("spawn", () => {
      child.unref();
      resolve(child.pid as number);
    });
  });
}

/** Opens a URL or a file with the desktop's default application. */
export function openWithDefaultApp(target: string, options: LaunchOptions = {}) {
  if (process.platform === "darwin") return launchDetached("open", [target], options);
  if (process.platform === "win32")
    return launchDetached("cmd.exe", ["/d", "/c", "start", '""', target], options);
  for (const [opener, args] of [
    ["xdg-open", [target]],
    ["gio", ["open", target]],
  ] as const) {
    if (onPath(opener)) return launchDetached(opener, [...args], options);
  }
  throw new CommandError("not_supported", "No opener is installed (xdg-open or gio) to open files and URLs");
}

function onPath(program: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => dir && existsSync(join(dir, program)));
}

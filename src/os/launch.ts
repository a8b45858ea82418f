/** Starts a program that outlives the request (an app, a document opener) and reports its pid. */
import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { basename, delimiter, join } from "node:path";
import { CommandError } from "../common/errors.js";
import { asUser, type CommandUser, userCwd, userEnv } from "./command-user.js";

export interface LaunchOptions {
  /** Extra environment variables (e.g. the desktop's `DISPLAY`). */
  env?: Readonly<Record<string, string>>;
  /** Run it as this user (`--command-user`). */
  user?: CommandUser;
}

/**
 * Runs `file` with `args` directly, or, without args, `file` as a shell command line. Resolves once
 * the process has started; its output is discarded and it is not waited for. The program (the
 * command line's first word) must be found first: a shell would start and fail on its own, with a
 * pid that suggests success.
 */
export function launchDetached(
  givenFile: string,
  givenArgs: readonly string[] | null,
  options: LaunchOptions = {},
) {
  // Toolkits that read it (ATK bridges, Chromium's among them) put their widgets on the bus.
  const { user } = options;
  const base = user ? userEnv(user, process.env) : process.env;
  const env: NodeJS.ProcessEnv = { ACCESSIBILITY_ENABLED: "1", ...base, ...options.env };
  const { file, args } = withRendererAccessibility(givenFile, givenArgs);
  const program = args && args.length > 0 ? file : firstWord(file);
  if (program !== undefined && !findProgram(program, env.PATH)) {
    return Promise.reject(
      new CommandError(
        "not_found",
        program.includes("/")
          ? `No such program: ${program} (not an executable file)`
          : `No such program: ${program} (not found on PATH)`,
      ),
    );
  }
  const shell = process.platform === "win32" ? "cmd.exe" : "/bin/sh";
  const [command, commandArgs] =
    args && args.length > 0
      ? [file, [...args]]
      : [shell, process.platform === "win32" ? ["/d", "/s", "/c", file] : ["-c", file]];
  return new Promise<number>((resolve, reject) => {
    const child = spawn(...asUser(user, command, commandArgs), {
      env,
      cwd: user ? userCwd(user, undefined) : undefined,
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

/** Chromium and the browsers built on it, by their program's name. */
const CHROMIUM =
  /^(chromium|chromium-browser|chrome|google-chrome(-stable|-beta|-unstable)?|microsoft-edge(-stable|-beta|-dev)?|brave-browser)$/;
export const RENDERER_ACCESSIBILITY = "--force-renderer-accessibility";

/**
 * A Chromium started with its renderer accessibility on (`--force-renderer-accessibility`): without
 * it the pages' content is not in the accessibility tree until an assistive technology asks for it.
 * Added after the program (in its arguments, or after the first word of a command line).
 */
export function withRendererAccessibility(
  file: string,
  args: readonly string[] | null,
): { file: string; args: readonly string[] | null } {
  if (args && args.length > 0) {
    const chromium = CHROMIUM.test(basename(file)) && !args.includes(RENDERER_ACCESSIBILITY);
    return { file, args: chromium ? [RENDERER_ACCESSIBILITY, ...args] : args };
  }
  const program = firstWord(file);
  if (!program || !CHROMIUM.test(basename(program)) || file.includes(RENDERER_ACCESSIBILITY)) {
    return { file, args };
  }
  const at = file.indexOf(program) + program.length;
  return { file: `${file.slice(0, at)} ${RENDERER_ACCESSIBILITY}${file.slice(at)}`, args };
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
    if (findProgram(opener, process.env.PATH)) return launchDetached(opener, [...args], options);
  }
  throw new CommandError("not_supported", "No opener is installed (xdg-open or gio) to open files and URLs");
}

/** The executable `program` names: a path as it is, a bare name looked up on `path`. */
export function findProgram(program: string, path = process.env.PATH): string | undefined {
  const executable = (file: string) => {
    try {
      accessSync(file, constants.X_OK);
      return statSync(file).isFile();
    } catch {
      return false;
    }
  };
  if (program.includes("/")) return executable(program) ? program : undefined;
  for (const dir of (path ?? "").split(delimiter)) {
    if (dir && executable(join(dir, program))) return join(dir, program);
  }
  return undefined;
}

/** Shell words that are not programs on PATH: their command lines are left to the shell. */
const SHELL_WORDS = new Set([
  "cd",
  "exec",
  "export",
  "set",
  "eval",
  "if",
  "for",
  "while",
  "case",
  "{",
  "(",
  ".",
]);

/**
 * The program a simple command line starts (`xterm -e top` → `xterm`), or undefined when the line
 * is shell syntax that the shell should interpret (assignments, builtins, quoting, redirections).
 */
function firstWord(line: string): string | undefined {
  const word = line.trim().split(/\s+/)[0] ?? "";
  if (!word || SHELL_WORDS.has(word) || /[=$`'"\\;&|<>(){}*?~]/.test(word)) return undefined;
  return word;
}

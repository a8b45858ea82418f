/**
 * Warm shells: `run_command` without forking the server. To start a process, Node forks itself (a
 * clone that copies its page tables: about 1 ms at 60 MB of memory, 9 ms at 200 MB) and its event
 * loop waits for the fork and the exec, so every other request waits too. Instead, a small `/bin/sh`
 * launcher, started at the first command, keeps a few shells waiting. Each one is `/bin/sh -s` in a
 * session and process group of its own (setsid), blocked reading its script from a FIFO, with
 * stdout and stderr on FIFOs that the server reads. Running a command writes it into a waiting
 * shell and closes the FIFO; the shell reads it, runs it, and meets the end of its input. A watcher
 * (a subshell of the launcher) waits for the shell and reports its exit status. The launcher starts
 * a replacement meanwhile.
 *
 *     server ──"make ids", "start ids"──▶ launcher ──fork──▶ watcher ──&──▶ setsid /bin/sh -s
 *            ◀──"made ids", "ready id pid", "exit id status"───┘
 *
 * What the command sees is what `/bin/sh -c` gives it: the same environment and working directory,
 * stdin at its end, stdout and stderr, exit statuses (128+N after signal N, on both paths), error
 * messages ("/bin/sh: 1: x: not found", line numbers included), `$0`, `$-`, EXIT traps, and default
 * signal dispositions (`env --default-signal`: a shell started in the background would ignore
 * SIGINT and SIGQUIT). That holds for dash, the only shell used so: it reads a script from a pipe
 * 8 KiB at a time (bash reads it byte by byte, and a command reading stdin would eat the lines
 * after it) and forks the last command of `-c` as it does that of `-s` (bash execs it).
 *
 * The server's side of a waiting shell is three descriptors: the script FIFO (held open for
 * reading and writing, so that the shell's read does not end before its command comes, and does end
 * when the server dies) and the two output FIFOs (read ends, opened before the shell opens them so
 * that no output is lost). The FIFOs live in a private 0700 directory named after the server's pid,
 * and each is unlinked as soon as both ends are open.
 */
import { readdirSync, realpathSync, rm } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { type Logger, silentLogger } from "../common/logger.js";
import { processExists } from "./pid.js";
import type { ShellPool, ShellRun, StartedShell } from "./process.js";
import {
  FIFO_DIRECTORY_PREFIX,
  Launcher,
  type LauncherEnd,
  type PoolSizes,
  RESTART_DELAY_MS,
} from "./shell-launcher.js";

/**
 * Shells kept waiting at most after a burst (`hangar serve --warm-shells`): 32 cover a burst of 30
 * commands back to back (a benchmark round) at 65 processes and about 6.5 MB; longer bursts spawn the rest.
 */
export const DEFAULT_WARM_SHELLS = 32;
/**
 * Shells kept waiting while commands come one at a time. A command that finds none waiting (a
 * burst) raises that to the maximum for a while (shell-launcher.ts).
 */
const IDLE_SHELLS = 4;
/**
 * The longest script a waiting shell takes (bytes). The shell reads its input 8 KiB at a time; the
 * whole script must arrive in one read so that a command reading stdin finds it at its end.
 */
const LONGEST_SCRIPT = 8000;

export interface WarmShellsOptions {
  /** Shells kept waiting at most (default `DEFAULT_WARM_SHELLS`). */
  max?: number;
  /** Shells kept waiting while commands come one at a time (default 4, at most `max`). */
  idle?: number;
  log?: Logger;
}

/**
 * The pool of waiting shells of one server. `start()` hands a command to a waiting shell, or
 * answers undefined when the command should be spawned the usual way: not on Linux, a system
 * without what the launcher needs, a command with its own environment variables or a stdin pipe,
 * one the protocol cannot carry, no shell waiting, or a launcher that has just died.
 */
export class WarmShells implements ShellPool {
  private readonly sizes: PoolSizes;
  private readonly log: Logger;
  private launcher?: Launcher;
  private unsupported = process.platform !== "linux";
  private closed = false;
  private notBefore = 0;
  private swept = false;

  constructor(options: WarmShellsOptions = {}) {
    if (!this.unsupported && !systemShellIsDash()) this.unsupported = true;
    const max = options.max ?? DEFAULT_WARM_SHELLS;
    this.sizes = { max, idle: Math.min(options.idle ?? IDLE_SHELLS, max) };
    this.log = options.log ?? silentLogger;
  }

  /** A shell already running the command, or undefined when the caller should spawn one. */
  start(run: ShellRun): StartedShell | undefined {
    if (this.unsupported || this.closed || run.env || run.stdin) return undefined;
    const launcher = this.currentLauncher();
    if (!launcher) return undefined;
    const script = scriptOf(run.command, run.cwd ?? process.cwd(), launcher.cwd);
    return script ? launcher.take(script) : undefined;
  }

  /**
   * Starts the launcher now rather than at the first command and resolves once the shells kept
   * while idle wait, or when the launcher cannot keep them.
   */
  async warmUp(): Promise<void> {
    await this.currentLauncher()?.waitForIdle();
  }

  /** Stops the launcher, kills the waiting shells and removes their directory. Running commands go on. */
  close() {
    this.closed = true;
    this.launcher?.retire();
    this.launcher = undefined;
  }

  /** The launcher to take a shell from, started or restarted as needed; undefined while none can run. */
  private currentLauncher(): Launcher | undefined {
    if (this.unsupported || this.closed) return undefined;
    const current = this.launcher;
    if (current?.alive && current.environmentIsCurrent()) return current;
    if (current) {
      // A changed environment (a virtual display exports DISPLAY) needs shells that have it.
      if (current.alive) this.log.debug("warm shells: the environment changed; starting a new launcher");
      current.retire();
      this.launcher = undefined;
    }
    if (Date.now() < this.notBefore) return undefined;
    this.sweepStaleDirectories();
    try {
      this.launcher = new Launcher(this.sizes, this.log, (reason) => this.launcherEnded(reason));
    } catch (err) {
      this.log.warn({ err }, "warm shells: could not start the launcher; commands spawn their shells");
      this.notBefore = Date.now() + RESTART_DELAY_MS;
      return undefined;
    }
    return this.launcher;
  }

  private launcherEnded(reason: LauncherEnd) {
    if (reason.unsupported) {
      this.unsupported = true;
      this.log.info({ reason: reason.unsupported }, "warm shells unavailable; commands spawn their shells");
    } else if (!this.closed) {
      this.log.warn(
        { reason: reason.exit },
        "warm shells: the launcher ended; it restarts at a later command",
      );
      this.notBefore = Date.now() + RESTART_DELAY_MS;
    }
  }

  /** Removes the FIFO directories of servers that died without removing theirs. */
  private sweepStaleDirectories() {
    if (this.swept) return;
    this.swept = true;
    const dir = tmpdir();
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const pid = name.startsWith(FIFO_DIRECTORY_PREFIX)
        ? Number.parseInt(name.slice(FIFO_DIRECTORY_PREFIX.length), 10)
        : 0;
      if (pid && pid !== process.pid && !processExists(pid)) {
        rm(join(dir, name), { recursive: true, force: true }, () => undefined);
      }
    }
  }
}

/** Whether /bin/sh is dash (see the module's comment for why no other shell). */
function systemShellIsDash(): boolean {
  try {
    return basename(realpathSync("/bin/sh")) === "dash";
  } catch {
    return false;
  }
}

/**
 * The text the shell reads: the command, after what makes the shell look like `/bin/sh -c` (`set
 * +s`: `$-` without the s of a shell reading its input) and a `cd` when the command runs elsewhere
 * than the launcher, all on the command's first line so that line numbers in messages stay its own.
 * Undefined when the protocol cannot carry it: a NUL, a newline in the directory, too long.
 */
function scriptOf(command: string, cwd: string, launcherCwd: string): Buffer | undefined {
  if (command.includes("\0") || cwd.includes("\0") || cwd.includes("\n")) return undefined;
  let prefix = "set +s; ";
  if (cwd !== launcherCwd) {
    // `cd` sets OLDPWD; a shell started in the directory has the server's instead.
    const oldPwd = process.env.OLDPWD;
    const restore = oldPwd === undefined ? "unset OLDPWD" : `OLDPWD=${quote(oldPwd)}`;
    prefix += `cd -P -- ${quote(cwd)} && ${restore} || exit; `;
  }
  const script = Buffer.from(prefix + command);
  return script.length <= LONGEST_SCRIPT ? script : undefined;
}

function quote(text: string) {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

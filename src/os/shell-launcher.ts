/**
 * The launcher of warm shells (warm-shells.ts) and the shells it starts, as the server sees them:
 * one `/bin/sh` process reading requests, a watcher per shell reporting its exit, and the server's
 * ends of each shell's FIFOs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import {
  closeSync,
  constants,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../common/logger.js";
import { processRunning } from "./pid.js";
import type { StartedShell } from "./process.js";

/** The FIFO directories are `<tmpdir>/hangar-shells-<server pid>-<random>`. */
export const FIFO_DIRECTORY_PREFIX = "hangar-shells-";
/** After a launcher or a shell that failed to start, the next one starts no sooner than this (ms). */
export const RESTART_DELAY_MS = 1000;
/** A command that finds no shell waiting raises the pool to its maximum for this long (ms). */
const BURST_MEMORY_MS = 5 * 60_000;
/**
 * Replacements are started once no command has been taken for this long (ms): starting a shell
 * costs about 2 ms of CPU (three exec's), which the commands of a burst would wait for (during a
 * burst that empties the pool, commands are spawned as before).
 */
const QUIET_MS = 3;
/** And one at a time, this far apart (ms): about one CPU at most, whatever else runs meanwhile. */
const START_GAP_MS = 2;
/** A retired launcher still running after this long is killed (ms). */
const RETIRE_GRACE_MS = 1000;
/** How often a running command's shell is looked at, in case its watcher died (ms). */
const WATCHER_CHECK_MS = 1000;

/**
 * The launcher, run as `/bin/sh -c LAUNCHER sh DIR`: `shell-launcher.sh` beside this module (the
 * build copies it into dist/), read once when the module loads.
 */
const LAUNCHER = readFileSync(new URL("./shell-launcher.sh", import.meta.url), "utf8");

export interface PoolSizes {
  max: number;
  idle: number;
}

export interface LauncherEnd {
  unsupported?: string;
  exit?: string;
}

/** The server's ends of a new shell's FIFOs: descriptors until the shell is ready. */
interface Fifos {
  script: number;
  stdout: number;
  stderr: number;
}

/** A shell waiting for a command: its pid (and process group) and the server's ends of its FIFOs. */
interface Waiting {
  id: number;
  pid: number;
  script: number;
  stdout: Socket;
  stderr: Socket;
}

let lastId = 0;

/**
 * One launcher and the shells it started. When it is retired (or dies), the shells still running
 * commands go on reporting through its stdout, which stays open as long as one of them lives.
 */
export class Launcher {
  readonly cwd = process.cwd();
  private readonly env = { ...process.env };
  private readonly envNames = Object.keys(this.env);
  private readonly dir = mkdtempSync(join(tmpdir(), `${FIFO_DIRECTORY_PREFIX}${process.pid}-`));
  private readonly child: ChildProcess;
  /** Shells waiting for a command, oldest first. */
  private readonly waiting: Waiting[] = [];
  /** Ids whose FIFOs are made, not yet given to a shell. */
  private readonly made: number[] = [];
  /** FIFOs asked for, not made yet. */
  private requested = 0;
  /** Shells being started: the server's ends of their FIFOs are open. */
  private readonly starting = new Map<number, Fifos>();
  private readonly running = new Map<number, WarmShell>();
  private readonly idleWaiters = new Set<() => void>();
  /** Shells to keep waiting now: the idle size, or the maximum after a burst. */
  private target: number;
  private lastBurst = 0;
  private lastTake = 0;
  private lastStart = 0;
  private pumpTimer?: NodeJS.Timeout;
  private readonly shrinkTimer: NodeJS.Timeout;
  private supplyPausedUntil = 0;
  private reports = "";
  private ended = false;

  constructor(
    private readonly sizes: PoolSizes,
    private readonly log: Logger,
    private readonly onEnd: (reason: LauncherEnd) => void,
  ) {
    this.target = sizes.idle;
    try {
      const lcAll = process.env.LC_ALL;
      const args = ["-c", LAUNCHER, "sh", this.dir, ...(lcAll === undefined ? [] : [lcAll])];
      this.child = spawn("/bin/sh", args, {
        stdio: ["pipe", "pipe", "ignore"],
        // Its own session: a Ctrl-C meant for the server's terminal does not reach it.
        detached: true,
      });
    } catch (err) {
      rmSync(this.dir, { recursive: true, force: true });
      throw err;
    }
    // The launcher never keeps the server's process alive.
    this.child.unref();
    const { stdin, stdout } = this.child;
    for (const stream of [stdin, stdout] as const) {
      (stream as Socket | null)?.unref();
      stream?.on("error", () => undefined);
    }
    stdout?.setEncoding("utf8");
    stdout?.on("data", (text: string) => this.readReports(text));
    // Every watcher holds stdout: once it closes, no shell is left to report an exit.
    stdout?.on("close", () => {
      for (const shell of this.running.values()) shell.exited(-1);
      this.running.clear();
    });
    this.child.on("error", (err) => this.end({ exit: err.message }));
    this.child.on("exit", (code, signal) => {
      this.end({ exit: signal ?? `exit code ${code}` });
      // Its own removal did not run if it was killed.
      this.removeDirectory();
    });
    this.shrinkTimer = setInterval(() => this.shrinkAfterBurst(), BURST_MEMORY_MS).unref();
    this.pump();
  }

  get alive() {
    return !this.ended;
  }

  /** Whether the server's environment is still what the shells were given. */
  environmentIsCurrent(): boolean {
    // Reading names from the snapshot is several times faster than enumerating process.env.
    const env = process.env;
    for (const name of this.envNames) if (env[name] !== this.env[name]) return false;
    return Object.keys(env).length === this.envNames.length;
  }

  /** Hands the script to the oldest waiting shell; undefined when none is waiting. */
  take(script: Buffer): StartedShell | undefined {
    const shell = this.waiting.shift();
    this.lastTake = performance.now();
    if (!shell) {
      // A burst: keep more shells from now on.
      this.target = this.sizes.max;
      this.lastBurst = Date.now();
    }
    this.pump();
    return shell && this.hand(shell, script);
  }

  /** Writes the script into the shell and closes it; undefined when the shell cannot take it. */
  private hand(shell: Waiting, script: Buffer): StartedShell | undefined {
    try {
      writeSync(shell.script, script);
    } catch (err) {
      this.log.debug({ err }, "warm shells: a waiting shell could not take a command");
      dropWaiting(shell);
      return undefined;
    }
    // The end of the script: once the shell has read it, stdin is at its end for the command. Closed
    // here (4 µs at the median): closed on the thread pool, the end reached the shell 0.1 ms later,
    // and the command took that much longer.
    closeQuietly(shell.script);
    shell.stdout.ref();
    shell.stderr.ref();
    const started = new WarmShell(shell.pid, shell.stdout, shell.stderr);
    this.running.set(shell.id, started);
    // A command's exit comes through the launcher's stdout: until then it keeps the process alive.
    (this.child.stdout as Socket | null)?.ref();
    return started;
  }

  /** Resolves once the shells to keep wait, or the launcher has ended. */
  waitForIdle(): Promise<void> {
    return new Promise((resolve) => {
      // The launcher does not keep the process alive; whoever waits for it does.
      const alive = setInterval(() => undefined, 60_000);
      const check = () => {
        if (this.waiting.length < this.target && !this.ended) return;
        this.idleWaiters.delete(check);
        clearInterval(alive);
        resolve();
      };
      this.idleWaiters.add(check);
      check();
    });
  }

  /**
   * Stops it: kills the waiting shells and ends the launcher's input, at which it removes the
   * directory and exits (even if this process exits first: it may be shutting down); killed if it
   * has not within a second.
   */
  retire() {
    this.end({});
    setTimeout(() => this.child.kill("SIGKILL"), RETIRE_GRACE_MS).unref();
  }

  private end(reason: LauncherEnd) {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.pumpTimer);
    clearInterval(this.shrinkTimer);
    for (const shell of this.waiting.splice(0)) dropWaiting(shell);
    for (const fifos of this.starting.values()) closeFifos(fifos);
    this.starting.clear();
    this.child.stdin?.destroy();
    for (const wake of [...this.idleWaiters]) wake();
    if (reason.unsupported || reason.exit) this.onEnd(reason);
  }

  /**
   * Starts shells until `target` wait, once commands pause and one at a time (see QUIET_MS and
   * START_GAP_MS), and asks for their FIFOs ahead.
   */
  private pump() {
    if (this.ended || Date.now() < this.supplyPausedUntil) return;
    const missing = this.target - this.waiting.length - this.starting.size;
    if (missing <= 0) return;
    const wait = Math.max(this.lastTake + QUIET_MS, this.lastStart + START_GAP_MS) - performance.now();
    if (wait > 0) {
      clearTimeout(this.pumpTimer);
      this.pumpTimer = setTimeout(() => this.pump(), wait).unref();
      return;
    }
    const id = this.made.shift();
    if (id !== undefined) this.startShell(id);
    if (this.made.length === 0 && this.requested === 0) {
      const ids = Array.from({ length: this.target }, () => ++lastId);
      this.requested = ids.length;
      this.child.stdin?.write(`make ${ids.join(" ")}\n`);
    }
    if (id !== undefined && missing > 1) {
      clearTimeout(this.pumpTimer);
      this.pumpTimer = setTimeout(() => this.pump(), START_GAP_MS).unref();
    }
  }

  /** Back to the idle size once a burst is long past: the surplus shells are stopped. */
  private shrinkAfterBurst() {
    if (this.target === this.sizes.idle || Date.now() - this.lastBurst < BURST_MEMORY_MS) return;
    this.target = this.sizes.idle;
    for (const shell of this.waiting.splice(this.target)) dropWaiting(shell);
  }

  /** Opens the server's ends of an id's FIFOs, then has the launcher start their shell. */
  private startShell(id: number) {
    try {
      this.starting.set(id, this.openFifos(id));
    } catch (err) {
      this.log.debug({ err }, "warm shells: could not open a shell's FIFOs");
      this.unlinkFifos(id);
      this.pauseSupply();
      return;
    }
    this.lastStart = performance.now();
    this.child.stdin?.write(`start ${id}\n`);
  }

  private readReports(text: string) {
    this.reports += text;
    let end = this.reports.indexOf("\n");
    while (end >= 0) {
      const [word, ...args] = this.reports.slice(0, end).split(" ");
      this.reports = this.reports.slice(end + 1);
      this.report(word, args);
      end = this.reports.indexOf("\n");
    }
  }

  private report(word: string, args: string[]) {
    const ids = args.map(Number);
    switch (word) {
      case "made":
        this.requested = Math.max(0, this.requested - ids.length);
        this.made.push(...ids);
        this.pump();
        break;
      case "failed":
        this.failed(ids);
        break;
      case "ready":
        this.ready(ids[0], ids[1]);
        break;
      case "exit":
        this.exited(ids[0], ids[1]);
        break;
      case "unsupported:":
        this.end({ unsupported: args.join(" ") });
        this.child.kill("SIGKILL");
        break;
    }
  }

  private openFifos(id: number): Fifos {
    const opened: number[] = [];
    try {
      // Read-write: the shell's read waits for a command instead of ending, and ends if the server dies.
      opened.push(openSync(this.fifo(id, "c"), constants.O_RDWR | constants.O_NONBLOCK));
      for (const name of ["o", "e"]) {
        opened.push(openSync(this.fifo(id, name), constants.O_RDONLY | constants.O_NONBLOCK));
      }
    } catch (err) {
      for (const fd of opened) closeQuietly(fd);
      throw err;
    }
    const [script, stdout, stderr] = opened;
    return { script, stdout, stderr };
  }

  private ready(id: number, pid: number) {
    const fifos = this.starting.get(id);
    if (!fifos) return;
    this.starting.delete(id);
    // Both ends of each FIFO are open: the names are no longer needed.
    this.unlinkFifos(id);
    if (this.ended) {
      killGroup(pid);
      closeFifos(fifos);
      return;
    }
    // The sockets are made now rather than when a command comes: that takes a while.
    this.waiting.push({
      id,
      pid,
      script: fifos.script,
      stdout: idleSocket(fifos.stdout),
      stderr: idleSocket(fifos.stderr),
    });
    this.pump();
    for (const wake of [...this.idleWaiters]) wake();
  }

  /** FIFOs that could not be made, or a shell that could not open them. */
  private failed(ids: number[]) {
    for (const id of ids) {
      const fifos = this.starting.get(id);
      if (fifos) {
        closeFifos(fifos);
        this.starting.delete(id);
      } else {
        this.requested = Math.max(0, this.requested - 1);
      }
      this.unlinkFifos(id);
    }
    this.pauseSupply();
  }

  private exited(id: number, status: number) {
    const shell = this.running.get(id);
    if (shell) {
      this.running.delete(id);
      if (this.running.size === 0) (this.child.stdout as Socket | null)?.unref();
      shell.exited(status);
      return;
    }
    // A waiting shell that died (killed from outside): it can no longer take a command.
    const index = this.waiting.findIndex((w) => w.id === id);
    if (index >= 0) {
      dropWaiting(this.waiting[index]);
      this.waiting.splice(index, 1);
      this.pump();
    }
  }

  /** After a failure (descriptors or disk short), no new shell for a while; commands spawn theirs. */
  private pauseSupply() {
    this.supplyPausedUntil = Date.now() + RESTART_DELAY_MS;
    clearTimeout(this.pumpTimer);
    this.pumpTimer = setTimeout(() => this.pump(), RESTART_DELAY_MS).unref();
  }

  private removeDirectory() {
    try {
      rmSync(this.dir, { recursive: true, force: true });
    } catch (err) {
      this.log.warn({ err, dir: this.dir }, "warm shells: could not remove the FIFO directory");
    }
  }

  private fifo(id: number, name: string) {
    return join(this.dir, `${id}.${name}`);
  }

  /** Synchronously: a few microseconds, where an asynchronous unlink costs a thread pool round trip. */
  private unlinkFifos(id: number) {
    for (const name of ["c", "o", "e"]) {
      try {
        unlinkSync(this.fifo(id, name));
      } catch {
        // already gone (the directory was removed)
      }
    }
  }
}

/** A read end that does not keep the process alive while its shell waits. */
function idleSocket(fd: number): Socket {
  const socket = new Socket({ fd, readable: true, writable: false });
  socket.on("error", () => undefined);
  socket.unref();
  return socket;
}

/** Kills a waiting shell and closes the server's ends of its FIFOs. */
function dropWaiting(shell: Waiting) {
  killGroup(shell.pid);
  closeQuietly(shell.script);
  shell.stdout.destroy();
  shell.stderr.destroy();
}

/** A command running in a warm shell, seen as `runShell` sees a spawned one. */
class WarmShell extends EventEmitter implements StartedShell {
  readonly warm = true;
  /** Its stdin is the end of its script. */
  readonly stdin = null;
  private status?: number;
  private open = 2;
  /**
   * Its watcher may die before reporting (a command that kills its parent): once the shell has
   * been gone for a whole check, no report will come.
   */
  private readonly watch: NodeJS.Timeout;

  constructor(
    readonly pid: number,
    readonly stdout: Socket,
    readonly stderr: Socket,
  ) {
    super();
    for (const stream of [stdout, stderr]) {
      stream.on("close", () => {
        this.open--;
        this.closeIfDone();
      });
    }
    let gone = false;
    this.watch = setInterval(() => {
      if (gone) this.exited(-1);
      gone = !processRunning(pid);
    }, WATCHER_CHECK_MS).unref();
  }

  /** The watcher's report: the shell's exit status (128+N after signal N), or -1 when none will come. */
  exited(status: number) {
    if (this.status !== undefined) return;
    clearInterval(this.watch);
    this.status = status;
    this.emit("exit", status);
    this.closeIfDone();
  }

  private closeIfDone() {
    if (this.status !== undefined && this.open === 0) this.emit("close", this.status);
  }
}

function closeFifos(fifos: Fifos) {
  for (const fd of [fifos.script, fifos.stdout, fifos.stderr]) closeQuietly(fd);
}

function closeQuietly(fd: number) {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
}

function killGroup(pid: number) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/**
 * The processes envd started: pipe processes in a process group of their own (a warm shell when
 * one can take them, src/os/), terminals on the PTY sessions of the computer server
 * (transports/pty/). Each keeps its most recent output (bounded) so that a client attaching again
 * (`Connect`, or after its stream was cut) gets what it may have missed: what is kept, then what
 * comes. An ended process is kept a while for its output and exit, as envd keeps its exit.
 *
 * A command runs as `exec <cmd> <args>` in `/bin/sh`, with envd's variables (from `/init`, then the
 * request's) set before it: the pid is the program's own, and its process group is the one signals
 * go to, so that children die with it.
 */
import { existsSync, statSync } from "node:fs";
import { constants } from "node:os";
import type { Readable } from "node:stream";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Logger, silentLogger } from "../../../common/logger.js";
import type { CommandUser } from "../../../os/command-user.js";
import {
  onShellEnd,
  type ShellPool,
  type StartedShell,
  signalGroup,
  startShell,
} from "../../../os/process.js";
import { joinWords, quoteWord } from "../osworld/shell-words.js";
import type { PtySession, PtySessions } from "../pty/pty-sessions.js";
import { waitFor } from "./keepalive.js";

export type OutputStream = "stdout" | "stderr" | "pty";
export interface Ending {
  exitCode: number;
  exited: boolean;
  status: string;
  error?: string;
}
export type ProcessOutput =
  | { type: "output"; stream: OutputStream; data: Buffer }
  | { type: "end"; ending: Ending }
  | { type: "keepalive" };

export interface ProcessConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

export interface StartOptions extends ProcessConfig {
  tag?: string;
  /** A pipe on stdin (default: none, stdin at its end). */
  stdin: boolean;
  /** A terminal of this size instead of pipes. */
  pty?: { cols: number; rows: number };
  /** The process is killed once this passes (the request's timeout, as envd has it); 0: never. */
  timeoutMs: number;
  /** envd's variables (`/init`), under the request's own. */
  baseEnv: Readonly<Record<string, string>>;
}

export interface ProcessesOptions {
  shells?: ShellPool;
  pty: PtySessions;
  /** The user pipe processes run as (`--command-user`); terminals run as the PTY sessions' user. */
  user?: CommandUser;
  /** Output kept per process for clients that attach again (default 1 MiB). */
  replayBytes?: number;
  /** How long an ended process stays findable (default 30 s, as envd). */
  retainMs?: number;
  log?: Logger;
}

/** A client this far behind pauses a pipe process's output until every client is below `RESUME_BYTES`. */
const PAUSE_BYTES = 1024 * 1024;
const RESUME_BYTES = 256 * 1024;
const BACKLOG_POLL_MS = 20;
/** How long the pipes of a process that ended while paused are read before its end is reported. */
const PAUSED_DRAIN_MS = 100;
/** Ended processes kept at most, whatever their age. */
const MAX_RETAINED = 64;
const SIGNAL_NAMES: Partial<Record<NodeJS.Signals, string>> = { SIGKILL: "killed", SIGTERM: "terminated" };

/** One client's view of a process: what was kept, then what comes, then the end. */
export class Subscription {
  private readonly queue: ProcessOutput[] = [];
  private bytes = 0;
  private wake: (() => void) | undefined;
  private closed = false;

  constructor(private readonly onClose: (sub: Subscription) => void) {}

  get queuedBytes(): number {
    return this.bytes;
  }

  push(event: ProcessOutput) {
    if (this.closed) return;
    this.queue.push(event);
    if (event.type === "output") this.bytes += event.data.length;
    this.wake?.();
  }

  /**
   * The next event; a keep-alive when none came for `keepAliveMs`; rejects with the signal's
   * reason once it aborts.
   */
  async next(keepAliveMs: number, signal: AbortSignal): Promise<ProcessOutput> {
    while (this.queue.length === 0) {
      const woke = await waitFor(keepAliveMs, signal, (wake) => {
        this.wake = wake;
      });
      if (!woke) return { type: "keepalive" };
    }
    const event = this.queue.shift()!;
    if (event.type === "output") this.bytes -= event.data.length;
    return event;
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.bytes = 0;
    this.onClose(this);
  }
}

/** What envd's calls do to a running process, by its kind. */
interface Controls {
  writeStdin(data: Buffer): void;
  closeStdin(): void;
  writePty(data: Buffer): void;
  resize(cols: number, rows: number): void;
}

export class EnvdProcess {
  private readonly kept: { stream: OutputStream; data: Buffer }[] = [];
  private keptBytes = 0;
  private readonly subscribers = new Set<Subscription>();
  private ending: Ending | undefined;
  /** The signal envd sent last, to tell a kill from an exit status of 128+N. */
  signalled: NodeJS.Signals | undefined;
  endedAt = 0;
  controls!: Controls;
  /** Called once it has ended. */
  onEnd: (() => void) | undefined;
  /** Called when clients lag (true) and when they have caught up (false). */
  onBacklog: ((lagging: boolean) => void) | undefined;
  private resumeTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly pid: number,
    readonly config: ProcessConfig,
    readonly tag: string | undefined,
    readonly isPty: boolean,
    private readonly replayBytes: number,
  ) {}

  get ended(): boolean {
    return this.ending !== undefined;
  }

  /** Everything kept, then what comes; just the kept output and the end when it has ended. */
  subscribe(): Subscription {
    const sub = new Subscription((s) => this.subscribers.delete(s));
    for (const { stream, data } of this.kept) sub.push({ type: "output", stream, data });
    if (this.ending) sub.push({ type: "end", ending: this.ending });
    else this.subscribers.add(sub);
    return sub;
  }

  output(stream: OutputStream, data: Buffer) {
    if (this.ending || data.length === 0) return;
    this.kept.push({ stream, data });
    this.keptBytes += data.length;
    while (this.keptBytes > this.replayBytes && this.kept.length > 1) {
      this.keptBytes -= this.kept.shift()!.data.length;
    }
    for (const sub of this.subscribers) sub.push({ type: "output", stream, data });
    this.throttle();
  }

  end(ending: Ending) {
    if (this.ending) return;
    this.ending = ending;
    this.endedAt = Date.now();
    clearInterval(this.resumeTimer);
    for (const sub of this.subscribers) sub.push({ type: "end", ending });
    this.subscribers.clear();
  }

  /** The largest backlog of a client, for the terminal's own throttling. */
  backlog(): number {
    let most = 0;
    for (const sub of this.subscribers) most = Math.max(most, sub.queuedBytes);
    return most;
  }

  private throttle() {
    if (!this.onBacklog || this.resumeTimer || this.backlog() <= PAUSE_BYTES) return;
    this.onBacklog(true);
    this.resumeTimer = setInterval(() => {
      if (this.backlog() > RESUME_BYTES && !this.ending) return;
      clearInterval(this.resumeTimer);
      this.resumeTimer = undefined;
      this.onBacklog?.(false);
    }, BACKLOG_POLL_MS);
  }
}

export class EnvdProcesses {
  private readonly running = new Map<number, EnvdProcess>();
  private readonly ended = new Map<number, EnvdProcess>();
  private readonly replayBytes: number;
  private readonly retainMs: number;
  private readonly log: Logger;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly options: ProcessesOptions) {
    this.replayBytes = options.replayBytes ?? 1024 * 1024;
    this.retainMs = options.retainMs ?? 30_000;
    this.log = options.log ?? silentLogger;
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, this.retainMs / 2)).unref();
  }

  list(): EnvdProcess[] {
    return [...this.running.values()];
  }

  /** A running process, or an ended one still kept when `ended` is true; not_found otherwise. */
  find(selector: { pid?: number; tag?: string }, ended = false): EnvdProcess {
    const pools = ended ? [this.running, this.ended] : [this.running];
    for (const pool of pools) {
      if (selector.pid !== undefined) {
        const found = pool.get(selector.pid);
        if (found) return found;
      } else if (selector.tag !== undefined) {
        for (const proc of pool.values()) if (proc.tag === selector.tag) return proc;
      }
    }
    if (selector.pid !== undefined)
      throw new ConnectError(`process with pid ${selector.pid} not found`, Code.NotFound);
    if (selector.tag !== undefined)
      throw new ConnectError(`process with tag ${selector.tag} not found`, Code.NotFound);
    throw new ConnectError("a process selector (pid or tag) is required", Code.InvalidArgument);
  }

  start(options: StartOptions): EnvdProcess {
    if (options.cwd !== undefined && !(existsSync(options.cwd) && statSync(options.cwd).isDirectory())) {
      throw new ConnectError(`cwd '${options.cwd}' does not exist`, Code.InvalidArgument);
    }
    const env = { ...options.baseEnv, ...options.envs };
    const proc = options.pty ? this.startPty(options, env) : this.startPipes(options, env);
    this.ended.delete(proc.pid);
    if (options.tag !== undefined) {
      for (const [pid, old] of this.ended) if (old.tag === options.tag) this.ended.delete(pid);
    }
    this.running.set(proc.pid, proc);
    if (options.timeoutMs > 0) {
      const timer = setTimeout(() => {
        if (!proc.ended) this.signal(proc, "SIGKILL");
      }, options.timeoutMs).unref();
      proc.onEnd = () => clearTimeout(timer);
    }
    this.log.debug({ pid: proc.pid, pty: Boolean(options.pty) }, "envd: process started");
    return proc;
  }

  /** Sends the signal to the process's group (its children too). */
  signal(proc: EnvdProcess, signal: NodeJS.Signals) {
    proc.signalled = signal;
    if (!signalGroup(proc.pid, signal) && !proc.ended) {
      throw new ConnectError(`cannot signal process ${proc.pid}: it has exited`, Code.NotFound);
    }
  }

  close() {
    clearInterval(this.sweeper);
    for (const proc of this.running.values()) signalGroup(proc.pid, "SIGKILL");
    this.running.clear();
    this.ended.clear();
  }

  private startPipes(options: StartOptions, env: Record<string, string>): EnvdProcess {
    const { command, spawnEnv } = commandLine(options, env);
    let child: StartedShell;
    try {
      child = startShell({
        command,
        cwd: options.cwd,
        env: spawnEnv,
        stdin: options.stdin,
        warm: this.options.shells,
        user: this.options.user,
      });
    } catch (err) {
      throw new ConnectError(`cannot start the process: ${(err as Error).message}`, Code.ResourceExhausted);
    }
    if (child.pid === undefined || !child.stdout || !child.stderr) {
      signalGroup(child.pid, "SIGKILL");
      throw new ConnectError(
        "cannot start the process: out of processes or descriptors",
        Code.ResourceExhausted,
      );
    }
    const proc = new EnvdProcess(child.pid, configOf(options), options.tag, false, this.replayBytes);
    const outputs: [Readable, OutputStream][] = [
      [child.stdout, "stdout"],
      [child.stderr, "stderr"],
    ];
    for (const [stream, name] of outputs) {
      stream.on("error", () => undefined);
      stream.on("data", (data: Buffer) => proc.output(name, data));
    }
    let paused = false;
    let exited = false;
    proc.onBacklog = (lagging) => {
      if (exited) return;
      paused = lagging;
      for (const [stream] of outputs) {
        if (lagging) stream.pause();
        else stream.resume();
      }
    };
    const stdin = child.stdin;
    stdin?.on("error", () => undefined);
    let stdinOpen = Boolean(stdin);
    proc.controls = {
      writeStdin: (data) => {
        if (!stdinOpen || !stdin) {
          throw new ConnectError(
            `stdin of process ${proc.pid} is not open: start it with stdin, and do not close it`,
            Code.FailedPrecondition,
          );
        }
        stdin.write(data);
      },
      closeStdin: () => {
        stdinOpen = false;
        stdin?.end();
      },
      writePty: () => {
        throw new ConnectError(
          `process ${proc.pid} has no terminal: send its input as stdin`,
          Code.FailedPrecondition,
        );
      },
      resize: () => {
        throw new ConnectError(`process ${proc.pid} has no terminal to resize`, Code.FailedPrecondition);
      },
    };
    child.on("error", (err) => this.log.warn({ err, pid: proc.pid }, "envd: process error"));
    onShellEnd(child, (status) => {
      exited = true;
      stdinOpen = false;
      stdin?.destroy();
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        for (const [stream] of outputs) stream.destroy();
        this.finish(proc, pipeEnding(status, proc.signalled));
      };
      if (!paused) return finish();
      // Paused for a client that lags when it ended: what the pipes still hold is read first (a
      // background child holding them open is not waited for).
      let open = outputs.length;
      const timer = setTimeout(finish, PAUSED_DRAIN_MS);
      for (const [stream] of outputs) {
        stream.once("close", () => {
          if (--open > 0) return;
          clearTimeout(timer);
          finish();
        });
        stream.resume();
      }
    });
    return proc;
  }

  private startPty(options: StartOptions, env: Record<string, string>): EnvdProcess {
    const { command } = commandLine(options, {});
    let session: PtySession;
    try {
      session = this.options.pty.start({
        command,
        cols: options.pty!.cols,
        rows: options.pty!.rows,
        cwd: options.cwd,
        envs: env,
      });
    } catch (err) {
      throw new ConnectError(`cannot start the terminal: ${(err as Error).message}`, Code.ResourceExhausted);
    }
    const proc = new EnvdProcess(session.pid, configOf(options), options.tag, true, this.replayBytes);
    proc.controls = {
      writeStdin: () => {
        throw new ConnectError(
          `process ${proc.pid} runs on a terminal: send its input as pty`,
          Code.FailedPrecondition,
        );
      },
      closeStdin: () => {
        throw new ConnectError(
          `process ${proc.pid} runs on a terminal: send Ctrl-D (0x04) to end its input`,
          Code.FailedPrecondition,
        );
      },
      writePty: (data) => session.write(data),
      resize: (cols, rows) => session.resize(cols, rows),
    };
    session.subscribe({
      send: (event) => {
        if (event.type === "output") proc.output("pty", event.data);
        else {
          this.finish(proc, ptyEnding(event.code, proc.signalled));
          // Forgotten by the PTY sessions: envd keeps what it needs of it.
          this.options.pty.kill(proc.pid);
        }
      },
      queuedBytes: () => proc.backlog(),
    });
    return proc;
  }

  private finish(proc: EnvdProcess, ending: Ending) {
    proc.end(ending);
    proc.onEnd?.();
    if (this.running.get(proc.pid) === proc) this.running.delete(proc.pid);
    this.ended.set(proc.pid, proc);
    while (this.ended.size > MAX_RETAINED) this.ended.delete(this.ended.keys().next().value!);
    this.log.debug({ pid: proc.pid, status: ending.status }, "envd: process ended");
  }

  private sweep() {
    const before = Date.now() - this.retainMs;
    for (const [pid, proc] of this.ended) if (proc.endedAt < before) this.ended.delete(pid);
  }
}

/**
 * `exec cmd args` with the variables before it. Variables whose names the shell cannot assign
 * (not `[A-Za-z_][A-Za-z0-9_]*`) go into the spawned shell's environment instead.
 */
function commandLine(
  options: ProcessConfig,
  env: Record<string, string>,
): { command: string; spawnEnv?: Record<string, string> } {
  const assignments: string[] = [];
  let spawnEnv: Record<string, string> | undefined;
  for (const [name, value] of Object.entries(env)) {
    if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) assignments.push(`${name}=${quoteWord(value)}`);
    else spawnEnv = { ...spawnEnv, [name]: value };
  }
  const words = joinWords([options.cmd, ...options.args]);
  return { command: [...assignments, "exec", words].join(" "), spawnEnv };
}

function configOf(options: StartOptions): ProcessConfig {
  return { cmd: options.cmd, args: options.args, envs: options.envs, cwd: options.cwd };
}

/** An exit as envd reports it (Go's): `exit status N`, or `signal: killed` when envd's signal ended it. */
function pipeEnding(status: number, signalled: NodeJS.Signals | undefined): Ending {
  const signalNumber = signalled ? constants.signals[signalled] : undefined;
  if (signalled && (status === -1 || status === 128 + (signalNumber ?? 0))) return signalEnding(signalled);
  if (status < 0) {
    const text = "the process's exit status was lost";
    return { exitCode: -1, exited: false, status: text, error: text };
  }
  const text = `exit status ${status}`;
  return { exitCode: status, exited: true, status: text, error: status === 0 ? undefined : text };
}

function ptyEnding(code: number, signalled: NodeJS.Signals | undefined): Ending {
  if (code === -1) return signalEnding(signalled ?? "SIGKILL");
  return pipeEnding(code, signalled);
}

function signalEnding(signal: NodeJS.Signals): Ending {
  const text = `signal: ${SIGNAL_NAMES[signal] ?? signal}`;
  return { exitCode: -1, exited: false, status: text, error: text };
}

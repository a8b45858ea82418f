/**
 * Terminal sessions on pseudo-terminals (`@lydell/node-pty`), identified by the OS pid of the
 * process, as in cua's PTY protocol. Unlike the reference, the most recent output is kept (bounded)
 * and replayed to every subscriber that attaches, so the first prompt is never lost; sessions that
 * nobody uses are reaped after a timeout.
 */
import { createRequire } from "node:module";
import type * as Pty from "@lydell/node-pty";
import { asUser, type CommandUser, userCwd, userEnv } from "../../../os/command-user.js";

/** node-pty (native) is loaded at the first terminal, not with the server. */
let ptyModule: typeof Pty | undefined;
const loadPty = () => {
  ptyModule ??= createRequire(import.meta.url)("@lydell/node-pty") as typeof Pty;
  return ptyModule;
};

export type PtyEvent = { type: "output"; data: Buffer } | { type: "exit"; code: number };
export interface PtySubscriber {
  send(event: PtyEvent): void;
  /** Bytes sent but not yet written to the client; the terminal pauses while a client lags behind. */
  queuedBytes(): number;
}

export interface PtyStart {
  /** Command line run by `/bin/sh -c` (default `bash`). */
  command?: string;
  cols?: number;
  rows?: number;
  cwd?: string;
  /** Merged over the server's environment; `TERM` defaults to `xterm-256color`. */
  envs?: Record<string, string>;
}

export interface PtySessionsOptions {
  /** Bytes of recent output kept for subscribers that attach later (default 256 KiB). */
  scrollbackBytes?: number;
  /** A session without subscribers and without requests for this long is killed (default 15 min). */
  idleMs?: number;
  /** Running sessions that may exist at once (default 64); as many exited ones are kept for their output. */
  maxSessions?: number;
  /** The user sessions run as (`--command-user`; default the server's). */
  user?: CommandUser;
}

/** Output events are cut to at most this many bytes, as the reference does. */
const CHUNK_BYTES = 4096;
/** A subscriber this far behind pauses the terminal's output until every one is below `RESUME_BYTES`. */
const PAUSE_BYTES = 1024 * 1024;
const RESUME_BYTES = 256 * 1024;
const BACKLOG_POLL_MS = 20;

export class PtySession {
  private readonly scrollback: Buffer[] = [];
  private scrollbackSize = 0;
  private readonly subscribers = new Set<PtySubscriber>();
  private exitCode: number | null = null;
  private resumeTimer: NodeJS.Timeout | undefined;
  lastUsed = Date.now();

  constructor(
    private readonly term: Pty.IPty,
    private readonly scrollbackLimit: number,
  ) {
    term.onData((data: string | Buffer) => this.output(Buffer.isBuffer(data) ? data : Buffer.from(data)));
    term.onExit(({ exitCode, signal }) => this.finish(signal ? -1 : exitCode));
  }

  get pid(): number {
    return this.term.pid;
  }
  get cols(): number {
    return this.term.cols;
  }
  get rows(): number {
    return this.term.rows;
  }
  get exited(): boolean {
    return this.exitCode !== null;
  }
  get idle(): boolean {
    return this.subscribers.size === 0;
  }

  info() {
    this.lastUsed = Date.now();
    return { pid: this.pid, cols: this.cols, rows: this.rows };
  }

  write(data: Buffer) {
    this.lastUsed = Date.now();
    if (!this.exited) this.term.write(data as unknown as string);
  }

  resize(cols: number, rows: number) {
    this.lastUsed = Date.now();
    if (!this.exited) this.term.resize(cols, rows);
  }

  /**
   * Sends the kept output at once, then live events, and `exit` last. Returns the unsubscribe
   * function. A subscriber attached after the exit gets the kept output and the exit event.
   */
  subscribe(subscriber: PtySubscriber): () => void {
    this.lastUsed = Date.now();
    for (const chunk of this.scrollback) subscriber.send({ type: "output", data: chunk });
    if (this.exitCode !== null) {
      subscriber.send({ type: "exit", code: this.exitCode });
      return () => undefined;
    }
    this.subscribers.add(subscriber);
    return () => {
      this.subscribers.delete(subscriber);
      this.lastUsed = Date.now();
    };
  }

  /** Kills the process; subscribers get an `exit` event with code -1 if it has not exited yet. */
  kill() {
    if (this.exited) return;
    try {
      this.term.kill("SIGKILL");
    } catch {
      // already gone
    }
    this.finish(-1);
  }

  private output(data: Buffer) {
    for (let offset = 0; offset < data.length; offset += CHUNK_BYTES) {
      const chunk = data.subarray(offset, offset + CHUNK_BYTES);
      this.keep(chunk);
      for (const subscriber of this.subscribers) this.deliver(subscriber, { type: "output", data: chunk });
    }
    this.throttle();
  }

  /** Pauses reading the terminal while a subscriber lags, so a flood cannot fill the server's memory. */
  private throttle() {
    if (this.resumeTimer || !this.lagging(PAUSE_BYTES)) return;
    this.term.pause();
    this.resumeTimer = setInterval(() => {
      if (this.exited || !this.lagging(RESUME_BYTES)) {
        clearInterval(this.resumeTimer);
        this.resumeTimer = undefined;
        if (!this.exited) this.term.resume();
      }
    }, BACKLOG_POLL_MS);
  }

  private lagging(limit: number): boolean {
    for (const subscriber of this.subscribers) if (subscriber.queuedBytes() > limit) return true;
    return false;
  }

  /** A subscriber whose connection failed is dropped; it never takes the terminal (or the server) down. */
  private deliver(subscriber: PtySubscriber, event: PtyEvent) {
    try {
      subscriber.send(event);
    } catch {
      this.subscribers.delete(subscriber);
    }
  }

  private keep(chunk: Buffer) {
    this.scrollback.push(chunk);
    this.scrollbackSize += chunk.length;
    while (this.scrollbackSize > this.scrollbackLimit && this.scrollback.length > 1) {
      this.scrollbackSize -= this.scrollback.shift()!.length;
    }
  }

  private finish(code: number) {
    if (this.exitCode !== null) return;
    this.exitCode = code;
    for (const subscriber of this.subscribers) this.deliver(subscriber, { type: "exit", code });
    this.subscribers.clear();
  }
}

export class PtySessions {
  private readonly sessions = new Map<number, PtySession>();
  private readonly scrollbackBytes: number;
  private readonly idleMs: number;
  private readonly maxSessions: number;
  private readonly user?: CommandUser;
  private readonly reaper: NodeJS.Timeout;

  constructor(options: PtySessionsOptions = {}) {
    this.scrollbackBytes = options.scrollbackBytes ?? 256 * 1024;
    this.idleMs = options.idleMs ?? 15 * 60_000;
    this.maxSessions = options.maxSessions ?? 64;
    this.user = options.user;
    this.reaper = setInterval(() => this.reap(), Math.min(60_000, Math.max(50, this.idleMs / 4)));
    this.reaper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Starts a session; throws with a message a person can act on when the limit is reached. */
  start(options: PtyStart): PtySession {
    this.forgetExited();
    if (this.running() >= this.maxSessions) {
      throw new Error(
        `Too many terminal sessions (${this.maxSessions}); DELETE /pty/{pid} the ones not needed`,
      );
    }
    const command = options.command?.trim() || defaultShell();
    const [file, args] =
      process.platform === "win32" ? ["powershell.exe", ["-Command", command]] : ["/bin/sh", ["-c", command]];
    const { user } = this;
    const base = user ? userEnv(user, process.env) : process.env;
    const term = loadPty().spawn(...asUser(user, file, args), {
      name: options.envs?.TERM ?? "xterm-256color",
      cols: options.cols ?? 80,
      rows: options.rows ?? 24,
      cwd: options.cwd ?? (user ? userCwd(user, undefined) : process.cwd()),
      env: { ...base, TERM: "xterm-256color", ...options.envs } as Record<string, string>,
      encoding: null,
    });
    const session = new PtySession(term, this.scrollbackBytes);
    this.sessions.set(session.pid, session);
    return session;
  }

  get(pid: number): PtySession | undefined {
    return this.sessions.get(pid);
  }

  /** Kills and forgets a session; false when there is none with that pid. */
  kill(pid: number): boolean {
    const session = this.sessions.get(pid);
    if (!session) return false;
    session.kill();
    this.sessions.delete(pid);
    return true;
  }

  /** Sessions whose process has not exited: only these count toward `maxSessions`. */
  private running(): number {
    let count = 0;
    for (const session of this.sessions.values()) if (!session.exited) count++;
    return count;
  }

  /** Keeps at most `maxSessions` exited sessions (for their exit code and output), forgetting the oldest. */
  private forgetExited() {
    const exited = [...this.sessions.values()].filter((s) => s.exited);
    exited.sort((a, b) => a.lastUsed - b.lastUsed);
    for (const session of exited.slice(0, Math.max(0, exited.length - this.maxSessions + 1))) {
      this.sessions.delete(session.pid);
    }
  }

  /** Kills sessions nobody has subscribed to or asked about for `idleMs`. */
  reap(now = Date.now()) {
    for (const [pid, session] of this.sessions) {
      if (session.idle && now - session.lastUsed >= this.idleMs) this.kill(pid);
    }
  }

  close() {
    clearInterval(this.reaper);
    for (const pid of [...this.sessions.keys()]) this.kill(pid);
  }
}

function defaultShell(): string {
  return process.platform === "win32" ? "powershell" : "bash";
}

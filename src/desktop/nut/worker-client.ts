/**
 * Runs the nut-js worker process and talks to it: one request, one reply, matched by id. When the
 * worker dies (no display, X server gone, native crash) every pending call fails with `unavailable`
 * and the next call starts a fresh worker, so the server itself never goes down with nut-js.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { CommandError } from "../../common/errors.js";
import type { Logger } from "../../common/logger.js";
import type { OpName, WorkerOps, WorkerReply } from "./protocol.js";

export interface NutWorkerOptions {
  /** Variables of the desktop (`DISPLAY`, …) given to the worker on top of the server's own. */
  env?: Record<string, string>;
  log?: Logger;
  /** How long loading nut-js and opening the display may take (default 20 s). */
  startTimeoutMs?: number;
  /** How long one operation may take before the worker is killed (default 15 s). */
  callTimeoutMs?: number;
  /**
   * Runs before each start of the worker and fails (`unavailable`) when the desktop cannot be used:
   * nut-js crashes its process when it opens a display that is not there.
   */
  check?: () => Promise<void>;
  /** After a failed start, calls fail at once with the same error for this long (default 1 s). */
  retryDelayMs?: number;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export class NutWorker {
  private child: ChildProcess | null = null;
  private starting: Promise<ChildProcess> | null = null;
  private lastFailure: { error: CommandError; at: number } | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly options: NutWorkerOptions = {}) {}

  /** The environment the worker and the helpers it needs (xclip) run in. */
  get env(): NodeJS.ProcessEnv {
    return { ...process.env, ...this.options.env };
  }

  /** Performs one operation in the worker, starting it first if needed. */
  async call<K extends OpName>(op: K, args: WorkerOps[K][0]): Promise<WorkerOps[K][1]> {
    const child = await this.ready();
    const id = this.nextId++;
    const timeoutMs = this.options.callTimeoutMs ?? 15_000;
    return new Promise<WorkerOps[K][1]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new CommandError(
            "unavailable",
            `nut-js did not finish ${op} within ${timeoutMs} ms; it was restarted`,
          ),
        );
        child.kill("SIGKILL");
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      child.send({ id, op, args }, (err) => {
        if (err)
          this.settle(id, () => new CommandError("unavailable", `The nut-js worker is gone: ${err.message}`));
      });
    });
  }

  /** Resolves once a worker is running with its display open. */
  async ready(): Promise<ChildProcess> {
    if (this.closed) throw new CommandError("unavailable", "The nut-js backend was closed");
    if (this.child) return this.child;
    if (this.lastFailure && Date.now() - this.lastFailure.at < (this.options.retryDelayMs ?? 1000)) {
      throw this.lastFailure.error;
    }
    this.starting ??= this.start().finally(() => {
      this.starting = null;
    });
    return this.starting;
  }

  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    this.child = null;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await exited;
      clearTimeout(timer);
    }
  }

  private async start(): Promise<ChildProcess> {
    try {
      const env = this.env;
      await this.options.check?.();
      const child = await this.spawnWorker(env);
      if (this.closed) {
        child.kill("SIGKILL");
        throw new CommandError("unavailable", "The nut-js backend was closed");
      }
      this.lastFailure = null;
      this.child = child;
      return child;
    } catch (err) {
      const error =
        err instanceof CommandError
          ? err
          : new CommandError("unavailable", `nut-js could not start: ${String(err)}`);
      this.lastFailure = { error, at: Date.now() };
      throw error;
    }
  }

  private spawnWorker(env: NodeJS.ProcessEnv): Promise<ChildProcess> {
    const { file, execArgv } = workerEntry();
    const child = fork(file, [], {
      env,
      execArgv,
      serialization: "advanced",
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    let stderr = "";
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-2000);
    });
    const display = env.DISPLAY ?? "(none)";
    const timeoutMs = this.options.startTimeoutMs ?? 20_000;

    return new Promise<ChildProcess>((resolve, reject) => {
      let started = false;
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new CommandError("unavailable", `nut-js did not start within ${timeoutMs} ms`));
      }, timeoutMs);
      child.on("message", (reply: WorkerReply) => {
        if ("ready" in reply) {
          started = true;
          clearTimeout(timer);
          this.options.log?.debug({ pid: child.pid, display }, "nut-js worker started");
          resolve(child);
        } else {
          this.settle(reply.id, () => reply);
        }
      });
      child.on("error", (err) => {
        clearTimeout(timer);
        reject(new CommandError("unavailable", `nut-js worker could not be started: ${err.message}`));
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        const error = new CommandError("unavailable", describeExit(code, signal, display, stderr, started));
        if (this.child === child) this.child = null;
        if (!started) reject(error);
        else this.options.log?.warn({ code, signal, display }, "nut-js worker exited");
        for (const id of [...this.pending.keys()]) this.settle(id, () => error);
      });
    });
  }

  /** Completes a pending call with a reply or an error. */
  private settle(id: number, outcome: () => WorkerReply | Error) {
    const call = this.pending.get(id);
    if (!call) return;
    this.pending.delete(id);
    clearTimeout(call.timer);
    const result = outcome();
    if (result instanceof Error) call.reject(result);
    else if ("ok" in result && result.ok) call.resolve(result.value);
    else if ("ok" in result) call.reject(new CommandError("failed", `nut-js: ${result.error.message}`));
  }
}

/** The worker's file next to this one: TypeScript under tsx (tests, dev), JavaScript when built. */
function workerEntry(): { file: string; execArgv: string[] } {
  const self = import.meta.url;
  if (self.endsWith(".ts")) {
    return {
      file: fileURLToPath(new URL("./worker.ts", self)),
      execArgv: ["--import", import.meta.resolve("tsx")],
    };
  }
  return { file: fileURLToPath(new URL("./worker.js", self)), execArgv: [] };
}

function describeExit(
  code: number | null,
  signal: NodeJS.Signals | null,
  display: string,
  stderr: string,
  started: boolean,
): string {
  const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  const why = started
    ? `the display ${display} went away or nut-js failed`
    : `nut-js could not open the display ${display}`;
  const detail = stderr.trim().split("\n").slice(-3).join(" | ");
  return `The desktop is unavailable: the nut-js worker ${how} (${why})${detail ? `: ${detail}` : ""}`;
}

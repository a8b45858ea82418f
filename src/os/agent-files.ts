/**
 * The file system of the command user (`--command-user`): every operation runs in a worker process
 * of that user (agent-files-worker.ts), started through `setpriv` as the user's other processes are
 * (command-user.ts). The server runs as root then; its file commands, `/files`, OSWorld's file routes
 * and envd's files can read and write only what the agent itself may, and what they create belongs
 * to the agent, as it would had the agent's own program written it.
 *
 * The worker is the agent's: it has the agent's uid, so the agent can signal or trace it. The server
 * trusts nothing it answers beyond the agent's own rights: a worker that dies or stops answering
 * fails the calls under way (`unavailable`), and the next call starts a new one. Its environment
 * is the user's alone (PATH, HOME, USER, LOGNAME): none of the server's variables.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { CommandError } from "../common/errors.js";
import type { DirEntry, FileInfo, FileSystem, OpenFile } from "../common/file-system.js";
import { type Logger, silentLogger } from "../common/logger.js";
import {
  entryFromWire,
  errorFromWire,
  type FileOp,
  type FileOps,
  type FileReply,
  InfoFromWire,
  MAX_WIRE_READ,
  type WireEntry,
  type WireInfo,
} from "./agent-files-protocol.js";
import { asUser, type CommandUser, userCwd, userEnv } from "./command-user.js";

/** How long one operation may take before the worker is taken for hung and killed. */
const CALL_TIMEOUT_MS = 120_000;
/** How long the worker may take to start (Node's start, as the user). */
const START_TIMEOUT_MS = 20_000;

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export class AgentFileSystem implements FileSystem {
  private child: ChildProcess | undefined;
  private starting: Promise<ChildProcess> | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;
  private readonly log: Logger;

  constructor(
    private readonly user: CommandUser,
    options: { log?: Logger } = {},
  ) {
    this.log = options.log ?? silentLogger;
  }

  stat = async (path: string): Promise<FileInfo> => new InfoFromWire(await this.call("stat", { path }));
  lstat = async (path: string): Promise<FileInfo> => new InfoFromWire(await this.call("lstat", { path }));
  readdir = async (path: string): Promise<string[]> => (await this.call("readdir", { path })).map(String);
  readdirEntries = async (path: string): Promise<DirEntry[]> =>
    (await this.call("readdirEntries", { path })).map((entry: WireEntry) => entryFromWire(entry));
  realpath = async (path: string): Promise<string> => String(await this.call("realpath", { path }));
  readlink = async (path: string): Promise<string> => String(await this.call("readlink", { path }));
  rename = async (from: string, to: string): Promise<void> => void (await this.call("rename", { from, to }));
  rm = async (path: string, options: { recursive: boolean; force: boolean }): Promise<void> =>
    void (await this.call("rm", { path, ...options }));
  rmdir = async (path: string): Promise<void> => void (await this.call("rmdir", { path }));
  unlink = async (path: string): Promise<void> => void (await this.call("unlink", { path }));
  mkdir = async (path: string, options: { recursive?: boolean; mode?: number } = {}): Promise<void> =>
    void (await this.call("mkdir", { path, ...options }));
  statfs = async (path: string): Promise<{ type: number }> => ({
    type: Number((await this.call("statfs", { path })).type),
  });

  open = async (path: string, flags: number, mode?: number): Promise<OpenFile> => {
    const { handle } = await this.call("open", { path, flags, mode });
    return new WorkerFile(this, Number(handle));
  };

  /** Stops the worker; later calls fail. */
  close(): void {
    this.closed = true;
    this.child?.kill("SIGKILL");
    this.failAll(new CommandError("unavailable", "The server is stopping"));
  }

  /** Performs one operation in the worker, starting it first if needed. */
  async call<K extends FileOp>(op: K, args: FileOps[K][0]): Promise<FileOps[K][1]> {
    const child = await this.ready();
    const id = this.nextId++;
    return new Promise<FileOps[K][1]>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.settle(
          id,
          new CommandError(
            "unavailable",
            `The file worker did not finish ${op} within ${CALL_TIMEOUT_MS / 1000} s; it was restarted`,
          ),
        );
        child.kill("SIGKILL");
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
      child.send({ id, op, args }, (err) => {
        if (err) this.settle(id, new CommandError("unavailable", `The file worker is gone: ${err.message}`));
      });
    });
  }

  private ready(): Promise<ChildProcess> {
    if (this.closed) return Promise.reject(new CommandError("unavailable", "The server is stopping"));
    if (this.child) return Promise.resolve(this.child);
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private start(): Promise<ChildProcess> {
    const entry = workerEntry();
    const [setpriv, setprivArgs] = asUser(this.user, process.execPath, entry.execArgv);
    const env = userEnv(this.user, { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin" });
    const child = fork(entry.file, [], {
      execPath: setpriv,
      execArgv: setprivArgs,
      env,
      cwd: userCwd(this.user, undefined),
      serialization: "advanced",
      stdio: ["ignore", "ignore", "pipe", "ipc"],
    });
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      if (stderr.length < 4000) stderr += text;
    });
    return new Promise<ChildProcess>((resolve, reject) => {
      let started = false;
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(
          new CommandError(
            "unavailable",
            `The file worker did not start within ${START_TIMEOUT_MS / 1000} s`,
          ),
        );
      }, START_TIMEOUT_MS);
      child.on("message", (message: FileReply) => {
        // The worker is the agent's process: what it sends is checked before it is read.
        if (!message || typeof message !== "object" || typeof message.id !== "number") return;
        if (!started) {
          started = true;
          clearTimeout(timer);
          this.child = child;
          this.log.debug({ pid: child.pid, user: this.user.name }, "file worker started");
          resolve(child);
          return;
        }
        if (message.ok === true) this.settle(message.id, undefined, message.value);
        else this.settle(message.id, errorFromWire(message.error ?? { message: "the file worker failed" }));
      });
      child.once("error", (err) => {
        clearTimeout(timer);
        if (!started)
          reject(new CommandError("unavailable", `The file worker did not start: ${err.message}`));
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        if (this.child === child) this.child = undefined;
        const why = `The file worker (as ${this.user.name}) ended (${signal ?? `exit ${code}`})${stderr ? `: ${stderr.trim().split("\n").slice(-1)[0]}` : ""}`;
        if (!started) reject(new CommandError("unavailable", why));
        else if (!this.closed)
          this.log.warn({ code, signal }, "file worker ended; the next file operation starts another");
        this.failAll(new CommandError("unavailable", why));
      });
    });
  }

  private settle(id: number, error: Error | undefined, value?: unknown) {
    const call = this.pending.get(id);
    if (!call) return;
    this.pending.delete(id);
    clearTimeout(call.timer);
    if (error) call.reject(error);
    else call.resolve(value);
  }

  private failAll(error: Error) {
    for (const id of [...this.pending.keys()]) this.settle(id, error);
  }
}

/** A file the worker holds open. */
class WorkerFile implements OpenFile {
  constructor(
    private readonly files: AgentFileSystem,
    private readonly handle: number,
  ) {}

  async read(buffer: Buffer, offset: number, length: number, position: number | null) {
    const wanted = Math.min(length, MAX_WIRE_READ);
    const data = (await this.files.call("read", {
      handle: this.handle,
      length: wanted,
      position,
    })) as Uint8Array;
    const bytesRead = Math.min(data.length, wanted);
    buffer.set(data.subarray(0, bytesRead), offset);
    return { bytesRead };
  }

  async write(data: Uint8Array, offset: number, length: number, position: number | null) {
    const part = data.subarray(offset, offset + Math.min(length, MAX_WIRE_READ));
    const written = await this.files.call("write", { handle: this.handle, data: part, position });
    return { bytesWritten: Number(written) };
  }

  async stat(): Promise<FileInfo> {
    return new InfoFromWire((await this.files.call("fstat", { handle: this.handle })) as WireInfo);
  }

  async truncate(length: number) {
    await this.files.call("truncate", { handle: this.handle, length });
  }

  async datasync() {
    await this.files.call("datasync", { handle: this.handle });
  }

  async close() {
    await this.files.call("close", { handle: this.handle });
  }
}

/** The worker's file next to this one: TypeScript under tsx (tests, dev), JavaScript when built. */
function workerEntry(): { file: string; execArgv: string[] } {
  const self = import.meta.url;
  if (self.endsWith(".ts")) {
    return {
      file: fileURLToPath(new URL("./agent-files-worker.ts", self)),
      execArgv: ["--import", import.meta.resolve("tsx")],
    };
  }
  return { file: fileURLToPath(new URL("./agent-files-worker.js", self)), execArgv: [] };
}

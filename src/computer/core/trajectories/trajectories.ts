/**
 * Trajectories: every command any client runs (each transport, batch and `computer_action` steps,
 * a person's take-control input) written to disk as it happens, as a JSON-lines file with the
 * screenshots the agents were sent (schema.ts, docs/trajectories.md). They are fed by the activity
 * timeline (activity.ts), which has already redacted the parameters and decoded the screenshots: the
 * timeline's listener only queues the entry, and the writing happens after the reply is on its way
 * (`setImmediate`), one `write` of whole lines per turn of the event loop, screenshots first, so a
 * kill loses at most the last command and never leaves a step pointing to a missing file.
 *
 * At most one trajectory is open. With `always` (`--trajectory-dir`) one is open from the start and
 * another opens whenever one is closed; otherwise `start()` opens one and `stop()` closes it. Disk use
 * is bounded: past `maxBytes / 4` the open trajectory is closed and continued in a new one
 * (`rotated`), and the oldest closed trajectories are deleted while the directory holds more than
 * `maxBytes`.
 *
 * @example
 * const trajectories = new Trajectories({ activity, dir, always: false, log });
 * const { id } = await trajectories.start("book a flight");
 * … const summary = await trajectories.stop();
 */
import { randomBytes } from "node:crypto";
import { type FileHandle, mkdir, open, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CommandError, describeOsError } from "../../../common/errors.js";
import type { Logger } from "../../../common/logger.js";
import { PACKAGE_VERSION } from "../../../common/version.js";
import { makeDirectory } from "../../../os/make-directory.js";
import { expandPath } from "../../../os/paths.js";
import type { ActivityEntry, ActivityLog, StoredScreenshot } from "../activity.js";
import {
  type EndLine,
  type ScreenshotRef,
  type StartLine,
  type StepLine,
  TRAJECTORY_FORMAT,
  TRAJECTORY_VERSION,
  type TrajectoryLine,
  trajectoryLine,
} from "./schema.js";

export interface TrajectoriesOptions {
  activity: ActivityLog;
  dir: string;
  /** Record every command from the start (`--trajectory-dir`). */
  always: boolean;
  /** Bytes the directory may hold (default 1 GiB). */
  maxBytes?: number;
  log: Logger;
}

export interface TrajectorySummary {
  id: string;
  dir: string;
  name?: string;
  started: string;
  steps: number;
  bytes: number;
}

export interface TrajectoryEntry extends TrajectorySummary {
  state: "recording" | "finished" | "interrupted";
  ended?: string;
}

export const DEFAULT_TRAJECTORY_BYTES = 1024 ** 3;
const STEPS = "steps.jsonl";
const SHOTS = "screenshots";
/** Trajectory ids: their start time and four hex digits, e.g. 20250101-120000.123-ab12. */
export const TRAJECTORY_ID = /^\d{8}-\d{6}\.\d{3}-[0-9a-f]{4}$/;
/** Transports whose commands are a person's (the console's take control). */
const PERSON_TRANSPORTS = new Set(["live"]);
/** Screenshot files remembered per trajectory, for the `seen` of later steps. */
const REMEMBERED_SHOTS = 64;

interface Queued {
  entry: ActivityEntry;
  shot?: StoredScreenshot;
}

/** One open trajectory: its file, the steps waiting to be written, and what it has written. */
class OpenTrajectory {
  readonly startedMs = performance.now();
  readonly started = new Date();
  steps = 0;
  bytes = 0;
  private queue: Queued[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private scheduled = false;
  private failed = false;
  private readonly shots = new Map<number, ScreenshotRef>();

  private constructor(
    readonly id: string,
    readonly dir: string,
    readonly name: string | undefined,
    private readonly file: FileHandle,
    private readonly owner: Trajectories,
  ) {}

  static async open(owner: Trajectories, root: string, name: string | undefined, seen?: StoredScreenshot) {
    const id = newId();
    const dir = join(root, id);
    await mkdir(join(dir, SHOTS), { recursive: true });
    const file = await open(join(dir, STEPS), "a");
    const trajectory = new OpenTrajectory(id, dir, name, file, owner);
    const start: StartLine = {
      type: "start",
      format: TRAJECTORY_FORMAT,
      version: TRAJECTORY_VERSION,
      id,
      ...(name ? { name } : {}),
      started: trajectory.started.toISOString(),
      server: { version: PACKAGE_VERSION },
    };
    // The screenshot agents had last been sent: what the first step's agent was looking at.
    if (seen) start.seen = await trajectory.writeShot(seen);
    await trajectory.writeLines([start]);
    return trajectory;
  }

  get summary(): TrajectorySummary {
    return {
      id: this.id,
      dir: this.dir,
      ...(this.name ? { name: this.name } : {}),
      started: this.started.toISOString(),
      steps: this.steps,
      bytes: this.bytes,
    };
  }

  /** Queues a finished command; called by the timeline's listener, so it does nothing else. */
  enqueue(entry: ActivityEntry, shot: StoredScreenshot | undefined) {
    this.queue.push({ entry, shot });
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flushing = this.flushing.then(() => this.flush());
    });
  }

  /** Writes what is queued, then the end line, and closes the file. */
  async close(end: Omit<EndLine, "type" | "ended" | "steps">) {
    await this.flushing;
    await this.flush();
    const line: EndLine = { type: "end", ended: new Date().toISOString(), steps: this.steps, ...end };
    await this.writeLines([line]).catch(() => undefined);
    await this.file.close().catch(() => undefined);
  }

  /** Waits until everything queued so far is on disk. */
  async settle() {
    await new Promise((resolve) => setImmediate(resolve));
    await this.flushing;
  }

  private async flush() {
    const queued = this.queue;
    if (queued.length === 0 || this.failed) return;
    this.queue = [];
    const lines: StepLine[] = [];
    try {
      for (const { entry, shot } of queued) {
        const screenshot = shot ? await this.writeShot(shot) : undefined;
        lines.push(this.stepOf(entry, screenshot));
      }
      await this.writeLines(lines);
    } catch (err) {
      // A full or vanished disk: the trajectory stops growing; the server goes on.
      this.failed = true;
      this.owner.failed(this, describeOsError(err, this.dir).message);
    }
  }

  private stepOf(entry: ActivityEntry, screenshot: ScreenshotRef | undefined): StepLine {
    this.steps++;
    const seen = entry.seen === undefined ? undefined : this.shots.get(entry.seen);
    return {
      type: "step",
      step: this.steps,
      time: entry.time,
      t_ms: Math.round((Date.parse(entry.time) - this.started.getTime()) * 10) / 10,
      client: entry.transport,
      actor: PERSON_TRANSPORTS.has(entry.transport) ? "person" : "agent",
      command: entry.command,
      params: entry.params,
      ms: entry.ms,
      success: entry.success,
      ...(entry.code === undefined ? {} : { code: entry.code, error: entry.error }),
      ...(entry.point ? { point: entry.point } : {}),
      ...(seen ? { seen } : {}),
      ...(screenshot ? { screenshot } : {}),
    };
  }

  private async writeShot(shot: StoredScreenshot): Promise<ScreenshotRef> {
    const known = this.shots.get(shot.id);
    if (known) return known;
    const file = `${SHOTS}/${shot.id}.${shot.format === "jpeg" ? "jpg" : shot.format}`;
    await writeFile(join(this.dir, file), shot.bytes);
    this.bytes += shot.bytes.length;
    this.owner.grew(this, shot.bytes.length);
    const ref: ScreenshotRef = {
      file,
      width: shot.width,
      height: shot.height,
      scale: shot.scale,
      origin: shot.origin,
    };
    this.shots.set(shot.id, ref);
    if (this.shots.size > REMEMBERED_SHOTS) this.shots.delete(this.shots.keys().next().value as number);
    return ref;
  }

  private async writeLines(lines: TrajectoryLine[]) {
    const text = Buffer.from(lines.map((line) => `${JSON.stringify(line)}\n`).join(""));
    // One write of whole lines: a kill leaves at most the last line cut short.
    let done = 0;
    while (done < text.length) done += (await this.file.write(text, done)).bytesWritten;
    this.bytes += text.length;
    this.owner.grew(this, text.length);
  }
}

export class Trajectories {
  readonly dir: string;
  readonly always: boolean;
  private readonly maxBytes: number;
  private current: OpenTrajectory | undefined;
  /** Opening, closing or rotating: one at a time. */
  private turn: Promise<unknown> = Promise.resolve();
  private total = 0;
  private counted: Promise<void> | undefined;
  private closed = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly options: TrajectoriesOptions) {
    this.dir = expandPath(options.dir);
    this.always = options.always;
    this.maxBytes = options.maxBytes ?? DEFAULT_TRAJECTORY_BYTES;
    this.unsubscribe = options.activity.subscribe((entry) => {
      const shot = entry.screenshot === undefined ? undefined : options.activity.screenshot(entry.screenshot);
      this.current?.enqueue(entry, shot);
    });
    this.ready = this.always
      ? this.start().then(
          () => undefined,
          (err: Error) =>
            options.log.error({ err: err.message, dir: this.dir }, "could not start recording trajectories"),
        )
      : Promise.resolve();
  }

  /** Settles once the first trajectory is open (with `always`); never rejects. */
  readonly ready: Promise<void>;

  /** Opens a new trajectory (closing the open one first). */
  start(name?: string): Promise<TrajectorySummary> {
    return this.inTurn(async () => {
      await this.closeCurrent("stopped");
      return (await this.openNew(name)).summary;
    });
  }

  /**
   * Closes the open trajectory and says what it holds; with `always`, the next one opens at once.
   * Fails with `not_found` when none is open.
   */
  stop(): Promise<TrajectorySummary> {
    return this.inTurn(async () => {
      const closing = this.current;
      if (!closing) {
        throw new CommandError(
          "not_found",
          "No trajectory is being recorded (start one with start_trajectory)",
        );
      }
      await this.closeCurrent("stopped");
      if (this.always && !this.closed) await this.openNew(undefined);
      return closing.summary;
    });
  }

  /** The open trajectory, or null. */
  status(): TrajectorySummary | null {
    return this.current?.summary ?? null;
  }

  /** Waits until every command so far is on disk (for tests and the benchmark). */
  async settle() {
    await this.turn;
    await this.current?.settle();
  }

  /** Every trajectory in the directory, newest first. */
  async list(): Promise<TrajectoryEntry[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const entries = await Promise.all(
      names.filter((name) => TRAJECTORY_ID.test(name)).map((id) => this.describe(id)),
    );
    return entries
      .filter((e): e is TrajectoryEntry => e !== undefined)
      .sort((a, b) => (a.id < b.id ? 1 : -1));
  }

  /** A trajectory's lines (a last line cut short by a crash is left out), or undefined. */
  async read(id: string): Promise<TrajectoryLine[] | undefined> {
    if (!TRAJECTORY_ID.test(id)) return undefined;
    const text = await readFile(join(this.dir, id, STEPS), "utf8").catch(() => undefined);
    if (text === undefined) return undefined;
    const lines: TrajectoryLine[] = [];
    for (const line of text.split("\n")) {
      if (!line) continue;
      try {
        lines.push(JSON.parse(line) as TrajectoryLine);
      } catch {
        // cut short by a crash
      }
    }
    return lines;
  }

  /** The files of a trajectory (relative name, size), steps first; undefined when there is none. */
  async files(id: string): Promise<{ name: string; path: string; size: number }[] | undefined> {
    if (!TRAJECTORY_ID.test(id)) return undefined;
    const root = join(this.dir, id);
    const steps = await stat(join(root, STEPS)).catch(() => undefined);
    if (!steps) return undefined;
    const shots = await readdir(join(root, SHOTS)).catch(() => [] as string[]);
    const files = [{ name: STEPS, path: join(root, STEPS), size: steps.size }];
    for (const shot of shots.sort()) {
      const info = await stat(join(root, SHOTS, shot)).catch(() => undefined);
      if (info?.isFile())
        files.push({ name: `${SHOTS}/${shot}`, path: join(root, SHOTS, shot), size: info.size });
    }
    return files;
  }

  /** Closes the open trajectory (the server is stopping). */
  async close() {
    this.closed = true;
    this.unsubscribe();
    await this.inTurn(() => this.closeCurrent("server stopped")).catch(() => undefined);
  }

  /** Told by an open trajectory of bytes it wrote: rotation and the directory's bound. */
  grew(trajectory: OpenTrajectory, bytes: number) {
    this.total += bytes;
    const current = this.current;
    if (current === trajectory && current.bytes > this.maxBytes / 4) {
      void this.inTurn(async () => {
        if (this.current !== current) return;
        const next = await this.openNew(current.name, current);
        this.options.log.info({ from: current.id, to: next.id }, "trajectory rotated");
      }).catch((err: Error) =>
        this.options.log.error({ err: err.message }, "rotating the trajectory failed"),
      );
    } else if (this.total > this.maxBytes) {
      void this.inTurn(() => this.prune());
    }
  }

  /** Told by an open trajectory that it cannot write any more. */
  failed(trajectory: OpenTrajectory, reason: string) {
    this.options.log.error({ id: trajectory.id, reason }, "the trajectory cannot be written any more");
    void this.inTurn(async () => {
      if (this.current === trajectory) {
        this.current = undefined;
        await trajectory.close({ reason: "stopped" });
      }
    });
  }

  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const next = this.turn.then(work);
    this.turn = next.catch(() => undefined);
    return next;
  }

  private async openNew(name: string | undefined, rotated?: OpenTrajectory): Promise<OpenTrajectory> {
    if (this.closed) throw new CommandError("unavailable", "The server is stopping");
    this.counted ??= this.countExisting();
    await this.counted;
    let opened: OpenTrajectory;
    try {
      await makeDirectory(this.dir);
      const seen = this.options.activity.lastScreenshot();
      opened = await OpenTrajectory.open(this, this.dir, name, seen);
    } catch (err) {
      const reason = describeOsError(err, this.dir);
      throw new CommandError(reason.code, `Cannot record trajectories: ${reason.message}`);
    }
    // Commands go to the new one at once; the old one writes what it had queued, then its end.
    this.current = opened;
    if (rotated) await rotated.close({ reason: "rotated", continued_in: opened.id });
    await this.prune();
    return opened;
  }

  private async closeCurrent(reason: EndLine["reason"]) {
    const closing = this.current;
    this.current = undefined;
    await closing?.close({ reason });
  }

  /** Deletes the oldest closed trajectories while the directory holds more than its bound. */
  private async prune() {
    if (this.total <= this.maxBytes) return;
    const names = (await readdir(this.dir).catch(() => [] as string[]))
      .filter((n) => TRAJECTORY_ID.test(n))
      .sort();
    for (const id of names) {
      if (this.total <= this.maxBytes) break;
      if (id === this.current?.id) continue;
      const size = await directorySize(join(this.dir, id));
      await rm(join(this.dir, id), { recursive: true, force: true });
      this.total -= size;
      this.options.log.info({ id, bytes: size }, "oldest trajectory deleted (the directory's bound)");
    }
  }

  private async countExisting() {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const id of names.filter((n) => TRAJECTORY_ID.test(n)))
      this.total += await directorySize(join(this.dir, id));
  }

  private async describe(id: string): Promise<TrajectoryEntry | undefined> {
    const lines = await this.read(id);
    const start = lines?.find((line) => line.type === "start");
    if (!lines || !start || start.type !== "start") return undefined;
    const end = [...lines].reverse().find((line) => line.type === "end");
    const open = this.current?.id === id;
    return {
      id,
      dir: join(this.dir, id),
      ...(start.name ? { name: start.name } : {}),
      started: start.started,
      steps: lines.filter((line) => line.type === "step").length,
      bytes: await directorySize(join(this.dir, id)),
      state: open ? "recording" : end ? "finished" : "interrupted",
      ...(end?.type === "end" ? { ended: end.ended } : {}),
    };
  }
}

/** Validates one line against the schema (what a reader of the files would do). */
export function parseTrajectoryLine(text: string) {
  return trajectoryLine.safeParse(JSON.parse(text));
}

async function directorySize(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += await directorySize(path);
    else total += (await stat(path).catch(() => undefined))?.size ?? 0;
  }
  return total;
}

let lastIdMs = 0;

/** `20250101-120000.123-ab12`: the start time to the millisecond (later ids sort later), and a nonce. */
function newId(): string {
  lastIdMs = Math.max(Date.now(), lastIdMs + 1);
  const time = new Date(lastIdMs).toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 19);
  return `${time}-${randomBytes(2).toString("hex")}`;
}

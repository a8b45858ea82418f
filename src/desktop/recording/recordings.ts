/**
 * The recordings of one desktop: at most one at a time (a second `start` is refused with the path of
 * the one running), each listed in an index in the recordings directory (`index.jsonl`: a line when
 * it starts, one when it ends) so that the console lists them after a restart too. A recording that
 * ends by itself (disk full, encoder killed, display gone) frees the desktop at once; the next `stop`
 * reports it with its reason.
 *
 * This is the module API other features build on (the console, OSWorld's recording routes):
 *
 * @example
 * const recordings = new Recordings({ desktop, dir: "/var/lib/hangar/recordings", log });
 * await recordings.start({ format: "mp4", fps: 10 });
 * const { path, duration_s, size_bytes, frames } = await recordings.stop();
 *
 * With a command user (`files`: its file system), a recording to a path of the agent's is made in
 * the recordings directory and written to that path through the user's file system once it ends:
 * the path is the user's to create or replace (checked as the user at start), never the server's
 * (which runs as root then).
 */
import { randomBytes } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { appendFile, lstat, open, readFile, unlink } from "node:fs/promises";
import { dirname, extname, join } from "node:path";
import { CommandError, describeOsError, fileKind, notRegularFile } from "../../common/errors.js";
import type { FileSystem } from "../../common/file-system.js";
import type { Logger } from "../../common/logger.js";
import { writeStreamed } from "../../os/files.js";
import { makeDirectory } from "../../os/make-directory.js";
import { expandPath } from "../../os/paths.js";
import type { AudioSource } from "../audio.js";
import type { DesktopProvider } from "../backend.js";
import type { VideoFormat } from "./encoder.js";
import { type RecordingSummary, ScreenRecorder } from "./recorder.js";

export interface RecordingsOptions {
  desktop: DesktopProvider;
  /** Where recordings go when no path is given, and where the index is kept. */
  dir: string;
  /** The ffmpeg program (default `$HANGAR_FFMPEG`, else `ffmpeg` on PATH). */
  ffmpeg?: string;
  /** The desktop's sound (audio.ts): recordings have it as their audio track. */
  audio?: AudioSource;
  /**
   * The command user's file system (`--command-user`): a recording to a given path is written
   * there through it, as that user. Without: the server writes the path itself.
   */
  files?: FileSystem;
  log: Logger;
}

export interface StartRecording {
  /** The file; default `<dir>/<id>.<format>`. */
  path?: string;
  /** Default: from the path's extension (`.webm`), else mp4. */
  format?: VideoFormat;
  /** Frames a second at most (default 10). */
  fps?: number;
  scale?: number;
  maxWidth?: number;
  /** Draw the pointer (default true). */
  cursor?: boolean;
  /** Record the desktop's sound too, when it has one (default true). */
  audio?: boolean;
  /** Replace a file already at `path` (default false: refused). */
  overwrite?: boolean;
}

export type FinishedRecording = RecordingSummary & { id: string };

export interface RecordingEntry {
  id: string;
  path: string;
  format: VideoFormat;
  started: string;
  /** `recording` while it runs; `interrupted` when the server stopped without finishing it. */
  state: "recording" | "finished" | "failed" | "interrupted";
  duration_s?: number;
  size_bytes?: number;
  frames?: number;
  error?: string;
}

export const DEFAULT_RECORDING_FPS = 10;
const INDEX = "index.jsonl";
/** Kernel file systems: nothing there is a place for a video. */
const VIRTUAL_ROOTS = ["/proc", "/sys", "/dev"];

interface Running {
  id: string;
  recorder: ScreenRecorder;
  /** The agent's path the finished video is written to as the command user (the recorder's is the server's). */
  deliverTo?: string;
}

export class Recordings {
  private current: Running | undefined;
  private starting = false;
  /** A recording that ended by itself, reported by the next `stop()`. */
  private endedAlone: Promise<FinishedRecording> | undefined;
  private readonly ffmpeg: string;
  readonly dir: string;

  constructor(private readonly options: RecordingsOptions) {
    this.ffmpeg = options.ffmpeg ?? process.env.HANGAR_FFMPEG ?? "ffmpeg";
    this.dir = expandPath(options.dir);
  }

  /** Starts recording; refuses while one runs. Resolves once the first frame is on its way. */
  async start(request: StartRecording = {}) {
    if (this.current || this.starting) {
      const running = this.current ? `: ${this.current.recorder.path}` : "";
      throw new CommandError(
        "failed",
        `A recording of this display is already running${running}; stop it first (stop_recording)`,
      );
    }
    this.starting = true;
    try {
      const id = newId();
      const { path, format, deliverTo } = await this.prepare(request, id);
      const recorder = await ScreenRecorder.start(
        { desktop: this.options.desktop, ffmpeg: this.ffmpeg, log: this.options.log },
        {
          path,
          format,
          fps: request.fps ?? DEFAULT_RECORDING_FPS,
          scale: request.scale,
          maxWidth: request.maxWidth,
          cursor: request.cursor ?? true,
          audio: request.audio === false ? undefined : this.options.audio,
        },
      ).catch(async (err) => {
        // The empty file made to check the path goes: nothing was recorded.
        await unlink(path).catch(() => undefined);
        if (deliverTo && !request.overwrite)
          await this.options.files?.unlink(deliverTo).catch(() => undefined);
        throw err;
      });
      const running: Running = { id, recorder, deliverTo };
      this.current = running;
      this.endedAlone = undefined;
      void recorder.failure.then(() => {
        if (this.current !== running) return;
        this.current = undefined;
        this.endedAlone = this.collect(running);
      });
      const shown = deliverTo ?? path;
      await this.note({
        id,
        path: shown,
        format,
        started: recorder.startedAt.toISOString(),
        state: "recording",
      });
      this.options.log.info({ id, path: shown, pid: recorder.encoderPid }, "recording started");
      return { id, ...recorder.progress(), path: shown };
    } finally {
      this.starting = false;
    }
  }

  /**
   * Stops the running recording and finishes its file; without one, reports the recording that ended
   * by itself since the last stop, or fails with `not_found`.
   */
  async stop(): Promise<FinishedRecording> {
    const running = this.current;
    if (running) {
      this.current = undefined;
      return this.collect(running);
    }
    const ended = this.endedAlone;
    this.endedAlone = undefined;
    if (ended) return ended;
    throw new CommandError("not_found", "No recording is running (start one with start_recording)");
  }

  /** The running recording's progress, or null. */
  status() {
    const running = this.current;
    if (!running) return null;
    const progress = running.recorder.progress();
    return { id: running.id, ...progress, path: running.deliverTo ?? progress.path };
  }

  /** The recording process's encoder, for tests that kill it. */
  get encoderPid(): number | undefined {
    return this.current?.recorder.encoderPid;
  }

  /** Every recording in the index, newest first. */
  async list(): Promise<RecordingEntry[]> {
    const text = await readFile(join(this.dir, INDEX), "utf8").catch(() => "");
    const byId = new Map<string, RecordingEntry>();
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        const entry = JSON.parse(line) as RecordingEntry;
        if (typeof entry.id === "string") byId.set(entry.id, { ...byId.get(entry.id), ...entry });
      } catch {
        // a line cut short by a crash
      }
    }
    const entries = [...byId.values()].map((entry) =>
      entry.state === "recording" && entry.id !== this.current?.id
        ? { ...entry, state: "interrupted" as const }
        : entry,
    );
    return entries.reverse();
  }

  /** The file of a listed recording, if it is still there. */
  async file(id: string): Promise<string | undefined> {
    const entry = (await this.list()).find((e) => e.id === id);
    if (!entry) return undefined;
    const info = await lstat(entry.path).catch(() => null);
    return info?.isFile() ? entry.path : undefined;
  }

  /** Stops a running recording (its file is finished); used when the server closes. */
  async close(): Promise<void> {
    if (this.current) await this.stop().catch(() => undefined);
  }

  private async collect(running: Running): Promise<FinishedRecording> {
    const summary: FinishedRecording = { id: running.id, ...(await running.recorder.stop()) };
    if (running.deliverTo) await this.deliver(summary, running.deliverTo);
    await this.note({ ...summary, state: summary.error ? "failed" : "finished" });
    this.options.log.info({ ...summary }, "recording ended");
    return summary;
  }

  /** Appends to the index; a directory that cannot be written loses the entry, not the recording. */
  private async note(entry: Partial<RecordingEntry> & { id: string }) {
    try {
      await makeDirectory(this.dir);
      await appendFile(join(this.dir, INDEX), `${JSON.stringify(entry)}\n`);
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message }, "could not write the recordings index");
    }
  }

  /**
   * Writes the finished video to the agent's path as the command user (atomically: the empty file
   * made at start is replaced), then removes the server's copy; where that fails, the video stays in
   * the recordings directory and the summary says so.
   */
  private async deliver(summary: FinishedRecording, to: string) {
    const files = this.options.files;
    if (!files) return;
    try {
      await writeStreamed(to, createReadStream(summary.path), files);
      await unlink(summary.path).catch(() => undefined);
      summary.path = to;
    } catch (err) {
      const reason = `the video could not be written to ${to} (${describeOsError(err, to).message}); it is at ${summary.path}`;
      summary.error = summary.error ? `${summary.error}; ${reason}` : reason;
    }
  }

  /** The checked path and format of a new recording; its file is created (empty) to prove it can be. */
  private async prepare(
    request: StartRecording,
    id: string,
  ): Promise<{ path: string; format: VideoFormat; deliverTo?: string }> {
    const given = request.path !== undefined ? expandPath(request.path) : undefined;
    const format = request.format ?? (given && extname(given).toLowerCase() === ".webm" ? "webm" : "mp4");
    const path = given ?? join(this.dir, `${id}.${format}`);
    const root = VIRTUAL_ROOTS.find((r) => path === r || path.startsWith(`${r}/`));
    if (root) {
      throw new CommandError(
        "invalid_params",
        `Invalid params: path: ${path} is in ${root}, a file system of the kernel; record to a directory on a disk`,
      );
    }
    const files = this.options.files;
    if (files && given) {
      // As the command user: the path is proved the user's to write; the video is made in the
      // server's directory and written there when it ends (deliver).
      await this.claimAsUser(files, given, request.overwrite === true);
      await makeDirectory(this.dir);
      return { path: join(this.dir, `${id}.${format}`), format, deliverTo: given };
    }
    const existing = await lstat(path).catch(() => null);
    if (existing && !existing.isFile()) throw notRegularFile(fileKind(existing), path);
    if (existing && !request.overwrite) {
      throw new CommandError("failed", `Already exists: ${path} (give overwrite: true to replace it)`);
    }
    try {
      await makeDirectory(dirname(path));
      const handle = await open(path, request.overwrite ? "w" : "wx");
      await handle.close();
    } catch (err) {
      const reason = describeOsError(err, path);
      throw new CommandError(reason.code, `Cannot record: ${reason.message}`);
    }
    return { path, format };
  }

  /** Creates `path` (empty) as the command user, or checks it may replace it: refused as the user would be. */
  private async claimAsUser(files: FileSystem, path: string, overwrite: boolean) {
    try {
      const existing = await files.lstat(path).catch(() => null);
      if (existing && !existing.isFile()) throw notRegularFile(fileKind(existing), path);
      if (existing && !overwrite) {
        throw new CommandError("failed", `Already exists: ${path} (give overwrite: true to replace it)`);
      }
      await makeDirectory(dirname(path), files);
      const flags = constants.O_WRONLY | constants.O_CREAT | (overwrite ? 0 : constants.O_EXCL);
      await (await files.open(path, flags, 0o644)).close();
    } catch (err) {
      if (err instanceof CommandError) throw err;
      const reason = describeOsError(err, path);
      throw new CommandError(reason.code, `Cannot record: ${reason.message}`);
    }
  }
}

function newId(): string {
  const time = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${time}-${randomBytes(2).toString("hex")}`;
}

/**
 * A video of the desktop while it is recorded. Frames come from the backend's own capture, the one
 * the live view and screenshots use: with X DAMAGE a still screen is not captured at all, only
 * looked at again when it changes. Each frame carries the time it was captured, so a still minute
 * lasts a minute in the video and costs one frame (plus one repeat every few seconds, which keeps the
 * file's end close to now should the encoder be killed). The pointer is drawn in (cursor.ts).
 *
 * @example
 * const recorder = await ScreenRecorder.start({ desktop, ffmpeg: "ffmpeg", log }, { path, format: "mp4", fps: 10 });
 * … const summary = await recorder.stop(); // { path, duration_s, size_bytes, frames, … }
 */
import { stat } from "node:fs/promises";
import { CommandError } from "../../common/errors.js";
import type { Logger } from "../../common/logger.js";
import type { DesktopBackend, DesktopProvider, RawImage } from "../backend.js";
import { CursorLayer } from "./cursor.js";
import { type EncoderEnd, VideoEncoder, type VideoFormat } from "./encoder.js";

export interface RecorderDeps {
  desktop: DesktopProvider;
  /** The ffmpeg program (a path or a name on PATH). */
  ffmpeg: string;
  log: Logger;
}

export interface RecordingOptions {
  /** Absolute path of the video file (checked by the caller: see recordings.ts). */
  path: string;
  format: VideoFormat;
  /** At most this many frames a second. */
  fps: number;
  /** Video pixels per screen pixel, (0, 1]. */
  scale?: number;
  /** The video's width at most (the height follows). */
  maxWidth?: number;
  /** Draw the pointer into the frames. */
  cursor: boolean;
}

/** What a recording was, once it has ended. */
export interface RecordingSummary {
  path: string;
  format: VideoFormat;
  width: number;
  height: number;
  /** When it started, ISO 8601. */
  started: string;
  duration_s: number;
  size_bytes: number;
  /** Frames written to the video. */
  frames: number;
  /** Why it ended before it was asked to stop (disk full, encoder killed, display gone), if it did. */
  error?: string;
}

/** How often an unchanged screen is written again. */
export const REPEAT_STILL_MS = 5000;

export class ScreenRecorder {
  readonly startedAt = new Date();
  private readonly startedMs = performance.now();
  /** Frames handed to the encoder, and those it has taken. */
  private sent = 0;
  private frames = 0;
  private pending: Promise<void> = Promise.resolve();
  private lastFrameMs = 0;
  private lastRaw: RawImage | undefined;
  private stopping = false;
  private error: string | undefined;
  private wakeStop: () => void = () => undefined;
  private readonly stopRequested = new Promise<void>((resolve) => {
    this.wakeStop = resolve;
  });
  private readonly loop: Promise<void>;
  private summary: Promise<RecordingSummary> | undefined;
  private closing: Promise<EncoderEnd> | undefined;
  private reportFailure: (reason: string) => void = () => undefined;
  /** Resolves with the reason if the recording ends by itself (not by `stop()`); never rejects. */
  readonly failure = new Promise<string>((resolve) => {
    this.reportFailure = resolve;
  });

  private constructor(
    private readonly backend: DesktopBackend,
    private readonly encoder: VideoEncoder,
    private readonly frame: Buffer,
    private readonly cursor: CursorLayer | null,
    private readonly options: RecordingOptions,
    readonly width: number,
    readonly height: number,
    private readonly log: Logger,
  ) {
    void encoder.ended.then((end) => {
      if (!this.stopping && end.error) this.fail(end.error);
    });
    this.loop = this.run();
  }

  /** Captures the first frame and starts the encoder; rejects with a `CommandError` saying what failed. */
  static async start(deps: RecorderDeps, options: RecordingOptions): Promise<ScreenRecorder> {
    const backend = await deps.desktop();
    const first = await backend.capture();
    const output = videoSize(first.width, first.height, options);
    const encoder = await VideoEncoder.start({
      ffmpeg: deps.ffmpeg,
      path: options.path,
      format: options.format,
      input: { width: first.width, height: first.height },
      output,
      fps: options.fps,
      log: deps.log,
    });
    const frame = Buffer.allocUnsafeSlow(first.width * first.height * 4);
    const cursor = options.cursor ? new CursorLayer(frame, first.width, first.height) : null;
    const recorder = new ScreenRecorder(
      backend,
      encoder,
      frame,
      cursor,
      options,
      output.width,
      output.height,
      deps.log,
    );
    return recorder;
  }

  /** The encoder's process id (for tests that kill it). */
  get encoderPid(): number | undefined {
    return this.encoder.pid;
  }

  get path(): string {
    return this.options.path;
  }

  /** Whether it still records (false once stopped or failed). */
  get running(): boolean {
    return !this.stopping && this.error === undefined;
  }

  /** Where it stands: seconds so far and frames written. */
  progress() {
    return {
      path: this.options.path,
      format: this.options.format,
      width: this.width,
      height: this.height,
      started: this.startedAt.toISOString(),
      elapsed_s: round((performance.now() - this.startedMs) / 1000),
      frames: this.frames,
    };
  }

  /** Stops recording, finishes the file and says what it holds. Safe to call more than once. */
  stop(): Promise<RecordingSummary> {
    this.summary ??= this.finish();
    return this.summary;
  }

  private async finish(): Promise<RecordingSummary> {
    this.stopping = true;
    this.wakeStop();
    await this.loop;
    await this.pending;
    // The last picture is shown until now: a screen that stayed still to the end lasts to the end.
    if (this.error === undefined && this.encoder.running && this.sent > 0) {
      this.send(this.now());
      await this.pending;
    }
    const end = await this.closeEncoder();
    if (end.error && this.error === undefined) this.error = end.error;
    const size = await stat(this.options.path).then(
      (info) => info.size,
      () => 0,
    );
    return {
      path: this.options.path,
      format: this.options.format,
      width: this.width,
      height: this.height,
      started: this.startedAt.toISOString(),
      duration_s: round((this.frames > 0 ? this.lastFrameMs + 1000 / this.options.fps : 0) / 1000),
      size_bytes: size,
      frames: this.frames,
      ...(this.error === undefined ? {} : { error: this.error }),
    };
  }

  private fail(reason: string) {
    if (this.error !== undefined || this.stopping) return;
    this.error = reason;
    this.log.warn({ path: this.options.path, reason }, "recording ended early");
    this.wakeStop();
    void this.closeEncoder();
    this.reportFailure(reason);
  }

  /** Ends the encoder's input once and waits for it to finish the file. */
  private closeEncoder(): Promise<EncoderEnd> {
    this.closing ??= this.encoder.finish();
    return this.closing;
  }

  private async run() {
    try {
      await this.capture(true);
      while (this.running) await this.step();
    } catch (err) {
      this.fail(describeFailure(err));
    }
  }

  /** Waits for the next frame's time and for a change, then writes a frame if there is one. */
  private async step() {
    const interval = 1000 / this.options.fps;
    const sinceFrame = this.now() - this.lastFrameMs;
    if (sinceFrame < interval) await this.sleep(interval - sinceFrame);
    if (!this.running) return;
    const repeatIn = REPEAT_STILL_MS - (this.now() - this.lastFrameMs);
    // With the pointer drawn, the pointer is looked at every frame (moving it changes no pixel).
    const wait = Math.max(0, this.cursor ? Math.min(interval, repeatIn) : repeatIn);
    const changed = this.backend.waitForChange
      ? await Promise.race([
          this.backend.waitForChange(this.lastRaw, wait),
          this.stopRequested.then(() => false),
        ])
      : true;
    if (!this.running) return;
    const repeat = this.now() - this.lastFrameMs >= REPEAT_STILL_MS;
    await this.capture(changed || repeat);
  }

  /**
   * Takes a new capture when `look`, redraws the pointer, and sends a frame when anything changed.
   * The capture overlaps with the encoder taking the previous frame; the frame's pixels are only
   * touched once it has.
   */
  private async capture(look: boolean) {
    const at = this.now();
    const raw = look ? await this.backend.capture() : undefined;
    const pointer = this.cursor ? await this.backend.cursorPosition() : undefined;
    await this.pending;
    let changed = this.sent === 0;
    if (raw && raw !== this.lastRaw) changed = this.take(raw) || changed;
    if (this.cursor && pointer) {
      const drawn = this.cursor.position;
      if (changed || !drawn || drawn.x !== Math.round(pointer.x) || drawn.y !== Math.round(pointer.y)) {
        this.cursor.draw(pointer.x, pointer.y);
        changed = true;
      }
    }
    const repeat = at - this.lastFrameMs >= REPEAT_STILL_MS;
    if (changed || repeat) this.send(at);
  }

  /** Copies a capture into the frame; false when its pixels are those already there. */
  private take(raw: RawImage): boolean {
    const expected = this.frame.length;
    if (raw.width * raw.height * 4 !== expected || raw.channels !== 4) {
      throw new CommandError(
        "failed",
        `the screen changed size to ${raw.width}x${raw.height}; the recording ends where it did`,
      );
    }
    this.lastRaw = raw;
    this.cursor?.erase();
    // Backends that cannot tell a still screen (no DAMAGE) capture afresh: same pixels, no new frame.
    if (!this.backend.waitForChange && raw.data.equals(this.frame)) return false;
    raw.data.copy(this.frame, 0, 0, expected);
    this.cursor?.forget();
    return true;
  }

  /** Hands the frame to the encoder as the picture at `atMs`; `pending` settles once it has it. */
  private send(atMs: number) {
    // Matroska timestamps are whole milliseconds, each after the one before.
    const timestamp = this.sent === 0 ? 0 : Math.max(Math.round(atMs), Math.round(this.lastFrameMs) + 1);
    this.sent++;
    this.lastFrameMs = timestamp;
    // A failed write means the encoder is gone: its exit says why (see the constructor).
    this.pending = this.encoder.writeFrame(timestamp, this.frame).then(
      () => {
        this.frames++;
      },
      () => undefined,
    );
  }

  private now() {
    return performance.now() - this.startedMs;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      void this.stopRequested.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** The video's size: the screen's, scaled by `scale` and fitted to `maxWidth`, in even numbers. */
export function videoSize(
  width: number,
  height: number,
  options: Pick<RecordingOptions, "scale" | "maxWidth">,
): { width: number; height: number } {
  let factor = options.scale ?? 1;
  if (options.maxWidth !== undefined) factor = Math.min(factor, options.maxWidth / width);
  factor = Math.min(1, factor);
  const even = (n: number) => Math.max(2, Math.floor(n / 2) * 2);
  return { width: even(width * factor), height: even(height * factor) };
}

function describeFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof CommandError) return message;
  return `the recording failed: ${message}`;
}

function round(value: number) {
  return Math.round(value * 1000) / 1000;
}

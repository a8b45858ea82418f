/**
 * A video of the desktop while it is recorded. Frames come from the backend's own capture through
 * the screen feed (feed.ts): with X DAMAGE a still screen is not captured at all, only looked at
 * again when it changes. Each frame carries the time it was captured, so a still minute lasts a
 * minute in the video and costs one frame (plus one repeat every few seconds, which keeps the file's
 * end close to now should the encoder be killed). The pointer is drawn in (cursor.ts).
 *
 * @example
 * const recorder = await ScreenRecorder.start({ desktop, ffmpeg: "ffmpeg", log }, { path, format: "mp4", fps: 10 });
 * … const summary = await recorder.stop(); // { path, duration_s, size_bytes, frames, … }
 */
import { stat } from "node:fs/promises";
import type { Logger } from "../../common/logger.js";
import { AudioCapture, type AudioSource } from "../audio.js";
import type { DesktopProvider } from "../backend.js";
import { type EncoderEnd, VideoEncoder, type VideoFormat } from "./encoder.js";
import { ScreenFeed } from "./feed.js";

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
  /** The desktop's sound, recorded as the video's audio track; none: a silent video. */
  audio?: AudioSource;
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
  private error: string | undefined;
  private stopping = false;
  private summary: Promise<RecordingSummary> | undefined;
  private closing: Promise<EncoderEnd> | undefined;
  private reportFailure: (reason: string) => void = () => undefined;
  /** Resolves with the reason if the recording ends by itself (not by `stop()`); never rejects. */
  readonly failure = new Promise<string>((resolve) => {
    this.reportFailure = resolve;
  });

  private constructor(
    private readonly feed: ScreenFeed,
    private readonly encoder: VideoEncoder,
    private readonly sound: AudioCapture | undefined,
    private readonly options: RecordingOptions,
    readonly width: number,
    readonly height: number,
    private readonly log: Logger,
  ) {
    void encoder.ended.then((end) => {
      if (!this.stopping && end.error) this.fail(end.error);
    });
    void feed.failure.then((reason) => this.fail(reason));
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
      sound: Boolean(options.audio),
      log: deps.log,
    });
    const feed = new ScreenFeed(
      backend,
      first,
      { fps: options.fps, cursor: options.cursor, repeatStillMs: REPEAT_STILL_MS },
      (timestampMs, frame) => encoder.writeFrame(timestampMs, frame),
    );
    // The sound on the feed's clock, into the same input as the frames.
    const sound =
      options.audio &&
      AudioCapture.start(
        options.audio,
        () => feed.now(),
        (ms, pcm) => encoder.writeAudio(ms, pcm),
      );
    return new ScreenRecorder(
      feed,
      encoder,
      sound || undefined,
      options,
      output.width,
      output.height,
      deps.log,
    );
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
      elapsed_s: round(this.feed.now() / 1000),
      frames: this.feed.frames,
    };
  }

  /** Stops recording, finishes the file and says what it holds. Safe to call more than once. */
  stop(): Promise<RecordingSummary> {
    this.summary ??= this.finish();
    return this.summary;
  }

  private async finish(): Promise<RecordingSummary> {
    this.stopping = true;
    // The last picture is shown until now: a screen that stayed still to the end lasts to the end.
    await this.sound?.stop();
    await this.feed.stop(this.error === undefined && this.encoder.running);
    const end = await this.closeEncoder();
    if (end.error && this.error === undefined) this.error = end.error;
    const size = await stat(this.options.path).then(
      (info) => info.size,
      () => 0,
    );
    const frames = this.feed.frames;
    return {
      path: this.options.path,
      format: this.options.format,
      width: this.width,
      height: this.height,
      started: this.startedAt.toISOString(),
      duration_s: round((frames > 0 ? this.feed.lastFrameAt + 1000 / this.options.fps : 0) / 1000),
      size_bytes: size,
      frames,
      ...(this.error === undefined ? {} : { error: this.error }),
    };
  }

  private fail(reason: string) {
    if (this.error !== undefined || this.stopping) return;
    this.error = reason;
    this.log.warn({ path: this.options.path, reason }, "recording ended early");
    this.feed.fail(reason);
    void this.sound?.stop();
    void this.closeEncoder();
    this.reportFailure(reason);
  }

  /** Ends the encoder's input once and waits for it to finish the file. */
  private closeEncoder(): Promise<EncoderEnd> {
    this.closing ??= this.encoder.finish();
    return this.closing;
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

function round(value: number) {
  return Math.round(value * 1000) / 1000;
}

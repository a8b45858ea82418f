/**
 * Frames of the screen for a video encoder, from the backend's own capture (the one the live view and
 * screenshots use): with X DAMAGE a still screen is not captured at all, only looked at again when it
 * changes. Each frame carries the time it was captured, in milliseconds since the feed started,
 * always after the one before; the pointer is drawn in (cursor.ts). A still screen is written again
 * every `repeatStillMs` (the recorder: so that the file's end stays close to now) or never.
 *
 * Used by the recorder (recorder.ts) and the live stream (../live/live-encoder.ts); each hands its
 * frames to an encoder through `sink`, which resolves once the encoder has taken the pixels.
 *
 * A frame is packed B,G,R (ffmpeg's `bgr24`): ffmpeg turns it into YUV 4:2:0 in less than half the
 * time it takes for four bytes a pixel (3.4 against 7.8 ms a 1080p frame here), and a quarter
 * fewer bytes cross the pipe. The capture's R,G,B,X pixels are copied into WebAssembly memory of
 * the feed's own and packed there (pixels.ts).
 *
 * @example
 * const feed = new ScreenFeed(backend, first, { fps: 10, cursor: true, repeatStillMs: 5000 }, (ms, frame) => encoder.writeFrame(ms, frame));
 * void feed.failure.then((reason) => …); … await feed.stop();
 */
import { CommandError } from "../../common/errors.js";
import type { DesktopBackend, RawImage } from "../backend.js";
import { PixelMemory } from "../pixels.js";
import { CursorLayer } from "./cursor.js";

/** After this long without a frame, the pointer is looked at every `POINTER_STILL_MS` only. */
const POINTER_STILL_AFTER_MS = 1000;
const POINTER_STILL_MS = 100;
/** The longest delay a Node timer takes (a longer one fires at once). */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

export interface FeedOptions {
  /** At most this many frames a second. */
  fps: number;
  /** Draw the pointer into the frames. */
  cursor: boolean;
  /** An unchanged screen is written again after this long (ms); `Infinity`: never. */
  repeatStillMs: number;
}

/** Takes the frame (packed B,G,R rows of the screen's size) as the picture at `timestampMs`. */
export type FrameSink = (timestampMs: number, frame: Buffer) => Promise<void>;

export class ScreenFeed {
  readonly width: number;
  readonly height: number;
  private readonly startedMs = performance.now();
  /** The last capture's R,G,B,X pixels, then (at `frameAt`) the frame. */
  private readonly memory: PixelMemory;
  private readonly frame: Buffer;
  private readonly cursor: CursorLayer | null;
  /** Frames handed to the sink, and those it has taken. */
  private sent = 0;
  private taken = 0;
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
  private reportFailure: (reason: string) => void = () => undefined;
  /** Resolves with the reason if the feed ends by itself (not by `stop()`); never rejects. */
  readonly failure = new Promise<string>((resolve) => {
    this.reportFailure = resolve;
  });

  /** Starts feeding from `first`, a capture of the screen whose size every frame keeps. */
  constructor(
    private readonly backend: DesktopBackend,
    first: RawImage,
    private readonly options: FeedOptions,
    private readonly sink: FrameSink,
  ) {
    this.width = first.width;
    this.height = first.height;
    const pixels = first.width * first.height;
    // The frame after the capture's copy, on a 64-byte boundary; room after it for the last group.
    const frameAt = Math.ceil((pixels * 4 + 64) / 64) * 64;
    this.memory = new PixelMemory(frameAt + pixels * 3 + 64);
    this.frame = this.memory.bytes.subarray(frameAt, frameAt + pixels * 3);
    this.cursor = options.cursor ? new CursorLayer(this.frame, first.width, first.height, 3) : null;
    this.loop = this.run();
  }

  /** Frames the sink has taken. */
  get frames(): number {
    return this.taken;
  }

  /** The time of the last frame sent, in ms since the start. */
  get lastFrameAt(): number {
    return this.lastFrameMs;
  }

  /** Whether it still feeds (false once stopped or failed). */
  get running(): boolean {
    return !this.stopping && this.error === undefined;
  }

  /** Ms since the feed started. */
  now(): number {
    return performance.now() - this.startedMs;
  }

  /**
   * Stops looking at the screen and waits for the last frame to be taken; with `showUntilNow`, the
   * last picture is written once more at the current time (a still spell at the end lasts to the end).
   */
  async stop(showUntilNow = false): Promise<void> {
    this.stopping = true;
    this.wakeStop();
    await this.loop;
    await this.pending;
    if (showUntilNow && this.error === undefined && this.sent > 0) {
      this.send(this.now());
      await this.pending;
    }
  }

  /** Ends the feed by itself with `reason` (reported on `failure`), as when the sink broke. */
  fail(reason: string) {
    if (this.error !== undefined || this.stopping) return;
    this.error = reason;
    this.wakeStop();
    this.reportFailure(reason);
  }

  private async run() {
    try {
      await this.capture(true);
      while (this.running) await this.step();
    } catch (err) {
      this.fail(describeFailure(err));
    }
  }

  /** Waits for the next frame's time and for a change, then sends a frame if there is one. */
  private async step() {
    const interval = 1000 / this.options.fps;
    const sinceFrame = this.now() - this.lastFrameMs;
    if (sinceFrame < interval) await this.sleep(interval - sinceFrame);
    if (!this.running) return;
    const repeatIn = this.options.repeatStillMs - (this.now() - this.lastFrameMs);
    // With the pointer drawn, the pointer is looked at every frame (moving it changes no pixel), and
    // ten times a second once nothing has changed for a second (a still screen costs almost nothing).
    const still = sinceFrame > POINTER_STILL_AFTER_MS;
    const pointerEvery = this.cursor
      ? still
        ? Math.max(interval, POINTER_STILL_MS)
        : interval
      : LONGEST_TIMER_MS;
    const wait = Math.max(0, Math.min(pointerEvery, repeatIn, LONGEST_TIMER_MS));
    const changed = this.backend.waitForChange
      ? await Promise.race([
          this.backend.waitForChange(this.lastRaw, wait),
          this.stopRequested.then(() => false),
        ])
      : true;
    if (!this.running) return;
    await this.capture(changed || this.repeatDue(this.now()));
  }

  private repeatDue(at: number): boolean {
    return at - this.lastFrameMs >= this.options.repeatStillMs;
  }

  /**
   * Takes a new capture when `look`, redraws the pointer, and sends a frame when anything changed.
   * The capture overlaps with the sink taking the previous frame; the frame's pixels are only
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
    if (changed || this.repeatDue(at)) this.send(at);
  }

  /** Makes the frame from a capture; false when its pixels are those already there. */
  private take(raw: RawImage): boolean {
    const pixels = this.width * this.height;
    const expected = pixels * 4;
    if (raw.width !== this.width || raw.height !== this.height || raw.channels !== 4) {
      throw new CommandError(
        "failed",
        `the screen changed size to ${raw.width}x${raw.height}; the video ends where it did`,
      );
    }
    this.lastRaw = raw;
    this.cursor?.erase();
    const copy = this.memory.bytes.subarray(0, expected);
    // Backends that cannot tell a still screen (no DAMAGE) capture afresh: same pixels, no new frame.
    if (!this.backend.waitForChange && this.sent > 0 && raw.data.subarray(0, expected).equals(copy))
      return false;
    raw.data.copy(copy, 0, 0, expected);
    this.memory.rgbxToBgr(0, this.frame.byteOffset, pixels);
    this.cursor?.forget();
    return true;
  }

  /** Hands the frame to the sink as the picture at `atMs`; `pending` settles once it has it. */
  private send(atMs: number) {
    // Whole milliseconds, each after the one before (Matroska's timestamps, matroska.ts).
    const timestamp = this.sent === 0 ? 0 : Math.max(Math.round(atMs), Math.round(this.lastFrameMs) + 1);
    this.sent++;
    this.lastFrameMs = timestamp;
    // A failed write means the encoder is gone: its owner learns why from the encoder's exit.
    this.pending = this.sink(timestamp, this.frame).then(
      () => {
        this.taken++;
      },
      () => undefined,
    );
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

function describeFailure(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof CommandError) return message;
  return `the capture failed: ${message}`;
}

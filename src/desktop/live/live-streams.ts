/**
 * The live streams of one desktop, shared: viewers asking for the same settings share one encoder
 * (live-encoder.ts), which starts with the first viewer and ends when the last one goes. A viewer
 * that joins a running stream is handed the decoder configuration and the packets since the last
 * keyframe, so that its first picture is the screen as it is now; an MPEG-TS viewer the stream's
 * tables and packets from its last keyframe (mpegts.ts).
 *
 * An encoder that dies (killed, crashed) is started again, and its viewers go on with a new
 * configuration (`start` again, `generation` one higher) and timestamps that carry on where the
 * last ones stopped; after three deaths within ten seconds, or when the display is gone, the viewers
 * are ended with the reason.
 *
 * @example
 * const streams = new LiveStreams({ desktop, ffmpeg: "ffmpeg", log });
 * const viewer = streams.watch(settings, { start, packet, end });
 * … viewer.close();
 */
import type { Logger } from "../../common/logger.js";
import type { AudioSource } from "../audio.js";
import type { DesktopProvider } from "../backend.js";
import { audioShape, codecString, type MediaPacket, type TrackConfig } from "./flv.js";
import { LiveEncoder, type LiveSettings, NATIVE_ABOVE } from "./live-encoder.js";
import { TsJoinPoint } from "./mpegts.js";

export type { MediaPacket } from "./flv.js";
export type { LiveSettings } from "./live-encoder.js";

/** What a viewer is told when a stream (re)starts: how to decode it. */
export interface StreamStart {
  video: { codec: string; description: Buffer; width: number; height: number };
  audio?: { codec: string; description: Buffer; sampleRate: number; channels: number };
  /** The screen's size (the video may be smaller). */
  screen: { width: number; height: number };
  /** 1 for the first encoder of the stream, one more at each restart. */
  generation: number;
}

export interface LiveViewer {
  start(stream: StreamStart): void;
  packet(packet: MediaPacket): void;
  /** Whole MPEG-TS packets, for settings with `mpegts`; after each start, from the tables on. */
  ts?(bytes: Buffer): void;
  /** The stream ended for good: why, in words. */
  end(reason: string): void;
}

export interface LiveStreamsOptions {
  desktop: DesktopProvider;
  /** The ffmpeg program (default `$HANGAR_FFMPEG`, else `ffmpeg` on PATH). */
  ffmpeg?: string;
  /** The desktop's sound (audio.ts), for the streams that ask for it. */
  audio?: AudioSource;
  log: Logger;
}

/** Bytes of packets kept since the last keyframe for viewers that join; beyond, they wait for the next. */
const GOP_KEPT_BYTES = 16 * 1024 * 1024;
/** Widths asked for are rounded up to a multiple of this, so that viewers of about one size share. */
const WIDTH_STEP = 320;
/** More deaths than this within the window end the stream instead of restarting it. */
const RESTARTS = 3;
const RESTART_WINDOW_MS = 10_000;

export class LiveStreams {
  private readonly streams = new Map<string, SharedStream>();
  /** The screen's width as the last encoder to start found it. */
  private screenWidth: number | undefined;
  private readonly ffmpeg: string;

  constructor(private readonly options: LiveStreamsOptions) {
    this.ffmpeg = options.ffmpeg ?? process.env.HANGAR_FFMPEG ?? "ffmpeg";
  }

  /** Starts watching a stream of these settings; `close()` stops (the last viewer stops the encoder). */
  watch(settings: Omit<LiveSettings, "audio"> & { audio?: boolean }, viewer: LiveViewer): { close(): void } {
    const { audio, ...asked } = settings;
    const video = { ...asked, maxWidth: this.widthStep(asked.maxWidth) };
    // Sound when asked and the desktop has it: a stream asking for sound where there is none is
    // the same as one that did not ask.
    const source = audio ? this.options.audio : undefined;
    const key = JSON.stringify({ ...video, audio: Boolean(source) });
    let stream = this.streams.get(key);
    if (!stream) {
      stream = new SharedStream(
        { ...video, audio: source },
        this.ffmpeg,
        this.options,
        () => this.streams.delete(key),
        (width) => {
          this.screenWidth = width;
        },
      );
      this.streams.set(key, stream);
    }
    const shared = stream;
    shared.add(viewer);
    let closed = false;
    return {
      close: () => {
        if (closed) return;
        closed = true;
        shared.remove(viewer);
      },
    };
  }

  /**
   * A width asked for, as encoders are shared: the next multiple of 320 pixels, or none (the
   * screen's own) when that is near the screen's width (live-encoder.ts), as far as it is known.
   */
  private widthStep(width: number | undefined): number | undefined {
    if (width === undefined) return undefined;
    const step = Math.ceil(width / WIDTH_STEP) * WIDTH_STEP;
    return this.screenWidth !== undefined && step >= this.screenWidth * NATIVE_ABOVE ? undefined : step;
  }

  /** The running encoders' process ids (for tests and faults). */
  encoderPids(): number[] {
    return [...this.streams.values()].flatMap((s) => (s.pid === undefined ? [] : [s.pid]));
  }

  /** Ends every stream (the server closes); resolves once every encoder has exited. */
  async close(): Promise<void> {
    const streams = [...this.streams.values()];
    for (const stream of streams) stream.close("The server is stopping");
    await Promise.all(streams.map((stream) => stream.done));
  }
}

class SharedStream {
  private readonly viewers = new Set<LiveViewer>();
  private encoder: LiveEncoder | undefined;
  /** The running encoder's sizes, once it has started. */
  private shape: Pick<LiveEncoder, "size" | "screen"> | undefined;
  private current: StreamStart | undefined;
  private configs: Partial<Record<"video" | "audio", TrackConfig>> = {};
  private generation = 0;
  /** Added to this encoder's timestamps, so that they go on from the last encoder's. */
  private base = 0;
  private lastTimestamp = 0;
  /** Packets since the last keyframe, while they are all kept; else none (joiners wait for a keyframe). */
  private gop: MediaPacket[] = [];
  private gopBytes = 0;
  private ts: TsJoinPoint | undefined;
  private deaths: number[] = [];
  private closed = false;
  /** Settles once the last encoder has exited. */
  readonly done: Promise<void>;

  constructor(
    private readonly settings: LiveSettings,
    private readonly ffmpeg: string,
    private readonly options: LiveStreamsOptions,
    private readonly gone: () => void,
    private readonly sawScreen: (width: number) => void,
  ) {
    this.done = this.run();
  }

  get pid(): number | undefined {
    return this.encoder?.pid;
  }

  add(viewer: LiveViewer) {
    this.viewers.add(viewer);
    if (!this.current) return;
    viewer.start(this.current);
    const join = this.ts?.joinBytes();
    if (join?.length) viewer.ts?.(join);
    for (const packet of this.gop) viewer.packet(packet);
  }

  remove(viewer: LiveViewer) {
    this.viewers.delete(viewer);
    if (this.viewers.size === 0) this.close();
  }

  /** Stops the encoder (`done` settles when it has exited); viewers still there are ended with `reason`. */
  close(reason?: string) {
    if (this.closed) return;
    this.closed = true;
    this.gone();
    const viewers = [...this.viewers];
    this.viewers.clear();
    void this.encoder?.stop();
    if (reason) for (const viewer of viewers) viewer.end(reason);
  }

  /** Runs an encoder; when it ends by itself, starts another while viewers remain. */
  private async run(): Promise<void> {
    while (!this.closed) {
      const ended = await this.runEncoder();
      if (this.closed) return;
      if (ended.fatal) return this.close(ended.reason);
      const now = Date.now();
      this.deaths = [...this.deaths.filter((at) => now - at < RESTART_WINDOW_MS), now];
      if (this.deaths.length > RESTARTS) {
        return this.close(`The live stream failed again and again: ${ended.reason}`);
      }
      this.options.log.warn({ reason: ended.reason }, "live stream encoder ended; starting it again");
    }
  }

  /** Runs one encoder until it ends: `fatal` when it could not start (no display, no ffmpeg). */
  private async runEncoder(): Promise<{ reason: string; fatal: boolean }> {
    this.configs = {};
    this.current = undefined;
    this.shape = undefined;
    this.gop = [];
    this.gopBytes = 0;
    this.ts = this.settings.mpegts ? new TsJoinPoint() : undefined;
    this.base = this.generation === 0 ? 0 : this.lastTimestamp + 1000 / this.settings.fps;
    let encoder: LiveEncoder;
    try {
      encoder = await LiveEncoder.start(
        { desktop: this.options.desktop, ffmpeg: this.ffmpeg, log: this.options.log },
        this.settings,
        {
          onConfig: (config) => {
            this.configs[config.kind] = config;
            this.announce();
          },
          onPacket: (packet) => this.packet(packet),
          onTs: (bytes) => this.tsBytes(bytes),
        },
      );
    } catch (err) {
      return { reason: describeStartFailure(err as Error, this.generation > 0), fatal: true };
    }
    this.encoder = encoder;
    this.shape = encoder;
    this.sawScreen(encoder.screen.width);
    if (this.closed) void encoder.stop();
    else this.announce();
    const reason = await encoder.ended;
    this.encoder = undefined;
    return { reason, fatal: false };
  }

  /** Tells the viewers how to decode, once the encoder has started and its header is in. */
  private announce() {
    const { video, audio } = this.configs;
    if (this.current || !this.shape || !video || (this.settings.audio && !audio)) return;
    this.generation++;
    this.current = {
      video: { codec: codecString(video), description: video.description, ...this.shape.size },
      ...(audio
        ? {
            audio: {
              codec: codecString(audio),
              description: audio.description,
              ...audioShape(audio.description),
            },
          }
        : {}),
      screen: this.shape.screen,
      generation: this.generation,
    };
    // Packets that came before (the first keyframe, with the configuration) go out now.
    for (const viewer of this.viewers) {
      viewer.start(this.current);
      for (const packet of this.gop) viewer.packet(packet);
    }
  }

  /** Keeps the packet for joiners (from the last keyframe), and hands it to the viewers once started. */
  private packet(packet: MediaPacket) {
    const shifted = { ...packet, timestampMs: packet.timestampMs + this.base };
    this.lastTimestamp = Math.max(this.lastTimestamp, shifted.timestampMs);
    if (packet.kind === "video" && packet.key) {
      this.gop = [];
      this.gopBytes = 0;
    }
    this.gopBytes += packet.data.length;
    // A keyframe too long ago: joiners get nothing and wait for the next one.
    if (this.gopBytes > GOP_KEPT_BYTES) this.gop = [];
    else if (this.gop.length > 0 || (packet.kind === "video" && packet.key)) this.gop.push(shifted);
    if (this.current) for (const viewer of this.viewers) viewer.packet(shifted);
  }

  private tsBytes(bytes: Buffer) {
    const packets = this.ts?.push(bytes);
    if (!packets?.length || !this.current) return;
    for (const viewer of this.viewers) viewer.ts?.(packets);
  }
}

/** Why an encoder could not start, in words: when one ran before, the stream has ended. */
function describeStartFailure(err: Error, again: boolean): string {
  const message = err.message;
  if (/ffmpeg/i.test(message)) return message;
  return again ? `The live stream ended: ${message}` : `The live stream could not start: ${message}`;
}

/**
 * One H.264 encoder of the live stream: the screen feed (../recording/feed.ts, the recorder's) writes
 * the screen's frames to Debian's ffmpeg, which encodes them with libx264 (`ultrafast`,
 * `zerolatency`: no lookahead, no B-frames, each frame out as soon as it is in) and writes FLV on its
 * standard output (read into packets by flv.ts) and, when asked, MPEG-TS on fd 3 (OSWorld's
 * `/ws/h264`), both through ffmpeg's `tee` muxer so that one encoding feeds both. With sound, the
 * desktop's audio (a PulseAudio source, read by audio.ts's AudioCapture into the same input as the
 * frames) is encoded as AAC beside it.
 *
 * A still screen costs nothing: the feed writes a frame only when the screen changed (X DAMAGE), or
 * again after `repeatStillMs`. Live streams are shared and restarted by live-streams.ts.
 *
 * @example
 * const encoder = await LiveEncoder.start(deps, settings, { onConfig, onPacket, onTs, onEnd });
 * … await encoder.stop();
 */
import type { Readable } from "node:stream";
import type { Logger } from "../../common/logger.js";
import { AudioCapture, type AudioSource, PCM } from "../audio.js";
import type { DesktopProvider } from "../backend.js";
import { VideoEncoder } from "../recording/encoder.js";
import { ScreenFeed } from "../recording/feed.js";
import { videoSize } from "../recording/recorder.js";
import { AdtsReader, aacConfig } from "./adts.js";
import { FlvReader, type MediaPacket, type TrackConfig } from "./flv.js";

/** A video asked this wide, as a share of the screen's width, or wider, is the screen's size. */
export const NATIVE_ABOVE = 0.75;
/** AAC frames hold 1024 samples. */
const AAC_FRAME = 1024;

/** Feeds a reader of an encoder output; a reader that finds the output broken ends the encoder. */
function read(stream: Readable, reader: { push(chunk: Buffer): void }, end: (reason: string) => void) {
  stream.on("data", (chunk: Buffer) => {
    try {
      reader.push(chunk);
    } catch (err) {
      end((err as Error).message);
    }
  });
}

export interface LiveSettings {
  /** Frames a second at most. */
  fps: number;
  /** H.264's rate: a constant quality (x264's crf), or a bitrate in kbit/s (capped there). */
  rate: { crf: number } | { kbps: number };
  /** Frames from one keyframe to the next at most. */
  gop: number;
  /**
   * x264's preset: `ultrafast` (OSWorld's, as upstream's), or `superfast`, whose better prediction
   * halves what an agent session costs (scrolls, typing) for ~3 ms more a 1280-wide frame.
   */
  preset: "ultrafast" | "superfast";
  /** The H.264 profile; default: what x264 makes of the preset. */
  profile?: "baseline";
  /** The video's width at most (the height follows); default the screen's. */
  maxWidth?: number;
  /** Draw the pointer into the frames. */
  cursor: boolean;
  /** An unchanged screen is encoded again after this long (ms); `Infinity`: never. */
  repeatStillMs: number;
  /** Also MPEG-TS (video only), on `onTs`. */
  mpegts: boolean;
  /** The desktop's sound, encoded as AAC beside the video; none: a silent stream. */
  audio?: AudioSource;
}

export interface LiveEncoderDeps {
  desktop: DesktopProvider;
  /** The ffmpeg program (a path or a name on PATH). */
  ffmpeg: string;
  log: Logger;
}

export interface LiveOutput {
  onConfig(config: TrackConfig): void;
  onPacket(packet: MediaPacket): void;
  onTs?(bytes: Buffer): void;
}

export class LiveEncoder {
  private stopping: Promise<void> | undefined;
  /** Why it ends, when it ends by itself. */
  private endReason: string | undefined;
  private reportEnd: (reason: string) => void = () => undefined;
  /**
   * Resolves, once ffmpeg has exited, with why the encoder ended: "stopped" after `stop()`, else
   * what ended it (killed, the display gone, its output broken). Never rejects.
   */
  readonly ended = new Promise<string>((resolve) => {
    this.reportEnd = resolve;
  });

  private constructor(
    private readonly feed: ScreenFeed,
    private readonly encoder: VideoEncoder,
    private readonly sound: AudioCapture | undefined,
    /** The video's size, and the screen's. */
    readonly size: { width: number; height: number },
    readonly screen: { width: number; height: number },
    output: LiveOutput,
    /** The time (ms) of the first block of sound written, once there is one. */
    soundStart: () => number | undefined,
  ) {
    const end = (reason: string) => {
      if (this.stopping) return;
      this.endReason = reason;
      void this.stop();
    };
    // The pipes: FLV, then MPEG-TS when asked, then the sound's ADTS when there is sound.
    const [flv, ...more] = encoder.outputs;
    const adts = sound ? more.pop() : undefined;
    const [ts] = more;
    read(flv, new FlvReader(output.onPacket, output.onConfig), end);
    if (adts) {
      // AAC frames of 1024 samples follow each other from the first block of sound on.
      let frames = 0;
      const reader = new AdtsReader((data) => {
        const timestampMs = (soundStart() ?? 0) + (frames++ * AAC_FRAME * 1000) / PCM.sampleRate;
        output.onPacket({ kind: "audio", timestampMs, key: true, data });
      });
      read(adts, reader, end);
      // Known from the settings: the stream can start before the sound's first frame.
      queueMicrotask(() =>
        output.onConfig({ kind: "audio", description: aacConfig(PCM.sampleRate, PCM.channels) }),
      );
    }
    ts?.on("data", (chunk: Buffer) => output.onTs?.(chunk));
    for (const stream of encoder.outputs) stream.on("error", () => undefined);
    void encoder.ended.then((result) => end(result.error ?? "the encoder ended"));
    void feed.failure.then(end);
  }

  /** Captures the first frame and starts ffmpeg; rejects with a `CommandError` saying what failed. */
  static async start(
    deps: LiveEncoderDeps,
    settings: LiveSettings,
    output: LiveOutput,
  ): Promise<LiveEncoder> {
    const backend = await deps.desktop();
    const first = await backend.capture();
    const screen = { width: first.width, height: first.height };
    // A width near the screen's gets the screen's own: scaling would cost more than it saves.
    const { maxWidth } = settings;
    const scaled = maxWidth !== undefined && maxWidth < first.width * NATIVE_ABOVE ? maxWidth : undefined;
    const size = videoSize(first.width, first.height, { maxWidth: scaled });
    const encoder = await VideoEncoder.launch({
      ffmpeg: deps.ffmpeg,
      args: liveEncoderArguments(settings, screen, size),
      input: screen,
      fps: settings.fps,
      outputs: 1 + (settings.mpegts ? 1 : 0) + (settings.audio ? 1 : 0),
      target: "the live stream",
      purpose: "stream",
      sound: Boolean(settings.audio),
      log: deps.log,
    });
    const feed = new ScreenFeed(
      backend,
      first,
      { fps: settings.fps, cursor: settings.cursor, repeatStillMs: settings.repeatStillMs },
      (timestampMs, frame) => encoder.writeFrame(timestampMs, frame),
    );
    let soundStart: number | undefined;
    const sound =
      settings.audio &&
      AudioCapture.start(
        settings.audio,
        () => feed.now(),
        (ms, pcm) => {
          soundStart ??= ms;
          encoder.writeAudio(ms, pcm);
        },
      );
    return new LiveEncoder(feed, encoder, sound || undefined, size, screen, output, () => soundStart);
  }

  /** The encoder's process id (for tests that kill it). */
  get pid(): number | undefined {
    return this.encoder.pid;
  }

  /** Stops the feed and the encoder; resolves once ffmpeg has exited. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.sound?.stop();
      this.feed.fail("stopped");
      this.encoder.kill();
      await this.encoder.ended;
      await this.feed.stop();
      this.reportEnd(this.endReason ?? "stopped");
    })();
    return this.stopping;
  }
}

/** ffmpeg's arguments for a live stream. Exported for the tests and the benchmark. */
export function liveEncoderArguments(
  settings: LiveSettings,
  input: { width: number; height: number },
  output: { width: number; height: number },
): string[] {
  const filters: string[] = [];
  if (input.width !== output.width || input.height !== output.height) {
    // swscale's fast bilinear: 3 ms less a 1080p frame scaled to 720p than its bilinear (8 against
    // 11 ms with the encoding), text as legible (PSNR against lanczos 31.4 against 33.0 dB).
    filters.push(`scale=${output.width}:${output.height}:flags=fast_bilinear`);
  }
  filters.push("format=yuv420p");
  const { rate } = settings;
  const bitrate =
    "crf" in rate
      ? ["-crf", String(rate.crf)]
      : ["-b:v", `${rate.kbps}k`, "-maxrate", `${rate.kbps}k`, "-bufsize", `${rate.kbps * 2}k`];
  const { audio } = settings;
  const outputs = ["[f=flv:flvflags=no_duration_filesize]pipe\\:1"];
  // OSWorld's stream is video alone, as upstream's; no wait before a packet is written.
  if (settings.mpegts) outputs.push("[f=mpegts:max_delay=0]pipe\\:3");
  // The sound in an output of its own (adts.ts says why), on the next pipe.
  const sound = audio
    ? [
        ...["-map", "0:a", "-c:a", "aac", "-b:a", "96k", "-ar", String(PCM.sampleRate), "-ac", "2"],
        ...["-flush_packets", "1", "-f", "adts", `pipe:${settings.mpegts ? 4 : 3}`],
      ]
    : [];
  return [
    "-hide_banner",
    "-nostdin",
    "-loglevel",
    "error",
    // The input says what its tracks are: nothing to probe (which would take two seconds of sound).
    "-probesize",
    "32",
    "-analyzeduration",
    "0",
    "-f",
    "matroska",
    "-i",
    "pipe:0",
    "-map",
    "0:v",
    "-fps_mode",
    "vfr",
    // Each frame keeps its millisecond, as in recordings (encoder.ts).
    "-enc_time_base",
    "1:1000",
    "-vf",
    filters.join(","),
    "-c:v",
    "libx264",
    "-preset",
    settings.preset,
    "-tune",
    "zerolatency",
    ...(settings.profile ? ["-profile:v", settings.profile] : []),
    "-bf",
    "0",
    // The colours as swscale converted them (BT.601), said in the stream: a browser would take an
    // HD stream that says nothing for BT.709 and shift them (red came out orange).
    "-colorspace",
    "smpte170m",
    "-color_primaries",
    "smpte170m",
    "-color_trc",
    "smpte170m",
    "-color_range",
    "tv",
    // The decoder configuration in the stream's header (FLV's sequence header: what WebCodecs and
    // MP4 need), and again before every keyframe (MPEG-TS, whose viewers join at a keyframe).
    "-flags",
    "+global_header",
    "-x264-params",
    "repeat-headers=1",
    "-g",
    String(settings.gop),
    ...bitrate,
    "-flush_packets",
    "1",
    "-f",
    "tee",
    outputs.join("|"),
    ...sound,
  ];
}

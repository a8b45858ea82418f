/**
 * The video encoder: Debian's `ffmpeg` in a process of its own, reading raw frames with their
 * timestamps (matroska.ts) on its standard input. A recording writes H.264 in fragmented MP4, or VP8
 * in WebM, to its file: both stay playable when the encoder is killed part way (MP4 fragments are
 * complete moof+mdat pairs written as the recording goes, the last second at most is lost; WebM
 * clusters too), and when the server itself is killed the encoder reads the end of its input and
 * finishes the file. The live stream (../live/) starts it with its own arguments and reads what it
 * writes on its pipes (`outputs`).
 *
 * The encoder runs in its own process group, so a Ctrl-C meant for the server does not end it before
 * the server has written its last frame; `kill()` ends the group.
 */
import { type ChildProcess, spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { CommandError } from "../../common/errors.js";
import type { Logger } from "../../common/logger.js";
import { findProgram } from "../../os/launch.js";
import { PCM } from "../audio.js";
import { AUDIO_TRACK, matroskaFrameHeader, matroskaHeader } from "./matroska.js";

export type VideoFormat = "mp4" | "webm";

export interface EncoderOptions {
  /** The ffmpeg program: a path, or a name looked up on PATH. */
  ffmpeg: string;
  path: string;
  format: VideoFormat;
  /** The frames' size as written to the encoder. */
  input: { width: number; height: number };
  /** The video's size (even numbers; the encoder scales when it differs from `input`). */
  output: { width: number; height: number };
  /** The frame rate cap: how long the last frame is shown. */
  fps: number;
  /** Sound comes beside the frames (`writeAudio`), recorded as AAC in MP4, Opus in WebM. */
  sound?: boolean;
  log: Logger;
}

/** An encoder process: ffmpeg's arguments and what to say about it. */
export interface EncoderProcess {
  /** The ffmpeg program: a path, or a name looked up on PATH. */
  ffmpeg: string;
  /** ffmpeg's arguments; the frames come on its standard input (`pipe:0`). */
  args: string[];
  /** The frames' size as written to the encoder. */
  input: { width: number; height: number };
  /** The frame rate cap: how long the last frame is shown. */
  fps: number;
  /** Pipes ffmpeg writes to, read through `outputs`: its standard output, then fds 3, 4, … (0: none). */
  outputs?: number;
  /** What it makes, for messages: a file's path, or "the live stream". */
  target: string;
  /** What it is for, for the message when ffmpeg is missing: "record", "stream". */
  purpose: string;
  /** Its input has a track of sound (16-bit PCM, `PCM` of audio.ts) beside the frames: `writeAudio`. */
  sound?: boolean;
  log: Logger;
}

export interface EncoderEnd {
  /** The exit status, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** What went wrong, in words, when it did not end as asked. */
  error?: string;
}

/** Bytes of the encoder's error output kept, to say why it failed. */
const STDERR_KEPT = 8192;
/** How long a finishing encoder may take to write the end of its file before it is killed. */
export const FINISH_TIMEOUT_MS = 15_000;
/** Fragments of this length at most (µs): what an encoder killed part way can lose. */
const FRAGMENT_US = 1_000_000;

/** ffmpeg's arguments for a recording. Exported for the tests and the benchmark. */
export function encoderArguments(options: Omit<EncoderOptions, "ffmpeg" | "log">): string[] {
  const { input, output, format, path, sound: withSound } = options;
  const filters: string[] = [];
  if (input.width !== output.width || input.height !== output.height) {
    filters.push(`scale=${output.width}:${output.height}:flags=bilinear`);
  }
  filters.push("format=yuv420p");
  const codec =
    format === "mp4"
      ? // No lookahead and no B-frames, so that a frame is in the file about when it was captured.
        // ultrafast: half the CPU of veryfast per 1080p frame for twice the bytes (bench/recording.ts:
        // a typical agent session is still under 3 MB a minute).
        ["-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-crf", "30", "-g", "600"]
      : ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-crf", "12", "-b:v", "1M"];
  const sound = !withSound
    ? ["-an"]
    : [
        ...["-map", "0:v", "-map", "0:a"],
        ...(format === "mp4" ? ["-c:a", "aac", "-b:a", "128k"] : ["-c:a", "libopus", "-b:a", "96k"]),
      ];
  const container =
    format === "mp4"
      ? [
          "-movflags",
          "+frag_keyframe+empty_moov+default_base_moof",
          "-frag_duration",
          String(FRAGMENT_US),
          "-f",
          "mp4",
        ]
      : ["-f", "webm"];
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
    ...sound,
    "-fps_mode",
    "vfr",
    // Each frame keeps its millisecond: by default the time base is 1/fps, and a frame captured 40 ms
    // after a click would be placed 60 ms earlier, before it.
    "-enc_time_base",
    "1:1000",
    "-vf",
    filters.join(","),
    ...codec,
    ...container,
    // Each finished fragment goes to the file at once, not when ffmpeg's 32 KiB buffer fills.
    "-flush_packets",
    "1",
    "-y",
    `file:${path}`,
  ];
}

export class VideoEncoder {
  private stderrTail = "";
  private finishing = false;
  private killed = false;
  private writeError: Error | undefined;
  readonly ended: Promise<EncoderEnd>;
  /** What ffmpeg writes on its output pipes (`EncoderProcess.outputs`), in order. */
  readonly outputs: Readable[];

  private constructor(
    private readonly child: ChildProcess & { stdin: Writable; stderr: Readable },
    private readonly options: EncoderProcess,
  ) {
    this.outputs = child.stdio.filter((_, fd) => fd === 1 || fd > 2).filter(Boolean) as Readable[];
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_KEPT);
    });
    // A write after the encoder died fails with EPIPE: the exit says why.
    child.stdin.on("error", (err) => {
      this.writeError ??= err;
    });
    this.ended = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        const asked = this.finishing && code === 0;
        resolve({ code, signal, ...(asked ? {} : { error: this.describeFailure(code, signal) }) });
      });
    });
  }

  /** Starts ffmpeg recording to a file; rejects with a `CommandError` saying what is missing. */
  static start(options: EncoderOptions): Promise<VideoEncoder> {
    return VideoEncoder.launch({
      ffmpeg: options.ffmpeg,
      args: encoderArguments(options),
      input: options.input,
      fps: options.fps,
      target: options.path,
      purpose: "record",
      sound: options.sound,
      log: options.log,
    });
  }

  /** Starts ffmpeg and writes the stream's header; rejects with a `CommandError` saying what is missing. */
  static async launch(options: EncoderProcess): Promise<VideoEncoder> {
    const program = findProgram(options.ffmpeg);
    if (!program) {
      throw new CommandError(
        "unavailable",
        `Cannot ${options.purpose}: ffmpeg was not found (${options.ffmpeg}). Install it (Debian: apt-get install ffmpeg, ` +
          "or scripts/install-deps.sh), or name it with HANGAR_FFMPEG",
      );
    }
    const outputs = options.outputs ?? 0;
    const pipes = Array.from({ length: Math.max(0, outputs - 1) }, () => "pipe" as const);
    const child = spawn(program, options.args, {
      stdio: ["pipe", outputs > 0 ? "pipe" : "ignore", "pipe", ...pipes],
      detached: true,
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (err) =>
        reject(
          new CommandError("unavailable", `Cannot ${options.purpose}: ffmpeg did not start: ${err.message}`),
        ),
      );
    });
    const encoder = new VideoEncoder(child as ChildProcess & { stdin: Writable; stderr: Readable }, options);
    options.log.debug({ pid: child.pid, target: options.target }, "video encoder started");
    const audio = options.sound ? { audio: PCM } : {};
    await encoder.write(matroskaHeader({ ...options.input, frameMs: 1000 / options.fps, ...audio }));
    return encoder;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether the encoder still takes frames. */
  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && !this.writeError;
  }

  /**
   * Writes one frame (RGBA rows of the input size) at `timestampMs` since the start. Resolves once
   * the encoder has taken the bytes, so that `pixels` may then be reused.
   */
  async writeFrame(timestampMs: number, pixels: Buffer): Promise<void> {
    await this.write(matroskaFrameHeader(timestampMs, pixels.length), pixels);
  }

  /**
   * Writes a block of sound (16-bit PCM, `PCM` of audio.ts) at `timestampMs`, between frames; a
   * block that comes when the encoder has stopped is dropped.
   */
  writeAudio(timestampMs: number, pcm: Buffer) {
    if (!this.options.sound) return;
    this.write(matroskaFrameHeader(timestampMs, pcm.length, AUDIO_TRACK), pcm).catch(() => undefined);
  }

  /** Ends the input and waits for the file to be finished; kills the encoder if it takes too long. */
  async finish(timeoutMs = FINISH_TIMEOUT_MS): Promise<EncoderEnd> {
    this.finishing = true;
    this.child.stdin.end();
    const timer = setTimeout(() => {
      this.options.log.warn({ pid: this.pid }, "the video encoder did not finish in time; killed");
      this.kill();
    }, timeoutMs);
    try {
      return await this.ended;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Kills the encoder's process group at once (what it wrote so far stays playable). */
  kill() {
    this.killed = true;
    if (this.child.pid === undefined || this.child.exitCode !== null || this.child.signalCode !== null)
      return;
    try {
      process.kill(-this.child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }

  private write(...chunks: Buffer[]): Promise<void> {
    const { stdin } = this.child;
    return new Promise((resolve, reject) => {
      if (!this.running || stdin.writableEnded) {
        reject(new Error("the video encoder has stopped"));
        return;
      }
      for (const [i, chunk] of chunks.entries()) {
        if (i < chunks.length - 1) stdin.write(chunk);
        else stdin.write(chunk, (err) => (err ? reject(err) : resolve()));
      }
    });
  }

  private describeFailure(code: number | null, signal: NodeJS.Signals | null): string {
    const said = this.stderrTail.trim().split("\n").filter(Boolean);
    const full = said.find((line) => /no space left on device/i.test(line));
    if (full) return `No space left on device: the disk of ${this.options.target} is full`;
    if (this.killed) return "the encoder was stopped by force";
    const how = signal ? `was killed (${signal})` : `exited with status ${code}`;
    const last = said.at(-1);
    return `the video encoder ${how}${last ? `: ${last.slice(0, 300)}` : ""}`;
  }
}

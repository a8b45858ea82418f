/** Reads videos back the way a person's player would: ffprobe for their frames, ffmpeg for pixels. */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export interface ProbedVideo {
  codec: string;
  width: number;
  height: number;
  /** Seconds, as the container says. */
  duration: number;
  /** Each decoded frame's time in seconds. */
  frames: number[];
}

/** Decodes every frame of the video (ffprobe fails on a file it cannot play). */
export async function probeVideo(path: string): Promise<ProbedVideo> {
  const { stdout } = await execFileAsync("ffprobe", [
    "-v",
    "error",
    "-select_streams",
    "v:0",
    "-show_entries",
    "format=duration:stream=codec_name,width,height:frame=pts_time",
    "-of",
    "json",
    path,
  ]);
  const info = JSON.parse(stdout) as {
    format: { duration?: string };
    streams: { codec_name: string; width: number; height: number }[];
    frames: { pts_time: string }[];
  };
  const stream = info.streams[0];
  const frames = info.frames.map((f) => Number(f.pts_time));
  return {
    codec: stream.codec_name,
    width: stream.width,
    height: stream.height,
    duration: Number(info.format.duration ?? frames.at(-1) ?? 0),
    frames,
  };
}

/**
 * The colour [r, g, b] at (x, y) of the frame shown at `seconds`: the last frame whose time is not
 * after it (ffmpeg's `-ss` would skip a frame that started before and is still shown).
 */
export async function pixelAt(path: string, seconds: number, x: number, y: number): Promise<number[]> {
  const { frames } = await probeVideo(path);
  const index = frames.filter((t) => t <= seconds + 1e-6).length - 1;
  if (index < 0) throw new Error(`no frame at ${seconds} s in ${path}`);
  const { stdout } = await execFileAsync(
    "ffmpeg",
    [
      "-v",
      "error",
      "-i",
      path,
      "-vf",
      // 2x2: 4:2:0 chroma has no single-pixel crop.
      `crop=2:2:${x}:${y}`,
      "-fps_mode",
      "passthrough",
      "-f",
      "rawvideo",
      "-pix_fmt",
      "rgb24",
      "pipe:1",
    ],
    { encoding: "buffer", maxBuffer: 64 * 1024 * 1024 },
  );
  const at = index * 12;
  return [...stdout.subarray(at, at + 3)];
}

/** Whether two colours are alike within what 4:2:0 video coding changes. */
export function near(colour: number[], expected: number[], tolerance = 40): boolean {
  return colour.every((c, i) => Math.abs(c - expected[i]) <= tolerance);
}

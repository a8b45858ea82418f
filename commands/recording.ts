/**
 * Video recordings of the desktop: `start_recording`, `stop_recording`, `recording_status`. One
 * recording at a time per display; the frames are the server's own captures (nothing is captured
 * while the screen is still) and the file stays playable if the server or the encoder is killed.
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import type { CommandContext } from "../src/computer/core/command.js";
import { defineCommand } from "../src/computer/core/command.js";
import type { Recordings } from "../src/desktop/recording/recordings.js";

const format = z.enum(["mp4", "webm"]);

const progress = z.object({
  id: z.string(),
  path: z.string(),
  format,
  width: z.number(),
  height: z.number(),
  started: z.string(),
  elapsed_s: z.number(),
  frames: z.number(),
});

function recordings(ctx: CommandContext): Recordings {
  if (!ctx.recordings) throw new CommandError("unavailable", "This server does not record video");
  return ctx.recordings;
}

export const startRecording = defineCommand({
  name: "start_recording",
  description:
    "Starts a video of the desktop (H.264 in MP4, or VP8 in WebM) until stop_recording. Timestamps are " +
    "real: a still screen costs nothing and lasts as long in the video. One recording at a time.",
  params: z.object({
    path: z
      .string()
      .min(1)
      .optional()
      .describe("the video file; default: a new file in the server's recordings directory"),
    format: format
      .optional()
      .describe("mp4 (H.264) or webm (VP8); default from the path's extension, else mp4"),
    fps: z.number().min(1).max(30).optional().describe("frames a second at most (default 10)"),
    scale: z.number().gt(0).max(1).optional().describe("video pixels per screen pixel (default 1)"),
    max_width: z.number().int().min(64).max(7680).optional().describe("the video's width at most"),
    cursor: z.boolean().optional().describe("draw the pointer (default true)"),
    audio: z
      .boolean()
      .optional()
      .describe("record the desktop's sound as the video's audio track, when it has one (default true)"),
    overwrite: z.boolean().optional().describe("replace a file already at path (default false)"),
  }),
  result: progress,
  handler: (params, ctx) =>
    recordings(ctx).start({
      path: params.path,
      format: params.format,
      fps: params.fps,
      scale: params.scale,
      maxWidth: params.max_width,
      cursor: params.cursor,
      audio: params.audio,
      overwrite: params.overwrite,
    }),
});

export const stopRecording = defineCommand({
  name: "stop_recording",
  description:
    "Stops the recording, finishes its file and returns its path, duration, size and frame count. A " +
    "recording that ended by itself (full disk, encoder gone) is reported here with its error.",
  params: z.object({}),
  result: z.object({
    id: z.string(),
    path: z.string(),
    format,
    width: z.number(),
    height: z.number(),
    started: z.string(),
    duration_s: z.number(),
    size_bytes: z.number(),
    frames: z.number(),
    error: z.string().optional(),
  }),
  deadlineMs: () => 30_000,
  handler: (_params, ctx) => recordings(ctx).stop(),
});

export const recordingStatus = defineCommand({
  name: "recording_status",
  description: "The running recording (path, seconds so far, frames), or null.",
  params: z.object({}),
  result: z.object({ recording: progress.nullable() }),
  handler: (_params, ctx) => ({ recording: recordings(ctx).status() }),
});

export default [startRecording, stopRecording, recordingStatus];

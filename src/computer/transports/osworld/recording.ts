/**
 * `/start_recording` and `/end_recording`: Hangar's recorder (H.264 MP4, pointer drawn), the video
 * sent back as `recording.mp4`; 400s for a second start and a stop without a start, as upstream.
 */
import { readFile } from "node:fs/promises";
import { Hono } from "hono";
import type { ComputerEnv } from "../../http/env.js";
import { attempt, type OsworldCommands, runAction } from "./hangar-commands.js";
import { attachment, htmlError } from "./replies.js";

export function recordingRoutes(commands: OsworldCommands) {
  const routes = new Hono<ComputerEnv>();

  routes.post("/start_recording", async (c) => {
    const status = await attempt(() => runAction<{ recording: unknown }>(commands, "recordingStatus", {}));
    if (status.ok && status.value.recording) {
      return c.json({ status: "error", message: "Recording is already in progress." }, 400);
    }
    const started = await attempt(() =>
      runAction(commands, "startRecording", { format: "mp4", fps: 30, cursor: true }),
    );
    if (!started.ok) {
      return c.json(
        { status: "error", message: `Failed to start recording. Error: ${started.message}` },
        500,
      );
    }
    return c.json({ status: "success", message: "Started recording successfully." });
  });

  routes.post("/end_recording", async (c) => {
    const status = await attempt(() => runAction<{ recording: unknown }>(commands, "recordingStatus", {}));
    if (status.ok && !status.value.recording) {
      return c.json({ status: "error", message: "No recording in progress to stop." }, 400);
    }
    const stopped = await attempt(() =>
      runAction<{ path: string; size_bytes: number }>(commands, "stopRecording", {}),
    );
    if (!stopped.ok) return c.json({ status: "error", message: stopped.message }, 500);
    const data = await readFile(stopped.value.path).catch(() => undefined);
    if (!data?.length) return htmlError(c, 500, "Recording failed. The output file is missing or empty.");
    return c.body(new Uint8Array(data), 200, {
      "content-type": "video/mp4",
      "content-disposition": attachment("recording.mp4"),
    });
  });

  return routes;
}

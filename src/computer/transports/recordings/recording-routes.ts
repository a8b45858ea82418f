/**
 * What was recorded, for the console and for downloads, behind authentication: `GET /recordings`
 * lists the video recordings (newest first) with the running one. A video's bytes are read with
 * `GET /files/<path>` (ranges included).
 */
import { Hono } from "hono";
import type { Recordings } from "../../../desktop/recording/recordings.js";
import type { ComputerEnv } from "../../http/env.js";

export interface RecordingRoutesOptions {
  recordings: Recordings;
}

export function recordingRoutes(options: RecordingRoutesOptions) {
  const { recordings } = options;
  const app = new Hono<ComputerEnv>();
  app.get("/recordings", async (c) =>
    c.json({ recording: recordings.status(), recordings: await recordings.list() }),
  );
  return app;
}

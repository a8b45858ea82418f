/**
 * What was recorded, for the console and for downloads, behind authentication:
 *
 * - `GET /recordings`: the video recordings (newest first) and the running one; a video's bytes are
 *   read with `GET /files/<path>` (ranges included);
 * - `GET /trajectories`: the trajectories (newest first) and the open one;
 * - `GET /trajectories/{id}`: its lines (docs/trajectories.md) and the recordings that overlap it;
 * - `GET /trajectories/{id}.tar`: the whole trajectory, steps and screenshots, as one archive;
 * - `GET /trajectories/{id}/screenshots/{file}`: one screenshot;
 * - `GET /trajectories/schema.json`: the JSON Schema of a line.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Hono } from "hono";
import type { RecordingEntry, Recordings } from "../../../desktop/recording/recordings.js";
import { trajectoryJsonSchema } from "../../core/trajectories/schema.js";
import { TRAJECTORY_ID, type Trajectories } from "../../core/trajectories/trajectories.js";
import { replyByHand } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import { writeTar } from "../../http/tar.js";

export interface RecordingRoutesOptions {
  recordings: Recordings;
  trajectories: Trajectories;
}

const IMAGE_FILE = /^\d+\.(png|jpg|webp)$/;
const CONTENT_TYPES: Record<string, string> = { png: "image/png", jpg: "image/jpeg", webp: "image/webp" };

export function recordingRoutes(options: RecordingRoutesOptions) {
  const { recordings, trajectories } = options;
  const app = new Hono<ComputerEnv>();
  const noSuch = (id: string) => ({ detail: `No such trajectory: ${id.slice(0, 80)}` });

  app.get("/recordings", async (c) =>
    c.json({ recording: recordings.status(), recordings: await recordings.list() }),
  );

  app.get("/trajectories", async (c) =>
    c.json({
      trajectory: trajectories.status(),
      always: trajectories.always,
      trajectories: await trajectories.list(),
    }),
  );

  app.get("/trajectories/schema.json", (c) => c.json(trajectoryJsonSchema()));

  app.get("/trajectories/:name", async (c) => {
    const name = c.req.param("name");
    if (name.endsWith(".tar")) {
      const id = name.slice(0, -4);
      const files = await trajectories.files(id);
      if (!files) return c.json(noSuch(id), 404);
      const { res, done } = replyByHand(c, 200, {
        "content-type": "application/x-tar",
        "content-disposition": `attachment; filename="trajectory-${id}.tar"`,
        "content-length": String(files.reduce((sum, f) => sum + 512 + Math.ceil(f.size / 512) * 512, 1024)),
      });
      writeTar(
        res,
        files.map((f) => ({ ...f, name: `${id}/${f.name}` })),
      ).catch(() => res.destroy());
      return done();
    }
    const lines = await trajectories.read(name);
    if (!lines) return c.json(noSuch(name), 404);
    return c.json({ id: name, lines, recordings: overlapping(await recordings.list(), lines) });
  });

  app.get("/trajectories/:id/screenshots/:file", async (c) => {
    const id = c.req.param("id");
    const file = c.req.param("file");
    if (!TRAJECTORY_ID.test(id) || !IMAGE_FILE.test(file))
      return c.json({ detail: "No such screenshot" }, 404);
    const bytes = await readFile(join(trajectories.dir, id, "screenshots", file)).catch(() => undefined);
    if (!bytes) return c.json({ detail: "No such screenshot" }, 404);
    return c.body(new Uint8Array(bytes), 200, { "content-type": CONTENT_TYPES[file.split(".")[1]] });
  });
  return app;
}

/** The recordings whose time overlaps the trajectory's (from its start to its last line). */
function overlapping(
  list: RecordingEntry[],
  lines: { type: string; started?: string; time?: string; ended?: string }[],
) {
  const start = Date.parse(lines.find((l) => l.type === "start")?.started ?? "");
  const last = lines.at(-1);
  const end = Date.parse(last?.ended ?? last?.time ?? last?.started ?? "") || Date.now();
  return list.filter((r) => {
    const from = Date.parse(r.started);
    const to = from + (r.duration_s ?? (Date.now() - from) / 1000) * 1000;
    return from <= end && to >= start;
  });
}

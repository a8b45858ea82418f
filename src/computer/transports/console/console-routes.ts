/**
 * The web console's data routes (its page is served by common/web-page.ts), behind authentication: the
 * activity timeline (`GET /activity`, `GET /activity/screenshots/{id}`, `GET /events` as SSE, the
 * host's egress decisions in it by `POST /activity/egress`), the
 * status panel's `GET /console/status` and the live view (`WS /live`, see live-view.ts).
 */
import { type Context, Hono } from "hono";
import { z } from "zod";
import { PACKAGE_VERSION } from "../../../common/version.js";
import type { DesktopProvider } from "../../../desktop/backend.js";
import type { LiveStreams } from "../../../desktop/live/live-streams.js";
import type { ActivityEntry, ActivityLog } from "../../core/activity.js";
import type { ControlLease } from "../../core/control.js";
import type { Idleness } from "../../core/idleness.js";
import type { CommandRegistry } from "../../core/registry.js";
import { EVENT_STREAM_HEADERS, replyByHand } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import { liveMp4, PLAYER_REPEAT_MS } from "../../http/live-mp4.js";
import { egressNotes } from "./egress-notes.js";
import { consoleStreamSettings, liveView } from "./live-view.js";

export interface ConsoleOptions {
  registry: CommandRegistry;
  activity: ActivityLog;
  desktop: DesktopProvider;
  /** Who drives the desktop: the live view's Take control takes it (core/control.ts). */
  control: ControlLease;
  /** The H.264 live streams (`GET /live.mp4`, the live view's `"codec": "h264"`). */
  streams?: LiveStreams;
  features: string[];
  /** Whether the desktop is in use (`GET /activity/idle`); live viewers are told to it. */
  idleness?: Idleness;
}

/** An SSE client this far behind is dropped rather than buffered without end. */
const EVENTS_BACKLOG_LIMIT = 4 * 1024 * 1024;
/**
 * A comment this often keeps an idle stream open through proxies and load balancers, which cut
 * connections silent for 60 s or so (the page then opens it again, asking for what came after).
 */
const EVENTS_HEARTBEAT_MS = 25_000;
const started = Date.now();

/** The activity log's series (`ActivityLog.series`) on `/activity` and `/events`. */
const SERIES_HEADER = "x-activity-series";

const sinceQuery = z.object({ since: z.coerce.number().int().min(0).default(0) });

/** The console's data routes; mount them behind authentication. */
export function consoleRoutes(options: ConsoleOptions) {
  const { activity } = options;
  const app = new Hono<ComputerEnv>();

  app.get("/activity", (c) => {
    const query = sinceQuery.safeParse(c.req.query());
    if (!query.success) return c.json({ detail: "since: expected an entry id (a whole number)" }, 400);
    return c.json({ entries: activity.since(query.data.since) }, 200, { [SERIES_HEADER]: activity.series });
  });

  app.get("/activity/screenshots/:id", (c) => {
    const shot = activity.screenshot(Number(c.req.param("id")));
    if (!shot) return c.json({ detail: "No such screenshot (only the latest are kept)" }, 404);
    return c.body(new Uint8Array(shot.bytes), 200, {
      "content-type": `image/${shot.format}`,
      "x-screenshot-scale": String(shot.scale),
      "x-screenshot-origin": `${shot.origin.x},${shot.origin.y}`,
    });
  });

  app.get("/events", (c) => activityEvents(c, activity));
  // What the desktop's host saw of its connections, beside the commands (egress-notes.ts).
  app.post("/activity/egress", egressNotes(activity));

  // Whether the desktop is in use: what a host asks before putting it to sleep (core/idleness.ts).
  const { idleness } = options;
  if (idleness) app.get("/activity/idle", async (c) => c.json(await idleness.report()));

  app.get("/console/status", async (c) => {
    const display = await describeDisplay(options.desktop);
    return c.json({
      version: PACKAGE_VERSION,
      uptime_s: Math.round((Date.now() - started) / 1000),
      features: options.features,
      ...display,
    });
  });

  app.get("/control", (c) => c.json(options.control.state));

  app.get("/live", liveView(options));
  app.get("/live.mp4", (c) => liveMp4Route(c, options.streams, undefined, options.idleness));
  return app;
}

const liveMp4Query = z.object({
  fps: z.coerce.number().int().min(1).max(60).default(25),
  width: z.coerce.number().int().min(160).max(7680).optional(),
  audio: z.enum(["0", "1", "true", "false"]).default("1"),
});

/**
 * `GET /live.mp4[?fps=N&audio=0]`: the live stream as fragmented MP4 (http/live-mp4.ts), the same
 * encoder as the console's H.264 view at that rate; `still` ends it when a share link stops holding.
 */
export function liveMp4Route(
  c: Context<ComputerEnv>,
  streams: LiveStreams | undefined,
  still?: () => boolean,
  idleness?: Idleness,
) {
  if (!streams) return c.json({ detail: "This server has no H.264 stream" }, 503);
  const query = liveMp4Query.safeParse(c.req.query());
  if (!query.success) {
    const issue = query.error.issues[0];
    return c.json({ detail: `${issue.path.join(".")}: ${issue.message}` }, 400);
  }
  const audio = query.data.audio === "1" || query.data.audio === "true";
  const { fps, width } = query.data;
  const settings = { ...consoleStreamSettings(fps, audio, width), repeatStillMs: PLAYER_REPEAT_MS };
  if (idleness) c.env.outgoing.once("close", idleness.viewerJoined());
  return liveMp4(c, streams, settings, still);
}

/** `GET /events`: the kept entries after `since`, then each new one, as SSE. */
export function activityEvents(c: Context<ComputerEnv>, activity: ActivityLog) {
  const query = sinceQuery.safeParse(c.req.query());
  if (!query.success) return c.json({ detail: "since: expected an entry id (a whole number)" }, 400);
  const reply = replyByHand(c, 200, { ...EVENT_STREAM_HEADERS, [SERIES_HEADER]: activity.series });
  const { res } = reply;
  const send = (entry: ActivityEntry) => {
    if (res.writableLength > EVENTS_BACKLOG_LIMIT) return res.destroy();
    res.write(`id: ${entry.id}\ndata: ${JSON.stringify(entry)}\n\n`);
  };
  // A comment first, so that clients see the stream open even when nothing has happened yet.
  res.write(": activity\n\n");
  for (const entry of activity.since(query.data.since)) send(entry);
  const unsubscribeEntries = activity.subscribe(send);
  const heartbeat = setInterval(() => res.write(": heartbeat\n\n"), EVENTS_HEARTBEAT_MS).unref();
  const unsubscribe = () => {
    unsubscribeEntries();
    clearInterval(heartbeat);
  };
  res.on("error", unsubscribe);
  res.once("close", unsubscribe);
  return reply.done();
}

/** The backend and screen size, or why there is no display, in words. */
async function describeDisplay(desktop: DesktopProvider) {
  try {
    const backend = await desktop();
    return { backend: backend.name, display: await backend.screenSize(), display_error: null };
  } catch (err) {
    const message = (err as Error).message;
    return {
      backend: null,
      display: null,
      display_error: /^no display/i.test(message) ? message : `No display: ${message}`,
    };
  }
}

/**
 * Share links: a view-only link to the live view and the activity timeline that expires and can be
 * revoked. `POST /share` (authenticated like every route) creates one; the token in it is
 * `<id>.<expiry ms>.<HMAC-SHA256 of both>` under a key made at start (so every link dies with the
 * server), compared in constant time; it grants nothing but viewing. `DELETE /share/{id}` revokes.
 *
 * The link's routes, served before authentication and checked by their token alone:
 * `GET /shared/{token}/` (the console page, which sees it is a share link and shows the desktop and
 * the timeline only), `GET /shared/{token}/events` (the timeline, SSE), `WS /shared/{token}/live`
 * (frames only: the server refuses control and input on it, whatever a page sends) and
 * `GET /shared/{token}/live.mp4` (the H.264 stream).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { type Context, Hono } from "hono";
import { z } from "zod";
import type { DesktopProvider } from "../../../desktop/backend.js";
import type { LiveStreams } from "../../../desktop/live/live-streams.js";
import type { ActivityLog } from "../../core/activity.js";
import type { ControlLease } from "../../core/control.js";
import type { Idleness } from "../../core/idleness.js";
import type { CommandRegistry } from "../../core/registry.js";
import type { ComputerEnv } from "../../http/env.js";
import { activityEvents, liveMp4Route } from "./console-routes.js";
import { liveView } from "./live-view.js";

/** How often an open view checks that its link still holds. */
const LINK_CHECK_MS = 500;
/** `POST /share` takes a few fields. */
const MAX_BODY_BYTES = 4096;
/** The longest a link may live: a week. */
const MAX_TTL_S = 7 * 24 * 3600;

export interface SharedLink {
  id: string;
  expires: string;
}

export class ShareLinks {
  private readonly key = randomBytes(32);
  /** Links made and not yet expired (revoked ones are removed). */
  private readonly live = new Map<string, number>();

  create(ttlS: number): SharedLink & { token: string } {
    this.forgetExpired();
    const id = randomBytes(9).toString("base64url");
    const expires = Date.now() + Math.round(ttlS * 1000);
    this.live.set(id, expires);
    return {
      id,
      expires: new Date(expires).toISOString(),
      token: `${id}.${expires}.${this.sign(id, expires)}`,
    };
  }

  list(): SharedLink[] {
    this.forgetExpired();
    return [...this.live].map(([id, expires]) => ({ id, expires: new Date(expires).toISOString() }));
  }

  /** Revokes a link; false when there is no such link (or it had expired). */
  revoke(id: string): boolean {
    this.forgetExpired();
    return this.live.delete(id);
  }

  /** Why `token` does not open the view, or undefined when it does. */
  refusal(token: string): string | undefined {
    const [id, expiresText, signature, ...rest] = token.split(".");
    const expires = Number(expiresText);
    if (rest.length > 0 || !id || !signature || !Number.isSafeInteger(expires)) return "Not a share link";
    const wanted = Buffer.from(this.sign(id, expires));
    const given = Buffer.from(signature);
    if (given.length !== wanted.length || !timingSafeEqual(given, wanted))
      return "Not a share link of this server";
    if (Date.now() >= expires) return "This share link has expired";
    if (!this.live.has(id)) return "This share link was revoked";
    return undefined;
  }

  private sign(id: string, expires: number): string {
    return createHmac("sha256", this.key).update(`${id}.${expires}`).digest("base64url");
  }

  private forgetExpired() {
    const now = Date.now();
    for (const [id, expires] of this.live) if (expires <= now) this.live.delete(id);
  }
}

export interface ShareOptions {
  links: ShareLinks;
  registry: CommandRegistry;
  activity: ActivityLog;
  desktop: DesktopProvider;
  control: ControlLease;
  streams?: LiveStreams;
  /** Told of each viewer of a link's live view (a viewer keeps the desktop from counting as idle). */
  idleness?: Idleness;
  /** The console page's HTML (served at the link's own address). */
  page: (c: Context<ComputerEnv>) => Response | Promise<Response>;
}

const createBody = z.object({ ttl_s: z.number().int().min(1).max(MAX_TTL_S).default(3600) }).strict();

/** `POST /share`, `GET /share`, `DELETE /share/{id}`: mount behind authentication. */
export function shareRoutes({ links }: Pick<ShareOptions, "links">) {
  const app = new Hono<ComputerEnv>();
  app.post("/share", async (c) => {
    if (Number(c.req.header("content-length") ?? 0) > MAX_BODY_BYTES) {
      return c.json({ detail: `Body too large: at most ${MAX_BODY_BYTES} bytes` }, 413);
    }
    const raw = await c.req.text();
    if (raw.length > MAX_BODY_BYTES)
      return c.json({ detail: `Body too large: at most ${MAX_BODY_BYTES} bytes` }, 413);
    let body: unknown = {};
    try {
      body = raw.trim() ? JSON.parse(raw) : {};
    } catch {
      return c.json({ detail: "Body is not JSON" }, 400);
    }
    const parsed = createBody.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return c.json({ detail: `Invalid body: ${issue.path.join(".") || "body"}: ${issue.message}` }, 400);
    }
    const link = links.create(parsed.data.ttl_s);
    return c.json({ ...link, url: `/shared/${link.token}/` }, 201);
  });
  app.get("/share", (c) => c.json({ links: links.list() }));
  app.delete("/share/:id", (c) =>
    links.revoke(c.req.param("id")) ? c.body(null, 204) : c.json({ detail: "No such share link" }, 404),
  );
  return app;
}

/** The link's own routes, checked by their token: mount before authentication. */
export function sharedRoutes(options: ShareOptions) {
  const app = new Hono<ComputerEnv>();
  app.use("/shared/:token/*", async (c, next) => {
    const refusal = options.links.refusal(c.req.param("token"));
    if (refusal) return c.json({ detail: refusal }, 403);
    await next();
  });
  const holds = (c: Context) => {
    const token = c.req.param("token") ?? "";
    return () => options.links.refusal(token) === undefined;
  };
  const live = liveView({ ...options, viewOnly: true, allowed: holds });
  app.get("/shared/:token/", (c) => options.page(c));
  app.get("/shared/:token/events", (c) => {
    const reply = activityEvents(c, options.activity);
    // The stream ends when the link expires or is revoked.
    const res = c.env?.outgoing;
    if (res) {
      const still = holds(c);
      const watch = setInterval(() => !still() && res.end(), LINK_CHECK_MS);
      res.once("close", () => clearInterval(watch));
    }
    return reply;
  });
  app.get("/shared/:token/live", live);
  app.get("/shared/:token/live.mp4", (c) => liveMp4Route(c, options.streams, holds(c), options.idleness));
  return app;
}

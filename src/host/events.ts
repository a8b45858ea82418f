/**
 * What happens to desktops, as events an operator can watch: created, ready, claimed, released,
 * hibernated, resumed, stopped, deleted, failed. The host service emits them here; `GET
 * /svc/events` streams them as Server-Sent Events (a client that reconnects with `Last-Event-ID`
 * is given what it missed, while the last 1,000 are kept), webhooks.ts posts them to configured
 * URLs, and metrics.ts counts them.
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { z } from "zod";
import { HostError } from "./errors.js";

export const LIFECYCLE_TYPES = [
  "create",
  "ready",
  "run",
  "stop",
  "claim",
  "release",
  "hibernate",
  "resume",
  "delete",
  "failure",
] as const;
export type LifecycleType = (typeof LIFECYCLE_TYPES)[number];

export interface LifecycleFields {
  /** The desktop's name. */
  desktop?: string;
  runtime?: string;
  pool?: string;
  /** How long the step took, where it has a length (a claim, a resume, a start to ready). */
  ms?: number;
  /** What went wrong, for `failure`. */
  error?: string;
  /** For `hibernate`: what was kept (`memory`, `paused` or `disk`, desktops/hibernation.ts). */
  mode?: string;
  /** For a `hibernate` the service did on its own (auto-pause when idle): why. */
  reason?: string;
  /** For a `resume` that traffic caused: what woke it. */
  woke?: string;
}

export interface LifecycleEvent extends LifecycleFields {
  /** Increasing from 1 in this run of the service (the SSE event id). */
  id: number;
  type: LifecycleType;
  /** ISO 8601. */
  time: string;
}

export type LifecycleListener = (event: LifecycleEvent) => void;

/** Events kept for clients that reconnect. */
const KEPT = 1000;

export class LifecycleEvents {
  private readonly kept: LifecycleEvent[] = [];
  private readonly listeners = new Set<LifecycleListener>();
  private lastId = 0;

  emit(type: LifecycleType, fields: LifecycleFields = {}): LifecycleEvent {
    const event: LifecycleEvent = { id: ++this.lastId, type, time: new Date().toISOString(), ...fields };
    this.kept.push(event);
    if (this.kept.length > KEPT) this.kept.shift();
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure never stops the others or the step that emitted.
      }
    }
    return event;
  }

  /** The kept events after `id` (all kept ones for 0). */
  since(id: number): LifecycleEvent[] {
    const first = this.kept.findIndex((event) => event.id > id);
    return first < 0 ? [] : this.kept.slice(first);
  }

  /** Calls `listener` with every later event; returns what stops it. */
  subscribe(listener: LifecycleListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get subscribers(): number {
    return this.listeners.size;
  }
}

const eventsQuery = z.object({
  since: z.coerce.number().int().min(0).optional(),
  type: z
    .string()
    .transform((text) => text.split(",").filter(Boolean))
    .pipe(z.array(z.enum(LIFECYCLE_TYPES)))
    .optional(),
  desktop: z.string().min(1).max(200).optional(),
});

/** A comment line every so often keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

/**
 * `GET /svc/events[?since=ID][&type=claim,release][&desktop=NAME]`: the kept events after `since`
 * (or after the `Last-Event-ID` header a reconnecting EventSource sends; none without either), then
 * each new one as it happens, as `event: <type>`, `id: <id>`, `data: <json>`.
 */
export function eventRoutes(app: Hono, events: LifecycleEvents) {
  app.get("/svc/events", (c) => {
    const parsed = eventsQuery.safeParse(c.req.query());
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new HostError(
        "invalid_params",
        `Invalid query: ${issue?.path.join(".") || "query"}: ${issue?.message ?? "invalid"}` +
          ` (types: ${LIFECYCLE_TYPES.join(", ")})`,
      );
    }
    const { type, desktop } = parsed.data;
    const lastEventId = Number(c.req.header("last-event-id"));
    const since = parsed.data.since ?? (Number.isInteger(lastEventId) ? lastEventId : undefined);
    const wanted = (event: LifecycleEvent) =>
      (!type || type.includes(event.type)) && (!desktop || event.desktop === desktop);
    return streamSSE(c, async (stream) => {
      const write = (event: LifecycleEvent) =>
        stream.writeSSE({ event: event.type, id: String(event.id), data: JSON.stringify(event) });
      // Events that arrive while the backlog is written wait their turn, in order.
      let chain = Promise.resolve();
      const queue = (event: LifecycleEvent) => {
        if (wanted(event)) chain = chain.then(() => write(event)).catch(() => undefined);
      };
      const unsubscribe = events.subscribe(queue);
      const closed = new Promise<void>((resolve) => stream.onAbort(resolve));
      try {
        if (since !== undefined) for (const event of events.since(since)) queue(event);
        // An immediate comment: the client knows the stream is open before anything happens.
        await stream.write(": connected\n\n");
        while (!stream.aborted && !stream.closed) {
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([closed, new Promise((resolve) => (timer = setTimeout(resolve, KEEPALIVE_MS)))]);
          clearTimeout(timer);
          if (!stream.aborted) await chain.then(() => stream.write(": keepalive\n\n"));
        }
      } finally {
        unsubscribe();
      }
    });
  });
}

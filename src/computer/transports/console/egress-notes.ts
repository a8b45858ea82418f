/**
 * `POST /activity/egress {"events": [...]}`: the desktop's host tells the timeline what its egress
 * proxy decided about this desktop's connections (docs/egress.md), so that the console shows
 * "refused evil.example.net:443" beside the step that tried it, and trajectories keep it. The
 * host service sends them as they happen; the events are its audit's, checked field by field here.
 * Behind the server's authentication like every console route: whoever may run commands here may
 * add notes, and the notes say they came through this route (`transport: "egress"`).
 */
import type { Context } from "hono";
import { z } from "zod";
import type { ActivityLog } from "../../core/activity.js";
import { readJsonBody } from "../../http/body.js";
import type { ComputerEnv } from "../../http/env.js";

/** Events taken in one request (the host sends what gathered in a moment: far fewer). */
export const MAX_EGRESS_EVENTS = 200;
/** A request's body at most: 200 events of a few hundred bytes each. */
const BODY_LIMIT = 256 * 1024;

const text = (max: number) => z.string().max(max);
const egressEvent = z
  .object({
    time: z.iso.datetime({ offset: true }).optional(),
    via: z.enum(["connect", "proxy", "http", "tls", "dns"]),
    name: text(253).nullable(),
    address: text(64).nullable(),
    port: z.number().int().min(0).max(65535).nullable(),
    allowed: z.boolean(),
    rule: text(500),
    bytesOut: z.number().int().min(0).optional(),
    bytesIn: z.number().int().min(0).optional(),
    credential: text(200).optional(),
  })
  .strip();
const egressBody = z.object({ events: z.array(egressEvent).max(MAX_EGRESS_EVENTS) });

type EgressEvent = z.infer<typeof egressEvent>;

/** The route's handler, adding each event to `activity` as a note. */
export function egressNotes(activity: ActivityLog) {
  return async (c: Context<ComputerEnv>) => {
    const read = await readJsonBody(c.env.incoming, BODY_LIMIT);
    if (!read.ok) return c.json({ detail: read.detail }, read.status);
    const body = egressBody.safeParse(read.value);
    if (!body.success) {
      const issue = body.error.issues[0];
      const where = issue.path.length ? `${issue.path.join(".")}: ` : "";
      return c.json({ detail: `Invalid egress events: ${where}${issue.message}` }, 400);
    }
    for (const event of body.data.events) {
      activity.note({
        transport: "egress",
        command: event.allowed ? "allowed" : "refused",
        text: describe(event),
        params: event,
        success: event.allowed,
      });
    }
    return c.json({ added: body.data.events.length });
  };
}

/** "refused evil.example.net:443 (not in the allow list)", "allowed api.example.com:443 (…), 2.1 kB in". */
export function describe(event: EgressEvent): string {
  const target = event.name ?? event.address ?? "a connection";
  const where = event.port ? `${target}:${event.port}` : target;
  const by = event.via === "dns" ? "the name " : "";
  let line = `${event.allowed ? "allowed" : "refused"} ${by}${where} (${event.rule})`;
  if (event.credential) line += `, with the credential ${event.credential}`;
  if (event.bytesIn !== undefined || event.bytesOut !== undefined) {
    line += `, ${size(event.bytesOut ?? 0)} out, ${size(event.bytesIn ?? 0)} in`;
  }
  return line;
}

function size(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${(bytes / 1000).toFixed(1)} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}
